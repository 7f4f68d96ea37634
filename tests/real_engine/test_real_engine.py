"""Every gate against a real engine: vLLM 0.32 on the CPU serving SmolLM2-135M-Instruct.

The simulator is our own understanding of a server; this module checks our plain modules against
a server we did not write. Lanes come from examples/real-engine-lanes.yaml and boot through our
own launcher (`pytest_glmf.launch.launch_lane`). Order matters for memory, not for correctness:
the oracle stays up for the whole module; candidates and the n-gram lane boot one at a time next
to it and are stopped when their test ends (see conftest.RealServers).

Set up with `tests/real_engine/setup`; select with `-m real_engine`.
"""
from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.gates.verdict import Check, assert_checks

ORACLE = "real-oracle"

pytestmark = [pytest.mark.real_engine]

VLLM_VERSION = "0.32.0"
CTX = 2048
CANDIDATES = ("real-candidate", "real-candidate-all")   # NVIDIA-mix look-alike, quantize-everything
NGRAM = "real-ngram"
NGRAM_DRAFT_TOKENS = 4              # num_speculative_tokens in examples/real-engine-lanes.yaml

# Curve: short prompts and outputs (a 135M model on one CPU thread decodes ~40 tok/s per stream).
CURVE_USERS = (1, 2, 4)
CURVE_MAX_TOKENS = 32
CURVE_RUNS = 2
CURVE_PROMPT_TOKENS_MAX = 256       # bound for the seat check (the prompts below are ~40 tokens)
CURVE_PROMPTS = [
    "Explain in a few sentences why the sky is blue.",
    "Write a short paragraph about the history of the bicycle.",
    "List some practical tips for keeping houseplants alive.",
    "Describe how a refrigerator keeps food cold.",
]
# Loose floors for a 2-core CPU shared with the client and other jobs: they catch a broken or
# pathologically slow engine, not a regression of a few percent (no GPU-grade claims here).
CURVE_BOUNDS = {"per_user_tok_s": {"min": 1.0}, "ttft_p95_s": {"max": 15.0}, "aggregate_tok_s": {"min": 1.0}}
# The client shares 2 cores with the engine (1 core reserved by vLLM) and whatever else the box
# runs: event-loop lag comes from the OS scheduler, not from our client (seen: a 407 ms stall at 2 %
# client CPU). 2 ms (the GPU-box default) marks every run invalid; 1 s still catches a client that
# really blocks. Speeds here are sanity floors, the gate under test is definitions and counts.
CURVE_LAG_P99_MAX_S = 1.0
CURVE_CPU_MAX_FRAC = 0.95
CURVE_CLIENT_RETRIES = 4         # per row: the CI box's stalls come and go within seconds

# Drift: the recipe uses 40 prompts x 128 tokens; 32 x 64 keeps the stage inside its budget and
# still gives the paired CI enough prompts.
DRIFT_PROMPTS = 32
DRIFT_MAX_TOKENS = 64
DRIFT_K = 20

# Acceptance: every prompt class, 2 prompts each, outputs scaled down to ~1/4 of the recipe's.
ACCEPT_PROMPTS_PER_CLASS = 2
ACCEPT_MAX_TOKENS_SCALE = 0.25
# SmolLM2 token ids for "The capital of France is" (study section 2a).
FRANCE_IDS = [504, 3575, 282, 4649, 314]


@pytest.fixture(scope="module")
def oracle(real_servers: Any) -> Any:
    return real_servers.get(ORACLE)


@pytest.fixture(scope="module")
def oracle_client(oracle: Any) -> Any:
    with Client(oracle.base_url) as client:
        yield client


def served_model(client: Client) -> str:
    return client.get_json("/v1/models")["data"][0]["id"]


# ------------------------------------------------------------------------------------------------
# Boot facts from the real log


def test_boot_facts_from_real_vllm_log(oracle: Any, oracle_client: Client, real_report: dict) -> None:
    """KV tokens, max concurrency and version parsed from vLLM's own boot log agree with what the
    server says about itself, and leave enough seats for the curve's largest row."""
    from pytest_glmf.gates.boot.parse import parse_boot_log

    log = oracle.boot_log
    facts = parse_boot_log(log)
    # Independent readings of the same facts: the CPU build says "CPU KV cache size", not "GPU".
    kv_line = re.search(r"(?:CPU|GPU) KV cache size: ([\d,]+) tokens", log)
    conc_line = re.search(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x", log)
    banner = re.search(r"version (\d+\.\d+\.\d+\S*)", log)
    server_version = oracle_client.get_json("/version")["version"]
    kv_expected = int(kv_line.group(1).replace(",", "")) if kv_line else None
    conc = facts.max_concurrency or {}
    real_report["boot_facts"] = {**facts.to_dict(), "server_version": server_version,
                                 "banner_version": banner.group(1) if banner else None}
    max_users = max(CURVE_USERS)
    per_request_tokens = CURVE_PROMPT_TOKENS_MAX + CURVE_MAX_TOKENS
    seats = (facts.kv_tokens or 0) // per_request_tokens
    checks = [
        Check("engine is vllm", facts.engine == "vllm", {"min": True}, where=f"parsed {facts.engine!r}"),
        Check("ready", facts.ready, {"min": True}),
        Check("problems", len(facts.problems), {"max": 0}, where="; ".join(facts.problems)[:200]),
        Check("kv_tokens", facts.kv_tokens, {"min": kv_expected or 1, "max": kv_expected or 1e12},
              where="vs the log's 'CPU KV cache size' line"),
        Check("max_concurrency.tokens_per_request", conc.get("tokens_per_request"), {"min": CTX, "max": CTX}),
        Check("max_concurrency.factor", conc.get("factor"),
              {"min": float(conc_line.group(2)) if conc_line else 1, "max": float(conc_line.group(2)) if conc_line else 1e9}),
        Check("context_len", facts.context_len, {"min": CTX, "max": CTX}),
        Check("/version == banner version", server_version == (banner.group(1) if banner else None), {"min": True},
              where=f"/version {server_version}, banner {banner.group(1) if banner else None}"),
        Check("version", server_version == VLLM_VERSION, {"min": True}, where=server_version),
        # The seat check: the KV pool must hold the curve's largest row at full request length.
        Check("seats (kv_tokens // request tokens)", seats, {"min": max_users},
              where=f"{facts.kv_tokens} // {per_request_tokens}", hint="raise VLLM_CPU_KVCACHE_SPACE"),
    ]
    assert_checks(checks, "boot facts from the real vLLM boot log")
    # What the server said at launch (engine/serverconfig.py, dev-mode /server_info): no speculation,
    # the scheduler's max_num_seqs, the context of /v1/models
    cfg = oracle.config
    info = oracle_client.get_json("/server_info?config_format=json")["vllm_config"]
    real_report["server_config"] = cfg.summary()
    assert cfg.told == {"context_length": "/v1/models", "speculative_algorithm": "/server_info",
                        "speculative_num_draft_tokens": "/server_info", "max_running_requests": "/server_info"}, cfg
    assert (cfg.speculative_algorithm, cfg.context_length) == (None, CTX), cfg
    assert cfg.max_running_requests == info["scheduler_config"]["max_num_seqs"] > 0, cfg
    assert cfg.speculates is False and cfg.why_no_speculation() == "/server_info says speculative_algorithm: null"


# ------------------------------------------------------------------------------------------------
# The HTTP surface our modules assume (field names, first-chunk shapes, logprob formats)


def test_prompt_logprobs_shape_for_teacher_forcing(oracle_client: Client) -> None:
    """Token-id prompt + prompt_logprobs: the scoring call drift relies on (docs/architecture.md section 6)."""
    model = served_model(oracle_client)
    r = oracle_client.post_json("/v1/completions", {
        "model": model, "prompt": FRANCE_IDS, "max_tokens": 1, "temperature": 0,
        "prompt_logprobs": 1, "logprobs": 1})
    ch = r["choices"][0]
    plp = ch["prompt_logprobs"]
    assert r["usage"]["prompt_tokens"] == len(FRANCE_IDS), r["usage"]
    assert plp[0] is None and len(plp) == len(FRANCE_IDS)
    for pos in range(1, len(FRANCE_IDS)):
        entry = plp[pos]
        key = str(FRANCE_IDS[pos])          # keyed by the token id AS A STRING
        assert key in entry, (pos, entry)   # the forced token is present even outside the top-k
        assert set(entry[key]) >= {"logprob", "rank", "decoded_token"}, entry[key]
    assert ch["text"] == " Paris"
    # max_tokens 0 is rejected: scoring must ask for 1 token and ignore it.
    with pytest.raises(Exception, match="400"):
        oracle_client.post_json("/v1/completions", {"model": model, "prompt": FRANCE_IDS, "max_tokens": 0})


def test_stream_shape_role_chunk_then_usage_chunk(oracle_client: Client) -> None:
    """First chunk is role-only with content "" (TTFT must skip it); usage comes alone, choices []."""
    events = [e for _, e in oracle_client.stream_events("/v1/chat/completions", {
        "model": served_model(oracle_client), "messages": [{"role": "user", "content": "Count to five."}],
        "max_tokens": 8, "temperature": 0, "ignore_eos": True, "stream_options": {"include_usage": True}})]
    first = events[0]["choices"][0]["delta"]
    assert first.get("role") == "assistant" and first.get("content") == "", first
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 8, events[-1]
    finals = [e for e in events if e["choices"] and e["choices"][0].get("finish_reason")]
    assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] == "length"
    content_chunks = [e for e in events[1:-1] if e["choices"][0]["delta"].get("content")]
    assert len(content_chunks) <= 8




# ------------------------------------------------------------------------------------------------
# Curve: users 1, 2, 4 through pytest_glmf.gates.curve, usage vs /metrics delta


def test_curve_small_rows_with_metrics_cross_check(oracle: Any, oracle_client: Client, real_report: dict) -> None:
    from pytest_glmf.gates.curve.checks import row_gate_checks
    from pytest_glmf.gates.curve.table import curve_table
    from pytest_glmf.load import LoadSettings, Workload, run_rows, strip_records

    # vLLM 404s an unknown model name; the load runner's default "default" only works on SGLang.
    # continuous_usage: vLLM puts usage on every chunk, so chunk-derived counts are exact too.
    workload = Workload(prompts=CURVE_PROMPTS, max_tokens=CURVE_MAX_TOKENS, model=served_model(oracle_client),
                        continuous_usage=True)
    # A run the client's self-check calls client-bound measured this box's other load, not vLLM: on a
    # shared 2-core CI machine that happens (CI at d31310e and 855fc17: stalls of 1.4-2.9 s at 1-4 % CPU).
    # The runner measures such a run again in its place (client_retries); the table says so.
    settings = LoadSettings(users=list(CURVE_USERS), runs=CURVE_RUNS, spread_max_pct=50.0,
                             lag_p99_max_s=CURVE_LAG_P99_MAX_S, cpu_max_frac=CURVE_CPU_MAX_FRAC,
                             client_retries=CURVE_CLIENT_RETRIES)
    rows = run_rows(oracle.base_url, workload, settings, oracle.boot_facts.to_dict())
    real_report["curve"] = {"table": curve_table(rows), "rows": [strip_records(r) for r in rows]}
    checks: list[Check] = []
    for row in rows:
        checks += row_gate_checks(row, CURVE_BOUNDS, source="tests/real_engine CURVE_BOUNDS")
        where = f"@ {row['users']} users"
        for i, run in enumerate(row["per_run"], 1):
            tc = run["token_count"]
            # The cross-check must actually run: a missing counter would skip it silently.
            checks.append(Check("/metrics generation_tokens delta", tc["metrics_delta"],
                                {"min": tc["usage_tokens"], "max": tc["usage_tokens"]}, where=f"{where} run {i}",
                                source="vllm:generation_tokens_total", hint="usage and the server's counter disagree"))
            # ignore_eos: every request produces exactly max_tokens.
            counts = sorted({r["completion_tokens"] for r in run["records"]})
            checks.append(Check("completion_tokens per request", counts[0] if len(counts) == 1 else None,
                                {"min": CURVE_MAX_TOKENS, "max": CURVE_MAX_TOKENS}, where=f"{where} run {i}: {counts}"))
    assert_checks(checks, "curve on the real engine (float32 eager, 1 engine thread)")


# ------------------------------------------------------------------------------------------------
# Tool gate: the hermes parser with the tool-aware template baked into the model dir
#
# Turns run through toolcalls' own pieces (request_body, ask, check_answer, compare_answers,
# summarize), non-streamed and streamed, with a max_tokens fit for a CPU (run_harness has no
# max_tokens knob; its 512 would spend minutes per turn when a small model rambles).

TOOLS_MAX_TOKENS = 96
# Single-call turns with flat schemas: what a 135M model can fill in under a forced choice.
TOOLS_FORCED = ("weather_single", "enum_argument", "search_after_system_prompt")
TOOLS_AUTO = ("weather_single", "no_call_smalltalk", "no_call_arithmetic")


def run_tool_turns(client: Client, ids: tuple[str, ...], tool_choice: str, strict: bool) -> dict:
    from dataclasses import asdict

    from pytest_glmf.gates.tools.harness import (
        TurnResult,
        applies,
        ask,
        check_answer,
        compare_answers,
        load_scenarios,
        request_body,
        summarize,
    )

    model = served_model(client)
    scenarios = [s for s in load_scenarios() if s.id in ids]
    skipped = {s.id: why for s in scenarios if (why := applies(s, tool_choice))}
    results = []
    for s in scenarios:
        if s.id in skipped:
            continue
        body = request_body(s, tool_choice, model=model, strict=strict, max_tokens=TOOLS_MAX_TOKENS)
        answers = [ask(client, body, stream=False), ask(client, body, stream=True)]
        problems = [p for a in answers for p in check_answer(s, a, tool_choice)]
        problems += compare_answers(answers[0], answers[1])
        results.append(TurnResult(s.id, 0, s.expect, tool_choice, answers, problems))
    summary = summarize(results, skipped)
    summary.update({"concurrency": 1, "tool_choice": tool_choice, "strict": strict,
                    "results": [{**asdict(r), "ok": r.ok} for r in results]})
    return summary


def _tools_brief(summary: dict) -> dict:
    keep = ("turns", "parsed", "parsed_fraction", "leaks", "wrong_calls", "empty_args", "skipped")
    return {**{k: summary[k] for k in keep},
            "answers_with_calls": sum(1 for r in summary["results"] for a in r["answers"] if a.get("calls")),
            "answers": sum(len(r["answers"]) for r in summary["results"]),
            "turn_outcomes": {r["scenario"]: ("ok" if r["ok"] else "; ".join(r["problems"])[:300])
                              for r in summary["results"]}}


@pytest.mark.parametrize("tool_choice", ["required", "named"])
def test_tools_forced_choice_parsed_with_strict_schema(oracle_client: Client, real_report: dict,
                                                       tool_choice: str) -> None:
    """A 135M model never calls a tool by itself; with tool_choice required/named vLLM constrains
    the output to the call shape, and `strict: true` makes it enforce the parameter schema too."""
    from pytest_glmf.gates.tools.table import failure_table as tools_failure_table

    summary = run_tool_turns(oracle_client, TOOLS_FORCED, tool_choice, strict=True)
    real_report.setdefault("tools", {})[f"{tool_choice}+strict"] = _tools_brief(summary)
    checks = [Check("turns run", summary["turns"], {"min": len(TOOLS_FORCED)}),
              Check("leaks", summary["leaks"], {"max": 0}, where=f"tool_choice={tool_choice}"),
              Check("parsed_fraction", summary["parsed_fraction"], {"min": 1.0},
                    where=f"{summary['parsed']}/{summary['turns']}", hint=tools_failure_table(summary)[:800])]
    assert_checks(checks, f"tool gate, tool_choice={tool_choice}, strict schemas, hermes parser")


@pytest.mark.xfail(strict=True, reason=(
    "vLLM 0.32 + SmolLM2-135M: a forced call to a tool with no parameters loops on whitespace inside "
    "`arguments: {` until max_tokens; non-streamed, the raw `<tool_call>` text lands in content with "
    "tool_calls null (a leak), streamed the arguments are '{'. strict=True: an XPASS means it got fixed"))
def test_tools_forced_zero_argument_tool(oracle_client: Client, real_report: dict) -> None:
    from pytest_glmf.gates.tools.table import failure_table as tools_failure_table

    summary = run_tool_turns(oracle_client, ("zero_argument",), "required", strict=True)
    real_report.setdefault("tools", {})["required+strict zero_argument"] = _tools_brief(summary)
    checks = [Check("turns run", summary["turns"], {"min": 1}), Check("leaks", summary["leaks"], {"max": 0}),
              Check("parsed_fraction", summary["parsed_fraction"], {"min": 1.0}, hint=tools_failure_table(summary)[:800])]
    assert_checks(checks, "tool gate, zero-argument tool, tool_choice=required")


def test_tools_auto_reported_honestly(oracle_client: Client, real_report: dict) -> None:
    """`auto`: the model decides. SmolLM2-135M answers in prose (recorded, not tuned away); the
    gate's own rules still hold: every request answered, no tool markup leaking into content."""
    summary = run_tool_turns(oracle_client, TOOLS_AUTO, "auto", strict=False)
    real_report.setdefault("tools", {})["auto"] = _tools_brief(summary)
    errors = sum(1 for r in summary["results"] for a in r["answers"] if a.get("error"))
    checks = [Check("request errors", errors, {"max": 0}), Check("leaks", summary["leaks"], {"max": 0})]
    assert_checks(checks, "tool gate, tool_choice=auto (calls not expected from a 135M model)")


# ------------------------------------------------------------------------------------------------
# Drift: oracle reference, both candidates scored, paired comparison


# ------------------------------------------------------------------------------------------------
# Template gate: the served prompt ids against the model directory's own template (transformers)

TEMPLATE_CHANGED = "real-oracle-template-changed"


@pytest.fixture(scope="module")
def template_reference(real_servers: Any) -> dict:
    """The packaged conversations rendered by transformers with the oracle's model directory, run
    by the lane's own interpreter (the engine venv has transformers; the project venv has not)."""
    from pytest_glmf.gates.template import load_conversations
    from pytest_glmf.gates.template.reference import reference_for_lane

    ref = reference_for_lane(real_servers.lanes[ORACLE], None, None, ".", load_conversations())
    assert ref is not None and ref["source"]["kind"] == "transformers"
    return ref


@pytest.mark.parametrize("served_ids", ["tokenize", "chat"])
def test_template_served_prompt_ids_equal_transformers(oracle: Any, template_reference: dict, real_report: dict,
                                                       served_ids: str) -> None:
    """vLLM renders every conversation (system prompt, multi-turn, tools, a tool call and its
    result, the reasoning switch) into exactly the ids transformers gives for the model directory:
    through /tokenize with messages and through the chat completion's `prompt_token_ids`."""
    from pytest_glmf.gates.template import assert_template, measure_template

    result = measure_template(oracle.base_url, template_reference, served_ids=served_ids)
    real_report.setdefault("template", {})[served_ids] = result.table()
    assert result.conversations == 7
    assert_template(result)


def test_template_changed_on_the_server_fails_with_the_text_around_it(real_servers: Any, template_reference: dict,
                                                                       real_report: dict, tmp_path: Any) -> None:
    """The oracle booted with `--chat-template` of its own template minus the tools block: the two
    conversations that offer tools differ where the tools text begins, the others still match."""
    import dataclasses
    from pathlib import Path

    from pytest_glmf.gates.template import assert_template, measure_template

    lane = real_servers.lanes[ORACLE]
    original = (Path(lane.model) / "chat_template.jinja").read_text()
    assert original.count("{%- if tools %}") == 1
    changed = tmp_path / "no-tools.jinja"
    changed.write_text(original.replace("{%- if tools %}", "{%- if false %}"))
    real_servers.lanes[TEMPLATE_CHANGED] = dataclasses.replace(
        lane, name=TEMPLATE_CHANGED, extra=[*lane.extra, "--chat-template", str(changed)])
    try:
        server = real_servers.get(TEMPLATE_CHANGED)
        for served_ids in ("tokenize", "chat"):
            result = measure_template(server.base_url, template_reference, served_ids=served_ids)
            real_report.setdefault("template", {})[f"changed, {served_ids}"] = result.table()
            assert sorted(result.differences) == ["tool_call_and_result", "tools_offered"], result.table()
            for d in result.differences.values():
                assert "⟦" in d["reference_text"] and "# Tools" in d["reference_text"].split("⟦", 1)[1]
                assert "# Tools" not in d["served_text"] and d["served_len"] < d["reference_len"]
            with pytest.raises(pytest.fail.Exception) as failed:
                assert_template(result)
            assert "template gate: 5/7 conversations render" in str(failed.value)
            assert "tools_offered" in str(failed.value) and "reference: " in str(failed.value)
    finally:
        real_servers.stop(TEMPLATE_CHANGED)


@pytest.fixture(scope="module")
def drift_reference(oracle: Any, real_report: dict) -> dict:
    from pytest_glmf.gates.drift.adapters import make_adapter
    from pytest_glmf.gates.drift.prompts import load_chat_prompts
    from pytest_glmf.gates.drift.reference import make_reference

    adapter = make_adapter(oracle.base_url, "vllm")
    try:
        ref = make_reference(adapter, load_chat_prompts(n=DRIFT_PROMPTS), max_tokens=DRIFT_MAX_TOKENS,
                                   k=DRIFT_K, provenance={"lane": ORACLE})
    finally:
        adapter.close()
    real_report["drift_reference"] = {k: ref.get(k) for k in ("self_check", "oracle_argmax_disagreement",
                                                              "elapsed_s", "tokenizer_fingerprint")}
    return ref


@pytest.fixture(scope="module")
def drift_results(real_servers: Any, drift_reference: dict, real_report: dict) -> dict:
    """Each candidate booted next to the oracle, scored, stopped (never two candidates at once)."""
    from pytest_glmf.gates.drift.adapters import make_adapter
    from pytest_glmf.gates.drift.reference import compare, score_candidate
    from pytest_glmf.gates.drift.table import render_table as drift_table

    cands = []
    for lane in CANDIDATES:
        server = real_servers.get(lane)
        adapter = make_adapter(server.base_url, "vllm")
        try:
            cands.append(score_candidate(adapter, drift_reference, label=lane, provenance={"lane": lane}))
        finally:
            adapter.close()
            real_servers.stop(lane)
    results = compare(drift_reference, cands)
    real_report["drift"] = {"table": drift_table(results),
                            "candidates": {k: {m: v.get(m) for m in ("mean_abs_dlogp", "ci95", "median_abs_dlogp",
                                                                     "p95_abs_dlogp", "argmax_mismatch", "kl_topk",
                                                                     "n_prompts", "n_tokens", "self_check")}
                                           for k, v in results["candidates"].items()},
                            "pair": {k: v for k, v in results["pair"].items() if k != "per_prompt"}}
    return results


def test_drift_oracle_self_check_is_exactly_zero(drift_reference: dict) -> None:
    """float32 eager: scoring the same ids twice gives bit-identical logprobs (the recipe's 0.00000)."""
    sc = drift_reference["self_check"]
    checks = [Check("self_abs_dlogp", sc["self_abs_dlogp"], {"max": 0.0}, where="oracle scored twice",
                    hint="float32 eager should be bit-reproducible: check --dtype/--enforce-eager"),
              Check("self-check exact", sc["exact"], {"min": True})]
    assert_checks(checks, "drift self-check on the oracle")


def test_drift_floor_is_zero_on_the_exact_real_engine(oracle: Any, drift_reference: dict, real_report: dict) -> None:
    """float32 eager vLLM against its own reference: both self-checks exact, so auto mode judges
    as exact and the noise floor is exactly 0 (floor mode changes nothing on an exact engine)."""
    from pytest_glmf.gates.drift import measure_drift

    res = measure_drift(oracle.base_url, drift_reference, label="oracle-again", engine="vllm")
    s = res.stats
    real_report["drift_floor"] = {k: s.get(k) for k in ("self_check_mode", "floor_abs_dlogp", "floor_ci95",
                                                         "excess_abs_dlogp", "mean_abs_dlogp", "floor_concurrency")}
    checks = [Check("floor_abs_dlogp", s["floor_abs_dlogp"], {"max": 0.0}, where="oracle vs its own reference",
                    hint="float32 eager should be bit-reproducible: check --dtype/--enforce-eager"),
              Check("mean_abs_dlogp", s["mean_abs_dlogp"], {"max": 0.0}, where="the same server, the same ids"),
              Check("excess_abs_dlogp", s["excess_abs_dlogp"], {"max": 0.0}, where="nothing above a floor of 0"),
              Check("self_check_mode exact", res.self_check_mode == "exact", {"min": True}, where="auto mode")]
    assert_checks(checks, "drift noise floor on the exact real engine")


def test_drift_candidates_against_oracle(drift_results: dict) -> None:
    """Both fake-quantized candidates drift measurably; each is self-consistent; the NVIDIA-mix
    look-alike (MLP only) is closer to the oracle than the quantize-everything one."""
    mlp, every = (drift_results["candidates"][c] for c in CANDIDATES)
    pair = drift_results["pair"]
    checks = []
    for name, s in zip(CANDIDATES, (mlp, every)):
        checks.append(Check("self_abs_dlogp", s["self_check"]["self_abs_dlogp"], {"max": 0.0}, where=name))
        # A candidate identical to the oracle means the fake quantization did not reach the server.
        checks.append(Check("mean_abs_dlogp", s["mean_abs_dlogp"], {"min": 1e-4}, where=name,
                            hint="the candidate scores like the oracle: were the quantized weights served?"))
    checks.append(Check("gap mean|dlogp|(all) - (mlp)", pair["gap"], {"min": 0.0},
                        where=f"95% CI {pair['gap_ci95']}, wins {pair['wins']}",
                        hint="quantizing attention too should not bring the model closer to the oracle"))
    assert_checks(checks, "drift of the fake-quantized candidates (vs the float32 oracle)")


# ------------------------------------------------------------------------------------------------
# Acceptance: n-gram speculation, per prompt class, from the /metrics counters


def test_acceptance_ngram_per_class_from_metrics(real_servers: Any, real_report: dict) -> None:
    from pytest_glmf.gates.acceptance.probe import load_prompt_classes, probe
    from pytest_glmf.gates.acceptance.table import render_result

    server = real_servers.get(NGRAM)
    # the running vLLM tells its speculative config (dev-mode /server_info): the lane's n-gram, 4 tokens
    assert (server.config.speculative_algorithm, server.config.speculative_num_draft_tokens) == ("ngram", 4), \
        server.config.summary()
    assert server.config.speculates is True
    try:
        with Client(server.base_url) as client:
            classes = load_prompt_classes()
            result = probe(client, "vllm", classes, prompts_per_class=ACCEPT_PROMPTS_PER_CLASS,
                                      max_tokens_scale=ACCEPT_MAX_TOKENS_SCALE)
    finally:
        real_servers.stop(NGRAM)
    real_report["acceptance"] = {"table": render_result(result),
                                 "classes": [{k: r.get(k) for k in ("class", "requests", "errors", "completion_tokens",
                                                                    "tok_s", "accept_rate", "accept_length",
                                                                    "verify_steps", "accepted_tokens", "draft_tokens")}
                                             for r in result["classes"]]}
    rows = result["classes"]
    checks = [Check("speculative", result["speculative"], {"min": True}, hint="no spec_decode counters on /metrics"),
              Check("classes measured", len(rows), {"min": len(classes), "max": len(classes)})]
    for r in rows:
        where = f"class={r['class']}"
        checks.append(Check("errors", r["errors"], {"max": 0}, where=where))
        checks.append(Check("accept_rate", r["accept_rate"], {"min": 0.0, "max": 1.0}, where=where))
        if r.get("verify_steps"):
            # vLLM's ngram proposer drafts exactly k tokens whenever it drafts at all.
            checks.append(Check("draft tokens per draft", r["draft_tokens"] / r["verify_steps"],
                                {"min": NGRAM_DRAFT_TOKENS, "max": NGRAM_DRAFT_TOKENS}, where=where))
    pooled = sum(r.get("accepted_tokens") or 0 for r in rows)
    checks.append(Check("accepted tokens over all classes", pooled, {"min": 1},
                        hint="n-gram lookup never matched: the counters may not be read around the requests"))
    assert_checks(checks, "n-gram speculative acceptance per prompt class (vLLM /metrics counters)")
