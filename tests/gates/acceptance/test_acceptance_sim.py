"""The acceptance probe and suite against the built-in simulator (the daily lane: DFlash2 block 7).

The simulator's per-class acceptance and batch-1 speed are documented in pytest_glmf/sim/timing.py
(math 0.61 / 291 tok/s, code 0.41 / 253, shell-ops 0.39 / 254, prose 0.29 / 175, ...); each verify
step drafts 6 tokens and accepts Binomial(6, rate), seeded, so the probe must recover the rates.
Through native /generate the simulator classifies the whole rendered prompt, so a multi-turn chat
lands in its default class (history_essay) rather than multi_turn_chat (that class is detected
from two user turns on the chat endpoint only).
"""
from __future__ import annotations

import dataclasses
import json
import math
from importlib import resources
from pathlib import Path

import pytest

from pytest_glmf.config.lanes import load_lanes
from pytest_glmf.engine.client import Client
from pytest_glmf.engine.introspect import detect_engine
from pytest_glmf.gates.acceptance.probe import SOURCE_SGLANG, load_prompt_classes, probe
from pytest_glmf.gates.acceptance.table import render_result
from pytest_glmf.launch import launch_lane
from pytest_glmf.sim import timing

TIME_SCALE = 0.1
CLASSES = load_prompt_classes()
SIM_CLASS_VIA_GENERATE = {c.name: c.name for c in CLASSES} | {"multi_turn_chat": "history_essay"}
SUITE = str(Path(str(resources.files("pytest_glmf.suites"))) / "test_acceptance.py")


def sim_server(lane_name: str, tmp_path_factory: pytest.TempPathFactory):
    lane = dataclasses.replace(load_lanes(None)[lane_name], time_scale=TIME_SCALE)
    return launch_lane(lane, tmp_path_factory.mktemp(f"sim-{lane_name}"), "acc")


@pytest.fixture(scope="module")
def daily(tmp_path_factory):
    server = sim_server("daily", tmp_path_factory)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def daily_result(daily):
    with Client(daily.base_url) as client:
        assert detect_engine(client) == "sglang"
        return probe(client, "sglang", CLASSES)


def test_accept_rate_and_length_match_the_simulator_per_class(daily_result):
    assert daily_result["speculative"] is True and daily_result["source"] == SOURCE_SGLANG
    for row in daily_result["classes"]:
        configured = timing.BY_NAME[SIM_CLASS_VIA_GENERATE[row["class"]]].accept_rate
        assert row["errors"] == 0, row
        # ~1,000-2,000 drafted tokens per class: binomial sd <= 0.015
        assert row["accept_rate"] == pytest.approx(configured, abs=0.05), row["class"]
        # SGLang's accept length counts the target's own token per step (plus the prefill token)
        assert row["accept_length"] == pytest.approx(1 + 6 * configured, abs=0.35), row["class"]
    rates = {r["class"]: r["accept_rate"] for r in daily_result["classes"]}
    assert rates["math"] > rates["code"] > rates["prose"]


def test_per_position_acceptance_matches_the_simulators_binomial(daily_result):
    """Position k is accepted in a step that accepted at least k of its 6 drafts: P(Binomial(6, rate) >= k),
    read from 0.5.23's spec_correct_drafts_histogram; position 1 is the likeliest, 6 the least."""
    for row in daily_result["classes"]:
        p = timing.BY_NAME[SIM_CLASS_VIA_GENERATE[row["class"]]].accept_rate
        want = [sum(math.comb(6, j) * p ** j * (1 - p) ** (6 - j) for j in range(k, 7)) for k in range(1, 7)]
        assert len(row["accept_pos"]) == 6, row["class"]
        assert row["accept_pos"] == pytest.approx(want, abs=0.06), row["class"]
        assert row["accept_pos1"] == row["accept_pos"][0] and row["accept_pos"] == sorted(row["accept_pos"], reverse=True)
        # the mean accepted drafts per step is the sum over positions: the rate times the drafts per step
        assert sum(row["accept_pos"]) == pytest.approx(6 * row["accept_rate"], rel=1e-9), row["class"]


def test_per_request_acceptance_holds_with_requests_in_flight(daily):
    """SGLang's meta_info is each request's own: 4 requests at once give each class its configured rate."""
    from pytest_glmf.gates.acceptance import measure_acceptance

    picked = [c for c in CLASSES if c.name in ("math", "prose", "code")]
    result = measure_acceptance(daily.base_url, picked, users=4, max_tokens_scale=0.5)
    assert result.users == 4 and all(r["error"] is None for r in result.records)
    for row in result.classes:
        assert row.accept_rate == pytest.approx(timing.BY_NAME[row.name].accept_rate, abs=0.06), row.name
    assert result["math"].accept_length > result["code"].accept_length > result["prose"].accept_length


def test_tok_s_never_exceeds_what_the_simulator_models(daily_result):
    """A shared 2-core CI box only slows the simulator down, so the modelled speed is a hard upper
    bound (token double counting would break it) and the lower bound is loose."""
    ratios = []
    for row in daily_result["classes"]:
        modelled = timing.BY_NAME[SIM_CLASS_VIA_GENERATE[row["class"]]].tok_s / TIME_SCALE
        assert row["tok_s"] <= 1.25 * modelled, row
        assert row["e2e_tok_s"] <= row["tok_s"] * 1.05, "end-to-end includes prefill: never faster"
        ratios.append(row["tok_s"] / modelled)
    assert sorted(ratios)[len(ratios) // 2] > 0.3, ratios


def test_suite_gates_the_daily_lane_on_the_simulator(pytester, daily):
    result = pytester.runpytest(SUITE, "--glmf-lane", "daily", "--glmf-url", daily.base_url, "-p", "no:cacheprovider",
                                "--glmf-results", str(pytester.path / "results"), "-s")
    result.assert_outcomes(passed=2 + len(CLASSES))
    result.stdout.re_match_lines([r".*class +\| tok/s +\| accept rate +\| accept length +\| per position +\| recipe rate +\| requests",
                                  # per position: from 0.5.23's spec_correct_drafts_histogram, the first four shown
                                  r"math, step-by-step +\| [\d.]+ +\| 0\.[56]\d* +\| 4\.\d+ +\| [01]\.\d\d 0\.9\d 0\.\d\d 0\.\d\d \.\.\. +\| 0\.61 +\| 3"])
    rows = json.loads((pytester.path / "results" / "daily-latest.json").read_text())["gates"]["acceptance"]
    assert set(rows) == {c.name for c in CLASSES} | {"mean", "requests"}
    assert rows["mean"]["accept_rate"] == pytest.approx(0.39, abs=0.03)


def test_batch_lane_has_no_speculation_and_the_suite_skips(pytester, tmp_path_factory):
    server = sim_server("batch", tmp_path_factory)
    try:
        with Client(server.base_url) as client:
            result = probe(client, "sglang", CLASSES)
        assert result["speculative"] is False and len(result["records"]) == 1
        assert "no speculative decoding" in render_result(result)
        run = pytester.runpytest(SUITE, "--glmf-lane", "batch", "--glmf-url", server.base_url, "-rs",
                                 "-p", "no:cacheprovider", "--glmf-results", str(pytester.path / "results"))
        run.assert_outcomes(skipped=2 + len(CLASSES))
        # up front, in the server's own words (its /server_info), before any class was measured
        run.stdout.fnmatch_lines(["*lane 'batch' runs without speculative decoding "
                                  "(/server_info says speculative_algorithm: null): no acceptance to measure*"])
        doc = json.loads((pytester.path / "results" / "batch-latest.json").read_text())
        assert "acceptance" not in doc["gates"] and doc["provenance"]["server_config"]["speculative_algorithm"] is None
    finally:
        server.stop()


def test_a_users_glmf_acceptance_skips_or_fails_on_the_servers_word(pytester, tmp_path_factory):
    """The public fixture, not only the suite: on a server whose /server_info says
    speculative_algorithm null nothing is measured; a lane that declares spec fails with the words."""
    server = sim_server("batch", tmp_path_factory)
    try:
        pytester.makepyfile(test_user="""
def test_mine(glmf_acceptance):
    glmf_acceptance()
""")
        args = ("--glmf-url", server.base_url, "-rs", "-p", "no:cacheprovider", "--glmf-results", "results",
                "--glmf-allow-unverified")
        run = pytester.runpytest("test_user.py", "--glmf-lane", "batch", *args)
        run.assert_outcomes(skipped=1)
        run.stdout.fnmatch_lines(["*the server of lane 'batch' runs no speculative decoding (/server_info says "
                                  "speculative_algorithm: null): no acceptance to measure*"])
        run = pytester.runpytest("test_user.py", "--glmf-lane", "daily", *args)
        run.assert_outcomes(failed=1)
        run.stdout.fnmatch_lines(["*lane 'daily' declares spec: dflash, but the server /server_info says "
                                  "speculative_algorithm: null: its speculative flags did not take effect*"])
    finally:
        server.stop()
