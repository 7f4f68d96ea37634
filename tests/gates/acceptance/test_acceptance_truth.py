"""Acceptance length, per-position acceptance, acceptance under load and the no-drafts verdicts,
against a vLLM-shaped server whose speculation is known exactly (pytest_glmf/testing/spec_truth.py)."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from pytest_glmf.gates.acceptance import measure_acceptance
from pytest_glmf.gates.acceptance.knobs import draft_settings
from pytest_glmf.gates.acceptance.probe import (
    NO_DRAFTS,
    SOURCE_VLLM,
    SOURCE_VLLM_RESPONSE,
    LoadNeedsPerRequest,
    load_prompt_classes,
    per_position_from_histogram,
)
from pytest_glmf.testing.spec_truth import SpecTruthServer, plan_request

CLASSES = load_prompt_classes()
# per-position truth (3 draft tokens): a prefix is accepted, so each position's rate <= the one before
TRUTH = {"history_essay": [0.6, 0.3, 0.1], "code": [0.8, 0.6, 0.4], "shell_ops": [0.7, 0.5, 0.2],
         "math": [0.9, 0.8, 0.7], "prose": [0.4, 0.15, 0.05], "json_extraction": [0.75, 0.55, 0.35],
         "multi_turn_chat": [0.5, 0.25, 0.1]}
SUITE = str(Path(str(resources.files("pytest_glmf.suites"))) / "test_acceptance.py")


def class_of(text: str) -> str:
    return next(pc.name for pc in CLASSES for chat in pc.prompts if chat[-1]["content"] in text)


@pytest.fixture
def truth_server():
    made: list[SpecTruthServer] = []

    def make(**kw) -> SpecTruthServer:
        made.append(SpecTruthServer(TRUTH, class_of, **kw))
        return made[-1]
    yield make
    for s in made:
        s.close()


def assert_rows_are_the_truth(result, server: SpecTruthServer) -> None:
    for row in result.classes:
        want = server.class_truth(row.name)
        assert row.no_drafts is want["no_drafts"], row.name
        assert row.accept_rate == pytest.approx(want["accept_rate"], abs=1e-12), row.name
        assert row.accept_length == pytest.approx(want["accept_length"], abs=1e-12), row.name
        assert row.accept_pos == pytest.approx(want["accept_pos"], abs=1e-12), row.name
        assert row.detail["accept_pos1"] == pytest.approx(want["accept_pos"][0], abs=1e-12)
        # the definitions: length = 1 + mean accepted per draft step = 1 + the sum of the positions' rates
        assert row.accept_length == pytest.approx(1 + sum(row.accept_pos), abs=1e-12)
        assert all(0 <= p <= 1 for p in row.accept_pos) and row.accept_pos == sorted(row.accept_pos, reverse=True)


def test_the_plan_accepts_a_prefix_of_each_draft():
    plan = plan_request(101, [0.9, 0.5, 0.2])
    assert per_position_from_histogram(plan["histogram"]) == plan["per_pos"]
    assert sum(plan["histogram"]) == plan["steps"] and plan["completion_tokens"] == 1 + plan["steps"] + plan["accepted"]


@pytest.mark.parametrize("per_request", [True, False], ids=["response", "counters"])
def test_length_and_every_position_equal_the_truth(truth_server, per_request):
    server = truth_server(per_request=per_request)
    server.totals["vllm:spec_decode_num_drafts_total"] = 500     # earlier traffic must not count
    server.per_pos = [400, 200, 100]
    result = measure_acceptance(server.url, CLASSES, prompts_per_class=2, max_tokens_scale=0.5)
    assert result.source == (SOURCE_VLLM_RESPONSE if per_request else SOURCE_VLLM)
    assert result.method == "ngram"           # the server said so (/server_info speculative_config)
    assert_rows_are_the_truth(result, server)
    assert result.mean.detail["accept_pos3"] == pytest.approx(
        sum(server.class_truth(c.name)["accept_pos"][2] for c in CLASSES) / len(CLASSES))
    assert "accept_pos4" not in result.classes[0].detail    # 3 draft tokens: position 4 is not measured


def test_per_request_acceptance_holds_under_concurrency(truth_server):
    server = truth_server(per_request=True, hold_s=0.05)
    result = measure_acceptance(server.url, CLASSES, prompts_per_class=3, max_tokens_scale=0.5, users=6)
    assert server.max_in_flight >= 4, "the requests overlapped"
    assert result.users == 6 and len(result.records) == 3 * len(CLASSES)
    assert_rows_are_the_truth(result, server)
    assert "6 requests in flight" in result.table()


def test_load_on_counters_alone_is_refused_naming_the_flag(truth_server):
    server = truth_server(per_request=False)
    with pytest.raises(LoadNeedsPerRequest, match=r"acceptance at 4 users: vLLM's /metrics spec_decode counters are one "
                                                  r"sum over every request in flight.*--per-request-spec-decode-metrics summary"):
        measure_acceptance(server.url, CLASSES, prompts_per_class=1, users=4)
    assert len(server.truth()) == 1, "one request alone, then refused before any load"


def test_a_class_without_drafts_says_so(truth_server):
    server = truth_server(no_drafts={"prose"})
    result = measure_acceptance(server.url, CLASSES, prompts_per_class=1, max_tokens_scale=0.3)
    prose = result["prose"]
    # vLLM's response says mean_acceptance_length 1.0 for it: not a length, no drafts
    assert prose.no_drafts and (prose.accept_rate, prose.accept_length, prose.accept_pos) == (None, None, None)
    line = next(line for line in result.table().splitlines() if line.startswith("prose"))
    assert NO_DRAFTS in line
    # the mean is over the classes that drafted
    drafted = [c for c in result.classes if not c.no_drafts]
    assert result.mean.accept_length == pytest.approx(sum(c.accept_length for c in drafted) / len(drafted))


def test_draft_settings_from_the_command_line_or_the_servers_word():
    argv = ["vllm", "serve", "m", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']
    assert draft_settings(argv) == {"method": "ngram", "num_speculative_tokens": 4}
    assert draft_settings(["sglang", "--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size=7"]) == \
        {"algorithm": "DFLASH", "dflash_block_size": "7"}
    assert draft_settings(None, "ngram", 3) == {"method": "ngram", "draft_tokens": 3}
    assert draft_settings(None) == {}


# ---------------------------------------------------------------------------- the suite, via pytester

def lanes(pytester: pytest.Pytester, url: str) -> None:
    pytester.makefile(".yaml", lanes=f"""
lanes:
  ngram:
    engine: vllm
    launcher: attach
    url: {url}
    spec: ngram
""")


def run_suite(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(SUITE, "--glmf-lanes", "lanes.yaml", "--glmf-lane", "ngram", "-p", "no:cacheprovider",
                              "--glmf-results", str(pytester.path / "results"), *extra)


def test_a_speculative_server_that_drafts_nothing_fails_with_its_own_knobs(pytester, truth_server):
    server = truth_server(no_drafts=set(TRUTH))
    lanes(pytester, server.url)
    pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  ngram:\n    acceptance:\n"
                                          "      settings: {prompts_per_class: 1, max_tokens_scale: 0.2}\n")
    result = run_suite(pytester, "--glmf-thresholds", "thresholds.yaml", "-rs")
    result.assert_outcomes(failed=1, skipped=1 + len(CLASSES))
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        f"*the speculative server (ngram) proposed no draft token in any of {len(CLASSES)} classes*"
        "lower prompt_lookup_min or raise prompt_lookup_max in --speculative-config*",
        "*class 'prose': no drafts proposed for this class*"])
    assert "--speculative-dflash-block-size" not in out and "--speculative-draft-model-path" not in out


def test_a_bound_on_a_class_without_drafts_fails_naming_the_proposers_knobs(pytester, truth_server):
    server = truth_server(no_drafts={"prose"})
    lanes(pytester, server.url)
    pytester.makefile(".yaml", thresholds="""
schema: 1
lanes:
  ngram:
    acceptance:
      settings: {prompts_per_class: 1, max_tokens_scale: 0.2}
      classes: {prose: {accept_length: {min: 1.2}}, math: {accept_pos1: {min: 0.95}}}
""")
    result = run_suite(pytester, "--glmf-thresholds", "thresholds.yaml")
    result.assert_outcomes(passed=1 + len(CLASSES) - 2, failed=2, skipped=1)
    result.stdout.re_match_lines([
        r"accept_pos1 class=math \| 0\.9\d* +\| >= 0\.95 +\| note 1",
        r"note 1: -\d\.\d %; draft token 1 rejected more often: the n-gram proposer drafts only where the last",
        r"class 'prose': no drafts proposed for this class, so accept_length cannot be judged .*prompt_lookup_min.*"])
    doc = json.loads((pytester.path / "results" / "ngram-latest.json").read_text())["gates"]["acceptance"]
    assert doc["prose"]["no_drafts"] is True and doc["math"]["accept_pos"] == pytest.approx([0.9, 0.8, 0.7], abs=0.02)
    assert doc["math"]["setup"] == {"draft": {"method": "ngram", "draft_tokens": 3}}


def test_a_drop_in_length_against_the_baseline_names_the_draft_settings_that_changed(pytester, truth_server):
    before = truth_server()
    lanes(pytester, before.url)
    pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  ngram:\n    acceptance:\n"
                                          "      settings: {prompts_per_class: 1, max_tokens_scale: 0.3}\n")
    run_suite(pytester, "--glmf-thresholds", "thresholds.yaml").assert_outcomes(passed=1 + len(CLASSES), skipped=1)
    base = pytester.path / "results" / "ngram-latest.json"
    baseline = pytester.path / "baseline.json"
    baseline.write_text(base.read_text())
    # the new image drafts 2 tokens where the old drafted 3, and accepts less
    worse = {name: [p * 0.6 for p in rates[:2]] for name, rates in TRUTH.items()}
    after = SpecTruthServer(worse, class_of)
    try:
        lanes(pytester, after.url)
        result = run_suite(pytester, "--glmf-thresholds", "thresholds.yaml", "--glmf-baseline", str(baseline),
                           "-k", "per_class and math")
    finally:
        after.close()
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([r".*acceptance\.accept_length \[math\] +\| 3\.4 +\| 2\.\d+ .*drop <= .*"
                                  r"changed: draft draft_tokens 3 -> 2.*"])


def test_cli_measures_under_load_or_names_the_flag(truth_server, tmp_path, capsys):
    from pytest_glmf.gates.acceptance.cli import cli as accept_cli

    server = truth_server(per_request=True, hold_s=0.05)
    out = tmp_path / "a.json"
    assert accept_cli(["--url", server.url, "--users", "4", "--prompts-per-class", "2", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())["command_output"]   # what only the command has (results/gatejson.py)
    assert doc["users"] == 4 and server.max_in_flight >= 3
    assert {r["class"]: r["accept_length"] for r in doc["classes"]} == pytest.approx(
        {c.name: server.class_truth(c.name)["accept_length"] for c in CLASSES})
    counters_only = truth_server(per_request=False)
    with pytest.raises(SystemExit):
        accept_cli(["--url", counters_only.url, "--users", "4"])
    assert "--users 4: acceptance at 4 users: vLLM's /metrics spec_decode counters" in capsys.readouterr().err


@pytest.mark.parametrize(("engine", "method", "names", "never"), [
    ("vllm", "ngram", ["prompt_lookup_min", "prompt_lookup_max", "num_speculative_tokens"],
     ["--speculative-dflash", "--speculative-draft-model-path", "--speculative-num-steps"]),
    ("vllm", "eagle3", ["num_speculative_tokens", "--speculative-config"], ["prompt_lookup", "--speculative-dflash"]),
    ("sglang", "DFLASH", ["--speculative-draft-model-path", "--speculative-dflash-block-size"], ["prompt_lookup"]),
    ("sglang", "EAGLE3", ["--speculative-num-steps", "--speculative-eagle-topk"], ["dflash", "prompt_lookup"]),
])
def test_hints_name_the_engines_and_the_methods_own_knobs(engine, method, names, never):
    from pytest_glmf.gates.acceptance.knobs import Knobs

    knobs = Knobs(engine, method)
    for text in (knobs.hints()["accept_length"], knobs.hints()["accept_pos2"], knobs.no_drafts()):
        assert all(n in text for n in names), text
        assert not any(n in text for n in never), text
