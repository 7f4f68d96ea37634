"""The drift instrument against the simulator, whose checkpoints perturb logits by documented
amounts (pytest_glmf/sim/logits.py: `expected_stats` is the configured truth, counted directly).

Three simulators run side by side (the FP8 oracle and the two NVFP4 variants), started through the
public launcher; the reference and the scores go through the `glmf drift` command line, so this
is the recipe's procedure end to end: 40 prompts, 128 greedy tokens, then teacher-forced scoring.
"""
from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from pytest_glmf.config.lanes import builtin_lanes
from pytest_glmf.gates.drift.cli import cli as drift_cli
from pytest_glmf.gates.drift.reference import compare
from pytest_glmf.gates.drift.table import render_table as drift_table
from pytest_glmf.launch import launch_lane
from pytest_glmf.sim import logits as sim_logits

# one worker runs the whole module under `--dist loadgroup`, so the three simulators start once
pytestmark = pytest.mark.xdist_group("glmf-drift-sim")

N_PROMPTS, MAX_TOKENS, K = 40, 128, 20
CHECKPOINTS = ("fp8", "nvidia", "libertai")


def sim_lane(checkpoint: str):
    lane = builtin_lanes()["batch"]
    return dataclasses.replace(lane, name=f"drift-{checkpoint}", time_scale=0.002,
                               sim_args=["--checkpoint", checkpoint])


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Reference on fp8, then every checkpoint scored against it (fp8 itself: self vs self)."""
    tmp = tmp_path_factory.mktemp("drift-sim")
    with ThreadPoolExecutor(3) as pool:
        futures = {c: pool.submit(launch_lane, sim_lane(c), tmp, f"drift-{c}") for c in CHECKPOINTS}
        servers = {}
        try:
            for c, f in futures.items():
                servers[c] = f.result()
        except Exception:
            for f in futures.values():
                if f.done() and f.exception() is None:
                    f.result().stop()
            raise
    try:
        ref = tmp / "ref.json"
        assert drift_cli(["reference", "--url", servers["fp8"].base_url, "--out", str(ref),
                          "--prompts", str(N_PROMPTS), "--max-tokens", str(MAX_TOKENS), "--k", str(K)]) == 0
        files = {}
        for c in CHECKPOINTS:
            files[c] = tmp / f"{c}.json"
            assert drift_cli(["score", "--url", servers[c].base_url, "--reference", str(ref),
                              "--out", str(files[c]), "--label", c]) == 0
    finally:
        for s in servers.values():
            s.stop()
    reference = json.loads(ref.read_text())
    cands = {c: json.loads(files[c].read_text()) for c in CHECKPOINTS}
    pair = compare(reference, [cands["nvidia"], cands["libertai"]])
    self_ = compare(reference, [cands["fp8"]])
    return {"reference": reference, "candidates": cands, "pair": pair, "self": self_}


@pytest.fixture(scope="module")
def truth():
    nvidia = sim_logits.LogitModel("nvidia")
    libertai = sim_logits.LogitModel("libertai")
    return {"nvidia": sim_logits.expected_stats("nvidia", other=libertai, n=8000),
            "libertai": sim_logits.expected_stats("libertai", other=nvidia, n=8000)}


def _within(measured_value: float, ci: list[float], expected: float) -> bool:
    """|measured - expected| within 3 standard errors, the SE taken from the 95 % CI over prompts."""
    se = (ci[1] - ci[0]) / (2 * 1.96)
    return abs(measured_value - expected) <= 3 * se


def test_reference_is_what_the_recipe_describes(measured):
    ref = measured["reference"]
    assert ref["prompt_set"]["n"] == N_PROMPTS and ref["k"] == K
    assert all(len(p["output_ids"]) == MAX_TOKENS for p in ref["prompts"])
    assert ref["self_check"]["exact"] is True and ref["oracle_argmax_disagreement"] == 0
    assert ref["provenance"]["engine"] == "sglang" and ref["provenance"]["checkpoint"] == "fp8"
    # templated by the server itself (/v1/chat/completions with return_prompt_token_ids)
    assert ref["provenance"]["chat_template"] == "server"


def test_self_vs_self_is_exactly_zero(measured):
    s = measured["self"]["candidates"]["fp8"]
    assert (s["mean_abs_dlogp"], s["max_abs_dlogp"], s["argmax_mismatch"], s["kl_topk"]) == (0.0, 0.0, 0.0, 0.0)
    for c in CHECKPOINTS:
        assert measured["candidates"][c]["self_check"]["self_abs_dlogp"] == 0.0


@pytest.mark.parametrize("checkpoint", ["nvidia", "libertai"])
def test_configured_flip_rate_and_drift_are_recovered(measured, truth, checkpoint):
    s = measured["pair"]["candidates"][checkpoint]
    want = truth[checkpoint]
    assert _within(s["argmax_mismatch"], s["argmax_mismatch_ci95"], want["argmax_mismatch"]), (s["argmax_mismatch"], want)
    assert _within(s["mean_abs_dlogp"], s["ci95"], want["mean_abs_dlogp"]), (s["mean_abs_dlogp"], want)


def test_shared_flip_rate_is_recovered(measured, truth):
    pair = measured["pair"]["pair"]
    want = truth["nvidia"]["shared_flip_rate"]
    n = measured["pair"]["candidates"]["nvidia"]["n_tokens"]
    # binomial SE widened x2 for the correlation of tokens within a prompt (a design effect)
    se = 2 * (want * (1 - want) / n) ** 0.5
    assert abs(pair["shared_flip_rate"] - want) <= 3 * se, (pair["shared_flip_rate"], want)
    assert abs(pair["a_vs_b"]["argmax_mismatch"] - truth["nvidia"]["pair_mismatch"]) <= 3 * 2 * (
        truth["nvidia"]["pair_mismatch"] * (1 - truth["nvidia"]["pair_mismatch"]) / n) ** 0.5


def test_the_better_variant_wins_with_a_ci_excluding_zero(measured):
    pair = measured["pair"]["pair"]
    assert pair["a"] == "nvidia" and pair["b"] == "libertai"
    assert pair["wins"][0] > pair["wins"][1], pair["wins"]
    assert pair["gap_ci95"][0] > 0, pair["gap_ci95"]
    table = drift_table(measured["pair"])
    print("\n" + table)
    assert "nvidia closer on" in table and "(excludes 0)" in table
