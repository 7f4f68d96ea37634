"""The acceptance probe against small real HTTP servers that answer in the documented shapes.

SGLang shape (docs/engines.md section 3): streamed native /generate whose chunks carry `meta_info`
(`completion_tokens`, `spec_verify_ct`, `spec_accept_rate`, `spec_accept_length` and accepted/drafted
counters): the Stub below. vLLM shape (docs/engines.md section 4, docs/real-engine.md 2(e)): `/metrics`
counters `vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total` with engine/model labels:
the vLLM truth server (pytest_glmf/testing/spec_truth.py) without per-request numbers. Both know the
fixture prompts, give each class a configured acceptance, and fill every verify step with a block
of 6 drafted tokens (DFlash2 block 7 minus the target's own token).
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.engine.introspect import detect_engine
from pytest_glmf.gates.acceptance.cli import cli as accept_cli
from pytest_glmf.gates.acceptance.probe import (
    SOURCE_SGLANG,
    SOURCE_VLLM,
    VLLM_ACCEPTED,
    VLLM_DRAFT_TOKENS,
    VLLM_DRAFTS,
    load_prompt_classes,
    probe,
    spec_from_meta_info,
)
from pytest_glmf.testing.spec_truth import COUNTERS, JsonHandler, SpecTruthServer, serve

CLASSES = load_prompt_classes()
DRAFTS_PER_STEP = 6
RATES = {"history_essay": 0.35, "code": 0.41, "shell_ops": 0.39, "math": 0.61, "prose": 0.29,
         "json_extraction": 0.5, "multi_turn_chat": 0.33}


def class_of(text: str) -> str:
    for pc in CLASSES:
        for chat in pc.prompts:
            if chat[-1]["content"] in text:
                return pc.name
    raise AssertionError(f"prompt not from the fixtures: {text[:80]!r}")


def plan(n_tokens: int, rate: float) -> tuple[int, int]:
    """(verify steps, accepted tokens) so a request of n_tokens has acceptance `rate`: each step
    yields its accepted drafts plus one target token; the first token comes from prefill."""
    steps = max(1, round((n_tokens - 1) / (1 + rate * DRAFTS_PER_STEP)))
    return steps, n_tokens - 1 - steps


class Stub:
    """SGLang: /generate with meta_info, /get_server_info (vLLM: `vllm_truth`)."""

    def __init__(self, speculative: bool = True, counters_in_meta: bool = True, streams: bool = True):
        self.speculative, self.counters_in_meta = speculative, counters_in_meta
        self.streams = streams  # False: /generate ignores `stream` and answers one JSON body
        self.bodies: list[dict[str, Any]] = []
        stub = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if self.path == "/get_server_info":
                    self.reply(200, json.dumps({"speculative_algorithm": "DFLASH" if stub.speculative else None}).encode())
                elif self.path == "/v1/models":
                    self.reply(200, b'{"data": [{"id": "stub-model"}]}')
                else:
                    self.reply(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.bodies.append(body)
                if self.path == "/generate":
                    n = body["sampling_params"]["max_new_tokens"]
                    steps, acc = plan(n, RATES[class_of(body["text"])])
                    events = []
                    for k, done in enumerate((1, n // 2, n)):
                        meta: dict[str, Any] = {"prompt_tokens": 20, "completion_tokens": done}
                        if stub.speculative:
                            meta["spec_verify_ct"] = steps * done // n
                            if k == 2:
                                meta["spec_accept_rate"] = acc / (steps * DRAFTS_PER_STEP)
                                meta["spec_accept_length"] = n / steps
                                if stub.counters_in_meta:
                                    meta["spec_accept_token_num"] = acc
                                    meta["spec_draft_token_num"] = steps * DRAFTS_PER_STEP
                        events.append({"text": "x" * done, "meta_info": meta})
                    if stub.streams:
                        self.reply_events(events)
                    else:
                        self.reply(200, json.dumps(events[-1]).encode())
                else:
                    self.reply(404, b'{"error": "not found"}')

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def vllm_truth(**kw: Any) -> SpecTruthServer:
    """vLLM with only its /metrics counters (no per-request numbers): each class's configured
    acceptance at every one of the 6 draft positions."""
    return SpecTruthServer({name: [rate] * DRAFTS_PER_STEP for name, rate in RATES.items()}, class_of,
                           per_request=False, **kw)


@pytest.fixture
def stub_factory():
    """`stub_factory("sglang", **Stub's)` or `stub_factory("vllm", **SpecTruthServer's)`."""
    made: list[Stub | SpecTruthServer] = []

    def make(engine: str, **kw: Any) -> Any:
        made.append(Stub(**kw) if engine == "sglang" else vllm_truth(**kw))
        return made[-1]
    yield make
    for s in made:
        s.close()


def expected_length(n: int, rate: float) -> float:
    steps, _ = plan(n, rate)
    return n / steps


@pytest.mark.parametrize("counters_in_meta", [True, False], ids=["counters", "rate-only"])
def test_sglang_meta_info_gives_the_configured_acceptance_per_class(stub_factory, counters_in_meta):
    stub = stub_factory("sglang", counters_in_meta=counters_in_meta)
    with Client(stub.url) as client:
        assert detect_engine(client) == "sglang"
        result = probe(client, "sglang", CLASSES, prompts_per_class=2, max_tokens_scale=0.5)
    assert result["speculative"] is True
    assert result["source"] == SOURCE_SGLANG
    assert "glm" in result["prompt_format"]
    assert len(result["classes"]) == len(CLASSES)
    for row in result["classes"]:
        n = round(next(c.max_tokens for c in CLASSES if c.name == row["class"]) * 0.5)
        steps, acc = plan(n, RATES[row["class"]])
        assert row["accept_rate"] == pytest.approx(acc / (steps * DRAFTS_PER_STEP), abs=1e-9), row
        assert row["accept_rate"] == pytest.approx(RATES[row["class"]], abs=0.03)
        assert row["accept_length"] == pytest.approx(n / steps)
        assert row["accept_length_basis"] == "completion_tokens / spec_verify_ct"
        assert row["tok_s"] and row["tok_s"] > 0 and row["errors"] == 0 and row["requests"] == 2
    # the chat was rendered client-side with the GLM template and sent greedy
    assert stub.bodies[0]["text"].startswith("[gMASK]<sop><|user|>\nWrite a 500-word historical essay")
    assert stub.bodies[0]["text"].endswith("<|assistant|>")
    assert stub.bodies[0]["sampling_params"]["temperature"] == 0


def test_sglang_without_streaming_falls_back_to_one_json_answer(stub_factory):
    stub = stub_factory("sglang", streams=False)
    with Client(stub.url) as client:
        result = probe(client, "sglang", CLASSES[:2], prompts_per_class=1)
    assert [r["errors"] for r in result["classes"]] == [0, 0]
    assert result["classes"][1]["accept_rate"] == pytest.approx(0.41, abs=0.01)
    assert result["records"][0]["ttft_s"] is None and result["classes"][0]["tok_s"] == result["classes"][0]["e2e_tok_s"]


def test_vllm_metrics_delta_gives_the_configured_acceptance_per_class(stub_factory):
    server = stub_factory("vllm")
    for name, earlier in zip(COUNTERS, (1000, 6000, 2000)):   # earlier traffic must not count
        server.totals[name] = earlier
    with Client(server.url) as client:
        assert detect_engine(client) == "vllm"
        result = probe(client, "vllm", CLASSES, prompts_per_class=1, max_tokens_scale=0.5)
    assert result["source"] == SOURCE_VLLM
    assert (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED) == COUNTERS    # the names the server writes
    for row in result["classes"]:
        truth = server.class_truth(row["class"])
        assert row["accept_rate"] == pytest.approx(truth["accept_rate"])
        assert row["accept_rate"] == pytest.approx(RATES[row["class"]], abs=0.03)
        assert row["accept_length"] == pytest.approx(truth["accept_length"])
        assert row["accept_length_basis"] == "1 + accepted / drafts"
    assert server.bodies[0]["model"] == "truth"                      # the served model's id, from /v1/models
    assert server.bodies[0]["messages"][-1]["role"] == "user"


def test_vllm_zero_drafts_is_speculation_without_a_rate_not_a_stop(stub_factory):
    stub = stub_factory("vllm", no_drafts={"history_essay"})
    with Client(stub.url) as client:
        result = probe(client, "vllm", CLASSES[:2], prompts_per_class=1, max_tokens_scale=0.2)
    first, second = result["classes"]
    assert result["speculative"] is True and len(result["records"]) == 2
    assert (first["draft_tokens"], first["accept_rate"], first["accept_length"]) == (0, None, None)
    assert second["accept_rate"] == pytest.approx(0.41, abs=0.03)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_no_speculative_decoding_is_reported_not_zero(stub_factory, engine, tmp_path, capsys):
    stub = stub_factory(engine, speculative=False)
    out = tmp_path / "acc.json"
    rc = accept_cli(["--url", stub.url, "--json", str(out), "--max-tokens-scale", "0.1"])
    assert rc == 0
    result = json.loads(out.read_text())["command_output"]
    assert result["speculative"] is False
    assert len(result["records"]) == 1, "the probe stops at the first non-speculative answer"
    assert result["classes"][0]["accept_rate"] is None
    assert "no speculative decoding" in capsys.readouterr().out


def test_cli_prints_the_recipe_table(stub_factory, tmp_path, capsys):
    stub = stub_factory("sglang")
    rc = accept_cli(["--url", stub.url, "--classes", "math,prose", "--prompts-per-class", "1",
                         "--json", str(tmp_path / "a.json")])
    assert rc == 0
    text = capsys.readouterr().out
    header = text.splitlines()[0]
    assert [c.strip() for c in header.split(" | ")][:4] == ["class", "tok/s", "accept rate", "accept length"]
    assert "math, step-by-step" in text and "prose 300" in text
    assert "source: sglang /generate meta_info" in text
    rows = json.loads((tmp_path / "a.json").read_text())["gates"]["acceptance"]   # as the suite records them
    assert rows["math"]["accept_rate"] > rows["prose"]["accept_rate"]


def test_unknown_class_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        accept_cli(["--url", "http://127.0.0.1:9", "--classes", "poetry"])
    assert "unknown class" in capsys.readouterr().err


def test_a_dead_server_is_an_error_row_not_a_number(stub_factory):
    stub = stub_factory("sglang")
    url = stub.url
    stub.close()
    with Client(url) as client:
        result = probe(client, "sglang", CLASSES[:1], prompts_per_class=1)
    row = result["classes"][0]
    assert row["errors"] == 1 and row["accept_rate"] is None and result["speculative"] is None
    assert "ConnectError" in result["records"][0]["error"]


def test_meta_info_without_spec_fields_means_no_speculation():
    assert spec_from_meta_info({"completion_tokens": 50})["speculative"] is False
    assert spec_from_meta_info({"completion_tokens": 50, "spec_verify_ct": 0})["speculative"] is False
    got = spec_from_meta_info({"completion_tokens": 50, "spec_verify_ct": 12,
                                          "spec_num_correct_drafts": 30, "spec_num_proposed_drafts": 72})
    assert got["speculative"] is True and (got["accepted_tokens"], got["draft_tokens"]) == (30, 72)


# ---------------------------------------------------------------------------- the suite, via pytester

SUITE = str(Path(str(resources.files("pytest_glmf.suites"))) / "test_acceptance.py")


def run_suite(pytester: pytest.Pytester, lane: str, url: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(SUITE, "--glmf-lane", lane, "--glmf-url", url,
                              "--glmf-results", str(pytester.path / "results"), "-p", "no:cacheprovider", *extra)


def run_with_classes(pytester: pytest.Pytester, url: str, classes: str, *extra: str,
                     scale: float = 0.5) -> pytest.RunResult:
    """The suite on lane daily under a thresholds file whose acceptance `classes:` is `classes` (one
    prompt per class, answers `scale` times the class's length)."""
    pytester.makefile(".yaml", thresholds=f"schema: 1\nlanes:\n  daily:\n    acceptance:\n      settings: "
                                          f"{{prompts_per_class: 1, max_tokens_scale: {scale}}}\n      classes: {classes}\n")
    return run_suite(pytester, "daily", url, "--glmf-thresholds", "thresholds.yaml", *extra)


def test_suite_passes_and_records_the_recipe_table(pytester, stub_factory):
    stub = stub_factory("sglang")
    result = run_suite(pytester, "daily", stub.url)
    result.assert_outcomes(passed=2 + len(CLASSES))
    doc = json.loads((pytester.path / "results" / "daily-latest.json").read_text())
    rows = dict(doc["gates"]["acceptance"])
    requests = rows.pop("requests")
    mean = rows.pop("mean")
    assert set(rows) == {c.name for c in CLASSES}
    assert len(requests) == 3 * len(CLASSES) and all(r["speculative"] for r in requests)
    assert all(r["source"].startswith(SOURCE_SGLANG + "; client-side 'glm' chat template") for r in rows.values())
    assert rows["math"]["recipe_accept_rate"] == 0.61
    assert rows["math"]["accept_rate"] == pytest.approx(0.61, abs=0.03)
    assert rows["prose"]["accept_rate"] == pytest.approx(0.29, abs=0.03)
    assert all(r["tok_s"] > 0 and r["accept_length"] > 1 for r in rows.values())
    assert mean["accept_rate"] == pytest.approx(sum(RATES.values()) / len(RATES), abs=0.02)


def test_suite_gates_the_mean_over_classes(pytester, stub_factory, inline_notes):
    stub = stub_factory("sglang")
    result = run_with_classes(pytester, stub.url, "{mean: {accept_rate: {min: 0.5}, tok_s: {min: 1}}}",
                              "-k", "mean or is_measured")
    result.assert_outcomes(passed=1, failed=1)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).re_match_lines([
        rf".*speculative acceptance of lane 'daily', mean over {len(CLASSES)} classes: 1 threshold\(s\) missed",
        r"accept_rate mean over classes +\| 0\.4\d* +\| >= 0\.5 +\| -1\d\.\d %.*lanes\.daily\.acceptance\.classes\.mean\)",
    ])


def test_suite_fails_a_class_below_its_bound_with_a_table(pytester, stub_factory, inline_notes):
    stub = stub_factory("sglang")
    result = run_with_classes(pytester, stub.url, "{prose: {accept_rate: {min: 0.5}, accept_length: {min: 1.5}}, "
                                                  "math: {accept_rate: {min: 0.55}}}")
    result.assert_outcomes(passed=len(CLASSES), failed=1, skipped=1)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).re_match_lines([
        r".*speculative acceptance of lane 'daily', class 'prose': 1 threshold\(s\) missed",
        r"accept_rate class=prose +\| 0\.29\d* +\| >= 0\.5 +\| -4\d\.\d %; drafts rejected more often.*"
        r"\(thresholds\.yaml: lanes\.daily\.acceptance\.classes\.prose\)",
    ])


def test_suite_rejects_a_threshold_class_that_does_not_exist(pytester, stub_factory):
    stub = stub_factory("sglang")
    result = run_with_classes(pytester, stub.url, "{poetry: {accept_rate: {min: 0.3}}}", "-k", "is_measured",
                              scale=0.2)
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([r".*lanes\.daily\.acceptance\.classes names unknown prompt class\(es\) \['poetry'\]; known: \['code', .*"])


def test_suite_skips_on_a_lane_without_speculation(pytester, stub_factory):
    stub = stub_factory("sglang", speculative=False)
    result = run_suite(pytester, "batch", stub.url, "-rs")
    result.assert_outcomes(skipped=2 + len(CLASSES))
    result.stdout.fnmatch_lines(["*the server of lane 'batch' reports no speculative decoding*"])


def test_suite_fails_when_the_lane_says_spec_but_the_server_does_not(pytester, stub_factory):
    stub = stub_factory("sglang", speculative=False)
    result = run_suite(pytester, "daily", stub.url, "-k", "is_measured")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*lane 'daily' sets spec='dflash' but the server reports no speculative decoding*"])
