"""The noise floor, the drift above it and the greedy-answer checks, against simulators whose
faults are seeded truths (pytest_glmf/sim/faults.py): `logprob-noise=S` (each scoring's log-probs
get S * N(0, 1): a floor of 2 S / sqrt(pi)), `logprob-shift=D` (a candidate drifting by exactly D
per token), `runaway=P` (the answers `is_runaway` picks never stop).

Two simulators (an FP8 oracle and an FP8 candidate, whose faults are switched at run time
through POST /sim/faults) and an NVFP4 one (exact scoring: a floor of exactly 0). Answers are
made short with `--answer-tokens 24:72` and split 60/40 into reasoning and content by
`--reasoning-parser glm45` (logits.py).
"""
from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from pytest_glmf.config.lanes import builtin_lanes
from pytest_glmf.gates.drift import assert_drift, make_drift_reference, measure_drift
from pytest_glmf.gates.drift.prompts import load_chat_prompts
from pytest_glmf.gates.drift.reference import sim_template
from pytest_glmf.launch import launch_lane
from pytest_glmf.sim import logits as sim_logits
from pytest_glmf.sim.faults import expected_self_abs_dlogp, is_runaway
from pytest_glmf.sim.tokenizer import apply_chat_template

pytestmark = pytest.mark.xdist_group("glmf-drift-floor")

N_PROMPTS, MAX_TOKENS, K = 24, 48, 8
ANSWER_MAX = 96
NOISE, SHIFT = 0.05, 0.3
SIM_ARGS = ["--answer-tokens", "24:72", "--reasoning-parser", "glm45"]


def sim_lane(name: str, checkpoint: str):
    lane = builtin_lanes()["batch"]
    return dataclasses.replace(lane, name=f"floor-{name}", time_scale=0.002,
                               sim_args=[*SIM_ARGS, "--checkpoint", checkpoint])


def set_faults(server, *faults: str) -> None:
    httpx.post(f"{server.base_url}/sim/faults", json={"faults": list(faults), "replace": True}).raise_for_status()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drift-floor")
    lanes = {"oracle": sim_lane("oracle", "fp8"), "cand": sim_lane("cand", "fp8"), "nvidia": sim_lane("nvidia", "nvidia")}
    with ThreadPoolExecutor(3) as pool:
        futures = {n: pool.submit(launch_lane, lane, tmp, n) for n, lane in lanes.items()}
    started = {n: f.result() for n, f in futures.items() if f.exception() is None}
    if len(started) < len(lanes):
        for s in started.values():
            s.stop()
        next(f.result() for f in futures.values() if f.exception() is not None)
    yield started
    for s in started.values():
        s.stop()


def _reference(server, *faults: str, score_concurrency: int = 1):
    set_faults(server, *faults)
    return make_drift_reference(server.base_url, prompts=N_PROMPTS, max_tokens=MAX_TOKENS, k=K,
                                template=sim_template(), score_concurrency=score_concurrency,
                                answer_max_tokens=ANSWER_MAX)


@pytest.fixture(scope="module")
def noisy_reference(servers):
    return _reference(servers["oracle"], f"logprob-noise={NOISE}", score_concurrency=4)


@pytest.fixture(scope="module")
def exact_reference(servers):
    return _reference(servers["oracle"])


def _within(value: float, ci: list[float], truth: float, n_se: float = 4.0) -> bool:
    """|value - truth| within n_se standard errors, the SE read off the 95 % CI over prompts (a
    single CI misses the truth 1 time in 20 by design; 4 SE, about 1 in 16,000)."""
    se = (ci[1] - ci[0]) / (2 * 1.96)
    return abs(value - truth) <= n_se * se


def _measure(server, ref, *faults: str, **kw):
    set_faults(server, *faults)
    return measure_drift(server.base_url, ref, template=sim_template(), agreement_tokens=4, **kw)


@pytest.fixture(scope="module")
def pure_noise(servers, noisy_reference):
    return _measure(servers["cand"], noisy_reference, f"logprob-noise={NOISE}", score_concurrency=4)


@pytest.fixture(scope="module")
def shifted(servers, noisy_reference):
    return _measure(servers["cand"], noisy_reference, f"logprob-noise={NOISE}", f"logprob-shift={SHIFT}",
                    "runaway=0.5", score_concurrency=4)


def test_the_floor_of_a_noisy_engine_is_the_injected_one(pure_noise):
    s = pure_noise.stats
    want = expected_self_abs_dlogp(NOISE)   # both servers equally noisy: the pair's floor is either's
    assert pure_noise.self_check_mode == "floor" and s["self_check_mode"] == "floor"
    assert _within(s["floor_abs_dlogp"], s["floor_ci95"], want), (s["floor_abs_dlogp"], want, s["floor_ci95"])
    assert abs(s["oracle_floor_abs_dlogp"] - want) < 0.1 * want and abs(s["candidate_floor_abs_dlogp"] - want) < 0.1 * want
    assert s["floor_concurrency"] == {"oracle": 4, "candidate": 4}


def test_a_pure_noise_candidate_has_no_excess_and_passes(pure_noise):
    s = pure_noise.stats
    # raw drift is the floor (~0.056 nats): a bound on it would judge the instrument, not the model
    assert s["mean_abs_dlogp"] > 0.8 * expected_self_abs_dlogp(NOISE)
    assert _within(s["excess_abs_dlogp"], s["excess_ci95"], 0.0), (s["excess_abs_dlogp"], s["excess_ci95"])
    assert abs(s["excess_abs_dlogp"]) < 0.01 and s["excess_rms_ci95"][0] < 0.02
    assert_drift(pure_noise, excess_abs_dlogp={"max": 0.02}, floor_abs_dlogp={"max": 0.1},
                 output_length_ratio={"max": 1.0}, runaway_share={"max": 0}, greedy_agreement={"min": 1.0},
                 finish_reason_changed={"max": 0})


def test_a_known_shift_under_a_known_floor_is_recovered_within_its_ci(shifted):
    s = shifted.stats
    assert _within(s["excess_rms_dlogp"], s["excess_rms_ci95"], SHIFT), (s["excess_rms_dlogp"], s["excess_rms_ci95"])
    # mean |dlogp| - floor is a lower and mean |dlogp| an upper bound of the noise-free drift
    assert s["excess_abs_dlogp"] < SHIFT and _within(s["mean_abs_dlogp"], s["ci95"], SHIFT)
    # a shift well above the noise: the subtraction is short by the whole floor (the estimator's known bias)
    assert _within(s["excess_abs_dlogp"], s["excess_ci95"], SHIFT - s["floor_abs_dlogp"])
    with pytest.raises(pytest.fail.Exception) as exc:
        assert_drift(shifted, excess_abs_dlogp={"max": 0.15}, source="thresholds.yaml: lanes.x.drift")
    msg = str(exc.value)
    assert "excess_abs_dlogp" in msg and "- floor" in msg and "floor mode" in msg


def test_an_exact_server_reports_a_floor_of_zero(servers, exact_reference):
    nvidia = _measure(servers["nvidia"], exact_reference)
    s = nvidia.stats
    assert nvidia.self_check_mode == "exact"
    assert s["floor_abs_dlogp"] == 0.0 and s["floor_ci95"] == [0.0, 0.0]
    assert s["excess_abs_dlogp"] == pytest.approx(s["mean_abs_dlogp"]) and s["excess_ci95"] == pytest.approx(s["ci95"])
    assert "exact mode: the floor is 0" in nvidia.table()


def test_runaway_answers_and_length_ratio_are_the_injected_truth(shifted, noisy_reference):
    s = shifted.stats
    prompts = load_chat_prompts(None, N_PROMPTS)
    runaway = [is_runaway(apply_chat_template(p.messages), 0, 0.5) for p in prompts]
    assert 0 < sum(runaway) < N_PROMPTS
    assert s["runaway_share"] == sum(runaway) / N_PROMPTS and s["oracle_runaway_share"] == 0.0
    oracle_len = [a["completion_tokens"] for a in noisy_reference["answers"]["answers"]]
    want = sum(ANSWER_MAX if r else n for r, n in zip(runaway, oracle_len)) / sum(oracle_len)
    assert s["output_length_ratio"] == pytest.approx(want)
    assert s["output_length_ratio_ci95"][0] <= want <= s["output_length_ratio_ci95"][1]
    # the runaway answers' extra tokens are content: reasoning is 60 % of the natural length either way
    model = sim_logits.LogitModel("fp8", answer_tokens=(24, 72))
    assert s["reasoning_length_ratio"] == pytest.approx(1.0)
    assert s["content_length_ratio"] > s["output_length_ratio"]
    assert sum(a["reasoning_tokens"] for a in noisy_reference["answers"]["answers"]) == sum(
        model.reasoning_length(sim_logits.context_of(apply_chat_template(p.messages)).h_marker) for p in prompts)
    # a runaway answer ends by length where the oracle's stopped: its finish reason changed
    assert s["finish_reason_changed"] == s["runaway_share"]
    with pytest.raises(pytest.fail.Exception) as exc:
        assert_drift(shifted, runaway_share={"max": 0.05}, output_length_ratio={"max": 1.1})
    assert "runaway_share" in str(exc.value) and "output_length_ratio" in str(exc.value)


def test_greedy_agreement_of_a_quantized_candidate_is_the_flip_rate_truth(servers, exact_reference):
    nvidia = _measure(servers["nvidia"], exact_reference)
    s = nvidia.stats
    q = sim_logits.expected_stats("nvidia", n=8000)["argmax_mismatch"]
    want = (1 - q) ** 4     # positions flip independently in the simulator: P(first 4 tokens agree)
    se = math.sqrt(want * (1 - want) / N_PROMPTS)
    assert abs(s["greedy_agreement"] - want) <= 3 * se, (s["greedy_agreement"], want)
    firsts = s["per_prompt_first_divergence"]
    assert all(f is None or 0 <= f <= ANSWER_MAX for f in firsts) and any(f is not None for f in firsts)
    assert s["greedy_agreement"] == sum(f is None or f >= 4 for f in firsts) / N_PROMPTS
    assert "greedy answers" in nvidia.table() and "first 4 agree" in nvidia.table()


def test_a_bound_on_unmeasured_answers_says_which_setting_measures_them(servers):
    set_faults(servers["oracle"])
    ref = make_drift_reference(servers["oracle"].base_url, prompts=2, max_tokens=8, k=K, template=sim_template())
    res = _measure(servers["cand"], ref)
    with pytest.raises(pytest.fail.Exception) as exc:
        assert_drift(res, runaway_share={"max": 0.05})
    assert "not measured: set drift.settings.answer_max_tokens" in str(exc.value)


def test_the_command_line_measures_the_floor_and_the_answers(servers, tmp_path, capsys):
    from pytest_glmf.gates.drift.cli import cli as drift_cli

    set_faults(servers["oracle"], f"logprob-noise={NOISE}")
    set_faults(servers["cand"], f"logprob-noise={NOISE}", "runaway=1")
    ref, cand = tmp_path / "ref.json", tmp_path / "cand.json"
    assert drift_cli(["reference", "--url", servers["oracle"].base_url, "--out", str(ref), "--prompts", "6",
                      "--max-tokens", "16", "--k", str(K), "--template", "sim", "--score-concurrency", "2",
                      "--answer-max-tokens", str(ANSWER_MAX)]) == 0
    assert drift_cli(["score", "--url", servers["cand"].base_url, "--reference", str(ref), "--out", str(cand),
                      "--label", "noisy", "--template", "sim", "--score-concurrency", "2"]) == 0
    capsys.readouterr()
    assert drift_cli(["compare", str(ref), str(cand), "--agreement-tokens", "4"]) == 0
    table = capsys.readouterr().out
    assert "floor mode: judged on the drift above the floor" in table and "mean @2" in table
    assert "greedy answers" in table and "100.0% (oracle 0.0%)" in table and "first 4 agree" in table
    with pytest.raises(SystemExit):
        drift_cli(["score", "--url", servers["cand"].base_url, "--reference", str(ref), "--out", str(cand),
                   "--score-concurrency", "0"])
    assert "--score-concurrency: expected an integer >= 1, got 0" in capsys.readouterr().err
