"""Concurrency curve: per-user tok/s, aggregate tok/s and TTFT at N users, with a load generator that
checks itself. Usable without pytest:

    from pytest_glmf.gates.curve import api as load
    result = load.run_curve("http://127.0.0.1:30000", users=[1, 8, 16], max_tokens=384, facts=boot_facts)
    print(load.curve_table(result["rows"]))

or `glmf curve --url URL --users 1,8,16 --max-tokens 384 --json OUT`. Definitions: load_records;
the streaming path: load_http; the runner: load_runner; seat/memory/client checks: load_checks.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_glmf.gates.verdict import fmt, render_table
from pytest_glmf.gates.curve.checks import describe_flags, row_gate_checks  # noqa: F401  (public re-export)
from pytest_glmf.gates.curve.records import RequestRecord, knee  # noqa: F401
from pytest_glmf.gates.curve.runner import CurveSettings, Progress, Workload, run_rows, strip_records
from pytest_glmf.data import read_text as read_data_file

SCHEMA = 1


def briefing_prompts() -> list[str]:
    """The recipe's workload: a ~2,400-token briefing and a 400-word synthesis task, in variants that
    rotate the briefing's sections (so no two variants share a prefix)."""
    return prompts_from_text(read_data_file(None, "briefing.md"))


def load_prompts(ref: str | Path | None) -> list[str]:
    """Prompt variants from a file path, or from a file of the packaged fixtures by name
    (e.g. "briefing_history_essay.md"); None: the recipe's briefing."""
    return prompts_from_text(read_data_file(ref, "briefing.md"))


def count_tokens(base_url: str, text: str, model: str | None = None, timeout_s: float = 10.0) -> int | None:
    """The server's own token count of `text` (SGLang and vLLM `/tokenize`); None when the server
    has no tokenize endpoint."""
    import httpx

    body: dict[str, Any] = {"prompt": text, "add_special_tokens": False}
    if model:
        body["model"] = model
    try:
        r = httpx.post(base_url.rstrip("/") + "/tokenize", json=body, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    data = r.json()
    count = data.get("count")
    return int(count) if isinstance(count, int) else len(data.get("tokens") or []) or None


def fit_prompts(base_url: str, prompts: list[str], target_tokens: int,
                model: str | None = None) -> tuple[list[str], list[int]]:
    """Trim each prompt's body (never its last paragraph: the task) to at most `target_tokens`
    of the server's own tokenizer, so "a 2,400-token briefing" means 2,400 tokens on whichever
    tokenizer the lane serves. Raises ValueError when the server cannot count tokens."""
    fitted, counts = [], []
    for prompt in prompts:
        n = count_tokens(base_url, prompt, model)
        if n is None:
            raise ValueError(f"{base_url} has no /tokenize endpoint: settings.prompt_tokens needs one "
                             "(drop the setting to send the prompt file as it is)")
        if n <= target_tokens:
            fitted.append(prompt)
            counts.append(n)
            continue
        body, _, task = prompt.rpartition("\n\n")
        words = body.split(" ")
        lo, hi, best = 0, len(words), (task, count_tokens(base_url, task, model) or 0)
        while lo <= hi:   # the longest body prefix (in words) that keeps the whole prompt within target
            mid = (lo + hi) // 2
            cand = " ".join(words[:mid]) + "\n\n" + task
            c = count_tokens(base_url, cand, model) or 0
            if c <= target_tokens:
                best, lo = (cand, c), mid + 1
            else:
                hi = mid - 1
        fitted.append(best[0])
        counts.append(best[1])
    return fitted, counts


def prompts_from_text(text: str) -> list[str]:
    """Split a briefing file into variants: sections start with '## '; the last one is the task and
    stays last. A file without sections is one prompt."""
    parts = [p.strip() for p in ("\n" + text).split("\n## ") if p.strip()]
    if len(parts) < 3:
        return [text.strip()]
    head, sections, task = parts[0], parts[1:-1], parts[-1]
    head = head.lstrip("# ").strip()
    out = []
    for shift in range(len(sections)):
        order = sections[shift:] + sections[:shift]
        out.append("\n\n".join([head] + [f"## {s}" for s in order] + [f"## {task}"]))
    return out


def run_curve(base_url: str, users: Sequence[int], *, max_tokens: int = 384, runs: int = 3,
              facts: Mapping[str, Any] | None = None, prompts: list[str] | None = None,
              progress: Progress | None = None, workload: Workload | None = None,
              settings: CurveSettings | None = None, **settings_kw: Any) -> dict[str, Any]:
    """Run the curve and return {"schema", "rows", "knee", "definitions"}. `facts` are the boot facts
    (BootFacts.to_dict()): seats and KV pool for the row checks."""
    workload = workload or Workload(prompts=prompts or briefing_prompts(), max_tokens=max_tokens)
    settings = settings or CurveSettings(users=list(users), runs=runs, **settings_kw)
    rows = run_rows(base_url, workload, settings, facts, progress)
    return {"schema": SCHEMA, "url": base_url, "rows": rows, "knee": knee(rows), "definitions": DEFINITIONS,
            "workload": {"max_tokens": workload.max_tokens, "path": workload.path, "prompts": len(workload.prompts),
                         "rate_per_s": settings.rate_per_s}}


DEFINITIONS = {
    "ttft_s": "first chunk with content, reasoning or a tool call minus request send; queueing included",
    "per_user_tok_s": "(completion_tokens - 1) / (last token - first token) per request; median over users",
    "per_user_tok_s_p5": "5th percentile of the per-request speeds",
    "aggregate_tok_s": "all completion tokens / (last token anywhere - first send)",
    "itl_s": "gaps between successive content chunks",
    "spread_pct": "(max - min) / median over measured runs, larger of aggregate and per-user",
    "completion_tokens": "usage.completion_tokens; checked against chunks and /metrics (0.5 %)",
}


def curve_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The recipe's table: users, aggregate, per-user, TTFT p50/p95, spread, seats, flags."""
    body = []
    for r in rows:
        seats = r.get("seats")
        seat_txt = "-" if seats is None else (f"{seats} (shared)" if r["users"] > seats else str(seats))
        flags = describe_flags(r)
        body.append([str(r["users"]), fmt(r.get("aggregate_tok_s")), fmt(r.get("per_user_tok_s")),
                     fmt(r.get("per_user_tok_s_p5")), fmt(r.get("ttft_p50_s")), fmt(r.get("ttft_p95_s")),
                     "-" if r.get("spread_pct") is None else f"{r['spread_pct']:.1f} %", seat_txt,
                     "ok" if r.get("valid") and not flags else "; ".join(flags) or "invalid"])
    return render_table(body, ["users", "aggregate tok/s", "per-user tok/s", "p5 tok/s", "TTFT p50 s",
                               "TTFT p95 s", "spread", "seats", "flags"])


def knee_sentence(k: Mapping[str, Any]) -> str:
    if k.get("still_climbing") is None:
        return "knee: needs at least two rows"
    a, b = k["between_users"]
    if k["still_climbing"]:
        return f"aggregate still climbing at the last row ({k['last_gain_pct']:+.1f} % from {a} to {b} users)"
    return f"aggregate flat at the last row ({k['last_gain_pct']:+.1f} % from {a} to {b} users; peak at {k['peak_users']})"


def summary(result: Mapping[str, Any], records: bool = False) -> dict[str, Any]:
    """JSON-able result; per-request records only when asked (they are large)."""
    rows = result["rows"] if records else [strip_records(r) for r in result["rows"]]
    return {**result, "rows": rows}


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="glmf curve", description="Concurrency curve against a running server.")
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--users", default="1,8,16", help="comma-separated users values (default 1,8,16)")
    p.add_argument("--max-tokens", type=int, default=384)
    p.add_argument("--runs", type=int, default=3, help="measured runs per users value (default 3)")
    p.add_argument("--no-warmup", action="store_true", help="skip the discarded warm pass per users value")
    p.add_argument("--prompt-file", help="prompt text file (or a packaged fixture name); '## ' sections are "
                   "rotated into variants (default: the recipe's briefing)")
    p.add_argument("--rate", type=float, help="open loop: requests per second instead of all at once")
    p.add_argument("--boot-log", type=Path, help="server boot log: seats and KV pool for the row checks")
    p.add_argument("--model", help="model name to send (default: 'default')")
    p.add_argument("--path", default="/v1/chat/completions")
    p.add_argument("--continuous-usage", action="store_true", help="ask for usage on every chunk (vLLM)")
    p.add_argument("--spread-max", type=float, default=5.0, help="flag rows whose spread exceeds this (%%)")
    p.add_argument("--lag-p99-max-ms", type=float, default=2.0,
                   help="client self-check: event-loop lag p99 above this marks a run invalid (with kernel receive "
                        "times: only when token events also shared socket reads; default 2)")
    p.add_argument("--json", type=Path, help="write the result (with per-request records) here")
    a = p.parse_args(argv)
    try:
        users = [int(u) for u in a.users.split(",") if u.strip()]
    except ValueError:
        p.error(f"--users takes comma-separated integers, got {a.users!r}")
    facts = None
    if a.boot_log:
        from pytest_glmf.gates.boot.parse import parse_boot_log

        facts = parse_boot_log(a.boot_log.read_text(errors="replace")).to_dict()
    try:
        prompts = load_prompts(a.prompt_file)
    except (OSError, UnicodeDecodeError) as exc:
        p.error(str(exc))
    workload = Workload(prompts=prompts, max_tokens=a.max_tokens, path=a.path, model=a.model,
                        continuous_usage=a.continuous_usage)
    settings = CurveSettings(users=users, runs=a.runs, warmup=not a.no_warmup, rate_per_s=a.rate,
                             spread_max_pct=a.spread_max, lag_p99_max_s=a.lag_p99_max_ms / 1e3)
    result = run_curve(a.url, users, workload=workload, settings=settings, facts=facts,
                       progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(curve_table(result["rows"]))
    print(knee_sentence(result["knee"]))
    if a.json:
        a.json.write_text(json.dumps(summary(result, records=True), indent=1, default=str))
    return 0 if all(r["valid"] for r in result["rows"]) else 1
