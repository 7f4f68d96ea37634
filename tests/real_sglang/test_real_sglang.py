"""Every gate against a running SGLang: the released 0.5.23 on the CPU serving SmolLM2-135M.

The contract stage reads SGLang's code; this module asks its running server. Lanes come from
pytest_glmf/examples/real-sglang-lanes.yaml and boot through the plugin's own process launcher
(preflight with the venv's real parser, readiness, boot log, identity, served surface, cleanup).
Sized for ~10 tok/s per stream on a shared 2-core box: short prompts, few tokens. The oracle stays
up for the module; the candidate boots beside it for drift and is stopped (conftest).

Set up with `tests/real_sglang/setup`; select with `-m real_sglang`.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sglang_stage import CANDIDATE, ORACLE

from pytest_glmf.engine.client import Client
from pytest_glmf.gates.verdict import Check, assert_checks

pytestmark = [pytest.mark.real_sglang]

HERE = Path(__file__).resolve().parent
SGLANG_VERSION = "0.5.23"
KV_TOKENS = 32768                  # --max-total-tokens in the lanes file
CONTEXT = 8192                     # SmolLM2's max_position_embeddings

# Curve: short prompts and outputs. Speeds are sanity floors on a shared CPU; the gate under test
# is definitions and counts (usage, the server's own /metrics counters).
CURVE_USERS = (1, 2, 4)
CURVE_MAX_TOKENS = 24
CURVE_RUNS = 2
CURVE_PROMPTS = [
    "Explain in a few sentences why the sky is blue.",
    "Write a short paragraph about the history of the bicycle.",
    "List some practical tips for keeping houseplants alive.",
    "Describe how a refrigerator keeps food cold.",
]
CURVE_BOUNDS = {"per_user_tok_s": {"min": 0.5}, "ttft_p95_s": {"max": 30.0}, "aggregate_tok_s": {"min": 0.5}}
CURVE_LAG_P99_MAX_S = 1.0          # the box's other load stalls the client (tests/real_engine says why)
CURVE_CPU_MAX_FRAC = 0.95
CURVE_CLIENT_RETRIES = 4

DRIFT_PROMPTS = 8
DRIFT_MAX_TOKENS = 16
DRIFT_K = 5
DIRECT_TOL = 1e-3                  # nats: SGLang's /generate scoring vs transformers on the same ids

# A forced call (required/named) needs `strict`: without it SGLang's constraint covers the call's
# shape, not its parameters, and the 135M model echoes the JSON schema into the arguments until
# max_tokens cuts it (seen: 300 tokens of `{"type": "object", "properties": ...`); with it the
# arguments are the schema's (`{"city": "Paris"}` in ~20 tokens).
TOOLS_MAX_TOKENS = 200
TOOLS_FORCED = ("weather_single", "enum_argument")
TOOLS_AUTO = ("no_call_smalltalk", "weather_single")


@pytest.fixture(scope="module")
def oracle(sglang_servers: Any) -> Any:
    return sglang_servers.get(ORACLE)


@pytest.fixture(scope="module")
def oracle_client(oracle: Any) -> Any:
    with Client(oracle.base_url) as client:
        yield client


# ------------------------------------------------------------------------------------------------
# Boot facts, readiness, identity: what the launcher and the boot gate read from the real thing


def test_boot_facts_equal_the_logs_summary_line_and_the_server(oracle: Any, sglang_report: dict) -> None:
    """Seats, KV tokens and context read from SGLang's own boot log equal its summary line and what
    the running server says (/server_info, /v1/models); one float32 KV pool of the lane's size."""
    log = oracle.boot_log
    facts = oracle.boot_facts
    cfg = oracle.config
    line = re.search(r"max_total_num_tokens=(\d+), chunked_prefill_size=-?\d+, max_prefill_tokens=\d+, "
                     r"max_running_requests=(\d+), context_len=(\d+)", log)
    kv_lines = re.findall(r"KV Cache is allocated\. dtype: torch\.(\w+), #tokens: (\d+)", log)
    assert line, "the 0.5.23 summary line is not in the boot log"
    tokens, seats, ctx = (int(g) for g in line.groups())
    sglang_report["boot_facts"] = {k: facts.to_dict()[k] for k in ("max_running_requests", "kv_tokens",
                                                                    "context_len", "kv_pools", "cap_reason")}
    sglang_report["server_config"] = cfg.summary()
    checks = [
        Check("engine", facts.engine == "sglang", {"min": True}, where=f"parsed {facts.engine!r}"),
        Check("ready", facts.ready, {"min": True}),
        Check("problems", len(facts.problems), {"max": 0}, where="; ".join(facts.problems)[:200]),
        Check("max_running_requests (boot log)", facts.max_running_requests, {"min": seats, "max": seats}),
        Check("max_running_requests (/server_info)", cfg.max_running_requests, {"min": seats, "max": seats},
              where="internal_states[].effective_max_running_requests_per_dp"),
        Check("kv_tokens (boot log)", facts.kv_tokens, {"min": tokens, "max": tokens}),
        Check("kv_tokens == --max-total-tokens", tokens, {"min": KV_TOKENS, "max": KV_TOKENS}),
        Check("max_total_tokens (/server_info)", cfg.max_total_tokens, {"min": tokens, "max": tokens}),
        Check("context_len (boot log)", facts.context_len, {"min": ctx, "max": ctx}),
        Check("context_length (/v1/models)", cfg.context_length, {"min": CONTEXT, "max": CONTEXT}),
        Check("kv pools", len(facts.kv_pools), {"min": len(kv_lines), "max": len(kv_lines)}),
        Check("kv pool dtype float32", [p["dtype"] for p in facts.kv_pools] == ["float32"], {"min": True},
              where=str(facts.kv_pools)),
        Check("kv pool tokens", facts.kv_pools[0]["tokens"] if facts.kv_pools else None,
              {"min": int(kv_lines[0][1]), "max": int(kv_lines[0][1])} if kv_lines else {"min": 1}),
        Check("speculative (server says)", cfg.speculates is False, {"min": True}, where=cfg.summary()),
        Check("tool_call_parser (server says)", cfg.tool_call_parser == "hermes", {"min": True}, where=cfg.summary()),
    ]
    assert_checks(checks, "boot facts from SGLang 0.5.23's own boot log")


def test_launched_by_the_plugin_preflight_identity_surface(oracle: Any, oracle_client: Client,
                                                           sglang_report: dict) -> None:
    """The process lane went through the plugin's whole launch: preflight by SGLang's own parser in
    the venv, readiness (503 until warm-up, then the ready line), identity, the served surface."""
    prov = oracle.provenance
    pre, ident, surface = prov["preflight"], prov["engine_identity"], prov["served_surface"]
    health = []
    for _ in range(2):
        t0 = time.monotonic()
        status = oracle_client._http.get("/health").status_code
        health.append((status, round(time.monotonic() - t0, 2)))
    sglang_report["health_s"] = health
    checks = [
        Check("preflight ok", pre["status"] == "ok", {"min": True}, where=str(pre)[:200]),
        Check("preflight engine version", pre.get("version") == SGLANG_VERSION, {"min": True}, where=str(pre.get("version"))),
        Check("identity agreed", ident.get("version") == SGLANG_VERSION and ident.get("models_owner") == "sglang",
              {"min": True}, where=str(ident)[:200]),
        Check("surface version", surface.get("version") == SGLANG_VERSION, {"min": True}),
        Check("surface tool parser", surface.get("tool_call_parser") == "hermes", {"min": True}),
        Check("surface metric names", "sglang:num_running_reqs" in (surface.get("metric_names") or []), {"min": True}),
        # SGLang's /health runs a 1-token generation and polls every 1 s (http_server.py
        # health_generate): never faster than ~1 s; a second is what a health probe costs here.
        Check("/health status", all(s == 200 for s, _ in health), {"min": True}, where=str(health)),
        Check("/health seconds", min(t for _, t in health), {"min": 0.9}, where=str(health),
              hint="SGLang 0.5.23's /health sleeps 1 s before it answers; a faster one is another engine"),
        Check("ready line in the boot log", oracle.boot_facts.ready, {"min": True}),
    ]
    assert_checks(checks, "launch of the real SGLang by the plugin's process launcher")


# ------------------------------------------------------------------------------------------------
# Curve: users 1, 2, 4; usage against SGLang's own /metrics counters (label sets summed)


def test_curve_rows_valid_with_counts_agreeing(oracle: Any, sglang_report: dict) -> None:
    from pytest_glmf.gates.curve.checks import row_gate_checks
    from pytest_glmf.gates.curve.table import curve_table
    from pytest_glmf.load import LoadSettings, Workload, run_rows, strip_records

    workload = Workload(prompts=CURVE_PROMPTS, max_tokens=CURVE_MAX_TOKENS)
    settings = LoadSettings(users=list(CURVE_USERS), runs=CURVE_RUNS, spread_max_pct=80.0,
                             lag_p99_max_s=CURVE_LAG_P99_MAX_S, cpu_max_frac=CURVE_CPU_MAX_FRAC,
                             client_retries=CURVE_CLIENT_RETRIES)
    from pytest_glmf.load import server_endpoints

    urls, facts = server_endpoints(oracle)          # boot facts and decode_log_interval, as glmf_curve passes them
    rows = run_rows(urls, workload, settings, facts)
    sglang_report["curve"] = {"table": curve_table(rows), "rows": [strip_records(r) for r in rows]}
    checks: list[Check] = []
    for row in rows:
        where = f"@ {row['users']} users"
        checks += row_gate_checks(row, CURVE_BOUNDS, source="tests/real_sglang CURVE_BOUNDS")
        checks.append(Check("row valid", row["valid"], {"min": True}, where=where))
        # the running gauge is refreshed every decode_log_interval decode steps: a 24-token run
        # never refreshes it, which must not become a flag on the row
        stale = [n for n in row["seat"]["notes"] if n.startswith("/metrics:")]
        checks.append(Check("stale /metrics gauge notes", len(stale), {"max": 0}, where=f"{where}: {stale}"))
        for i, run in enumerate(row["per_run"], 1):
            tc = run["token_count"]
            checks.append(Check("/metrics generation_tokens delta", tc["metrics_delta"],
                                {"min": tc["usage_tokens"], "max": tc["usage_tokens"]}, where=f"{where} run {i}",
                                source="sglang:generation_tokens_total (label sets summed)"))
            counts = sorted({r["completion_tokens"] for r in run["records"]})
            checks.append(Check("completion_tokens per request", counts[0] if len(counts) == 1 else None,
                                {"min": CURVE_MAX_TOKENS, "max": CURVE_MAX_TOKENS}, where=f"{where} run {i}: {counts}"))
    assert_checks(checks, "curve on the real SGLang (float32, 1 thread)")


def test_glmf_curve_from_a_shell_takes_the_servers_word(oracle: Any, tmp_path: Path, capsys: Any) -> None:
    """`glmf curve --url` with no boot log: seats and KV pool from SGLang's /server_info, and its
    decode_log_interval keeps a 4-token row free of the stale-gauge note."""
    from pytest_glmf.gates.curve.cli import cli as curve_cli

    out = tmp_path / "curve.json"
    assert curve_cli(["--url", oracle.base_url, "--users", "2", "--max-tokens", "4", "--runs", "1", "--no-warmup",
                      "--lag-p99-max-ms", "1000", "--json", str(out)]) == 0
    assert "glmf curve: the server says: speculative_algorithm null, tool_call_parser hermes" in capsys.readouterr().err
    row = json.loads(out.read_text())["command_output"]["rows"][0]
    assert (row["seats"], row["memory"]["kv_tokens"]) == (oracle.config.max_running_requests, KV_TOKENS), row["seat"]
    assert row["seat"]["gauge_stale"] and not [n for n in row["seat"]["notes"] if n.startswith("/metrics:")]


# ------------------------------------------------------------------------------------------------
# Tools: SGLang's own hermes parser


def _tools(oracle: Any, ids: tuple[str, ...], tool_choice: str, max_tokens: int = TOOLS_MAX_TOKENS,
           strict: bool = False) -> Any:
    from pytest_glmf.gates.tools.api import measure_tools
    from pytest_glmf.gates.tools.harness import load_scenarios

    scenarios = [s for s in load_scenarios() if s.id in ids]
    return measure_tools(oracle.base_url, scenarios, tool_choice=tool_choice, max_tokens=max_tokens, strict=strict)


@pytest.mark.parametrize("tool_choice", ["required", "named"])
def test_tools_forced_choice_parsed_by_sglangs_hermes(oracle: Any, sglang_report: dict, tool_choice: str) -> None:
    result = _tools(oracle, TOOLS_FORCED, tool_choice, strict=True)
    sglang_report.setdefault("tools", {})[tool_choice] = result.summary() | {"results": None}
    checks = [Check("turns", result.turns, {"min": len(TOOLS_FORCED)}),
              Check("leaks", result.leaks, {"max": 0}),
              Check("parsed", result.parsed, {"min": result.turns}, where="non-streamed and streamed, schema-valid",
                    hint=result.table()[:800])]
    assert_checks(checks, f"tool calls through SGLang's hermes parser, tool_choice={tool_choice}")


def test_tools_auto_text_answers_reported_as_text(oracle: Any, sglang_report: dict) -> None:
    """`auto`: the 135M model answers in prose; the gate says so (text answers, no leak), not 'parser'."""
    from pytest_glmf.gates.tools.harness import failure_hint

    result = _tools(oracle, TOOLS_AUTO, "auto")
    summary = result.summary()
    sglang_report.setdefault("tools", {})["auto"] = summary | {"results": None}
    bad = result.turns - result.parsed
    checks = [Check("failed requests", result.failed_requests, {"max": 0}),
              Check("leaks", result.leaks, {"max": 0})]
    if bad:
        checks.append(Check("unparsed turns are text answers", result.text_answers, {"min": bad, "max": bad}))
        checks.append(Check("hint names the model, not the parser", "not a parser problem" in (failure_hint(summary) or ""),
                            {"min": True}, where=str(failure_hint(summary))))
    assert_checks(checks, "tool gate, tool_choice=auto on SGLang")


def test_tools_call_cut_by_max_tokens_is_reported_as_cut(oracle: Any, sglang_report: dict) -> None:
    """SGLang returns a call cut by max_tokens as raw `<tool_call>` text in content (non-streamed),
    partial deltas (streamed), finish_reason length: the gate says "cut by max_tokens", not "leak"."""
    result = _tools(oracle, ("weather_single",), "required", max_tokens=12)
    # non-streamed: '<tool_call>{"name":"get_' in content; streamed: nothing (the parser holds it back)
    summary = result.summary()
    sglang_report.setdefault("tools", {})["cut"] = summary | {"results": None}
    problems = [p for r in result.results for p in r["problems"]]
    checks = [Check("cut_calls", result.cut_calls, {"min": result.turns, "max": result.turns},
                    where="; ".join(problems)[:300]),
              Check("text answers", result.text_answers, {"max": 0}, where="; ".join(problems)[:300]),
              Check("leaks", result.leaks, {"max": 0}, where="; ".join(problems)[:300]),
              Check("finish_reason length seen", any(a["finish_reason"] == "length" for r in result.results
                                                     for a in r["answers"]), {"min": True})]
    assert_checks(checks, "a tool call cut by max_tokens on SGLang")


# ------------------------------------------------------------------------------------------------
# Template gate: SGLang's served prompt ids, against a stored run and against transformers


def test_template_served_prompt_ids_and_sglangs_tool_dump(oracle: Any, sglang_lanes: dict, sglang_report: dict) -> None:
    """/tokenize with messages and the chat completion's prompt_token_ids (return_prompt_token_ids)
    render all 7 packaged conversations alike (a stored run through one compares 7/7 through the
    other); against the model directory's own template applied by transformers, exactly the two
    tool conversations differ, at the `"defer_loading": null` SGLang 0.5.23 adds to every tool it
    hands the template (sglang#29061; tests/contract/test_template_contract.py pins the dump)."""
    from pytest_glmf.gates.template import load_conversations, measure_template, record_reference
    from pytest_glmf.gates.template.reference import reference_for_lane

    conversations = load_conversations()
    stored = record_reference(oracle.base_url, conversations, served_ids="tokenize")
    chat = measure_template(oracle.base_url, stored, conversations, served_ids="chat")
    local = reference_for_lane(sglang_lanes[ORACLE], None, None, ".", conversations)
    against_local = measure_template(oracle.base_url, local, conversations)
    sglang_report["template"] = {"chat vs stored tokenize run": chat.table(), "vs transformers": against_local.table()}
    tool_convs = sorted(c.id for c in conversations if c.tools)
    checks = [Check("conversations alike via tokenize and chat", chat.matched, {"min": 7, "max": 7}, hint=chat.table()),
              Check("conversations differing from transformers", sorted(against_local.differences) == tool_convs,
                    {"min": True}, hint=against_local.table()),
              Check("the difference is the tool dump's defer_loading", all(
                  '"defer_loading": null' in d["served_text"] and "defer_loading" not in d["reference_text"]
                  for d in against_local.differences.values()), {"min": True}, hint=against_local.table()),
              Check("failed requests", chat.failed_requests + against_local.failed_requests, {"max": 0})]
    assert_checks(checks, "template gate on SGLang 0.5.23")


# ------------------------------------------------------------------------------------------------
# Capacity: a small search answers on the real engine


def test_capacity_small_search_answers(oracle: Any, sglang_report: dict) -> None:
    from pytest_glmf.gates.capacity.measure import measure_capacity
    from pytest_glmf.gates.capacity.spec import SLO, CapacitySettings
    from pytest_glmf.gates.capacity.table import capacity_report
    from pytest_glmf.load import server_endpoints

    slo = SLO(per_user_tok_s=1.0, users_pct=50, ttft_s=30.0)
    settings = CapacitySettings(prompt_tokens=48, max_tokens=12, runs=1, warm_tokens=2, start_users=2,
                                max_users=4, resolution_users=1, spread_max_pct=100.0, client_retries=3)
    urls, facts = server_endpoints(oracle)          # what the capacity fixture passes (decode_log_interval too)
    result = measure_capacity(urls, slo, settings, facts=facts)
    sglang_report["capacity"] = {"table": capacity_report(result), "users": result.users,
                                 "probes": [p.users for p in result.probes]}
    checks = [Check("capacity answered", result.users, {"min": 1, "max": 4}, where=f"probes {[p.users for p in result.probes]}"),
              Check("probes", len(result.probes), {"min": 1, "max": 6})]
    assert_checks(checks, "capacity search on the real SGLang")


# ------------------------------------------------------------------------------------------------
# Drift: oracle and candidate both SGLang, teacher-forced through /generate, against transformers


def _direct(model_dir: Path, items: list[list[list[int]]], python: Path) -> list[list[float]]:
    proc = subprocess.run([str(python), str(HERE / "direct_logprobs.py")], input=json.dumps(
        {"model": str(model_dir), "items": items}), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_drift_through_generate_equals_transformers(sglang_servers: Any, sglang_dir: Path,
                                                    sglang_report: dict) -> None:
    from pytest_glmf.gates.drift.adapters import make_adapter
    from pytest_glmf.gates.drift.prompts import load_chat_prompts
    from pytest_glmf.gates.drift.reference import compare, make_reference, score_candidate
    from pytest_glmf.gates.drift.table import render_table

    oracle = sglang_servers.get(ORACLE)
    adapter = make_adapter(oracle.base_url, "sglang")
    try:
        ref = make_reference(adapter, load_chat_prompts(n=DRIFT_PROMPTS), max_tokens=DRIFT_MAX_TOKENS, k=DRIFT_K,
                             provenance={"lane": ORACLE})
    finally:
        adapter.close()
    cand_server = sglang_servers.get(CANDIDATE)
    adapter = make_adapter(cand_server.base_url, "sglang")
    try:
        cand = score_candidate(adapter, ref, label=CANDIDATE, provenance={"lane": CANDIDATE})
    finally:
        adapter.close()
        sglang_servers.stop(CANDIDATE)
    results = compare(ref, [cand])
    items = [[p["prompt_ids"], p["output_ids"]] for p in ref["prompts"]]
    python = sglang_dir / "venv" / "bin" / "python"
    direct = {"oracle": _direct(sglang_dir / "models" / "oracle", items, python),
              "candidate": _direct(sglang_dir / "models" / "nvfp4", items, python)}
    served = {"oracle": [p["scores"]["logprobs"] for p in ref["prompts"]],
              "candidate": [p["scores"]["logprobs"] for p in cand["prompts"]]}
    worst = {who: max(abs(a - b) for xs, ys in zip(served[who], direct[who]) for a, b in zip(xs, ys))
             for who in served}
    summary = results["candidates"][CANDIDATE]
    sglang_report["drift"] = {"table": render_table(results), "max_abs_vs_transformers": worst,
                              "self_check": ref["self_check"]}
    checks = [Check("oracle |served - transformers| max", worst["oracle"], {"max": DIRECT_TOL},
                    where=f"{sum(map(len, served['oracle']))} tokens"),
              Check("candidate |served - transformers| max", worst["candidate"], {"max": DIRECT_TOL}),
              Check("oracle self-check exact", ref["self_check"]["exact"], {"min": True},
                    where=str(ref["self_check"])),
              Check("candidate drifts", summary["mean_abs_dlogp"], {"min": 1e-4},
                    hint="the candidate scores like the oracle: were the quantized weights served?")]
    assert_checks(checks, "drift teacher-forced through SGLang's /generate vs transformers")
