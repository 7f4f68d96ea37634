"""`glmf curve`: the curve from a shell, the same code as the suite."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_glmf.cli import interrupted
from pytest_glmf.gates.curve.endpoints import replica_facts, shell_facts
from pytest_glmf.gates.curve.measure import curve_result, run_curve, run_settings_for, summary, workload_for
from pytest_glmf.gates.curve.spec import DEFAULTS, CurveRowSettings
from pytest_glmf.gates.curve.table import curve_table, knee_sentence
from pytest_glmf.gates.curve.workers import ARRIVALS
from pytest_glmf.gates.curve.workload import load_prompt_variants
from pytest_glmf.gates.verdict import fold


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="glmf curve", description="Concurrency curve against a running server.")
    p.add_argument("--url", required=True, action="append",
                   help="server base URL, e.g. http://127.0.0.1:30000 (or a router's); repeat for several replicas: "
                        "the streams are dealt round-robin over them")
    p.add_argument("--users", default="1,8,16", help="comma-separated users values (default 1,8,16)")
    p.add_argument("--max-tokens", type=int, default=DEFAULTS.max_tokens)
    p.add_argument("--runs", type=int, default=DEFAULTS.runs,
                   help=f"measured runs per users value (default {DEFAULTS.runs})")
    p.add_argument("--no-warmup", action="store_true", help="skip the discarded warm pass per users value")
    p.add_argument("--prompt-file", help="prompt text file (or a packaged fixture name); '## ' sections are "
                   "rotated into variants (default: the recipe's briefing)")
    p.add_argument("--rate", type=float, help="open loop: requests per second instead of all at once")
    p.add_argument("--shared-prefix", action="store_true",
                   help="every user sends the same prompt, a unique line last (a prefix cache stores it once)")
    p.add_argument("--boot-log", type=Path, action="append",
                   help="server boot log: seats and KV pool for the row checks; with several --url, one per url "
                        "in the same order (seats are summed, each replica's share checked); without it, what one "
                        "server says at /server_info")
    p.add_argument("--workers", type=int, help="client worker processes reading the streams (default: as many as "
                   "the measured cost per token event needs, capped by the cores)")
    p.add_argument("--arrival", choices=ARRIVALS, default="uniform",
                   help="open loop (--rate): uniform spacing or a seeded Poisson process at the total rate")
    p.add_argument("--model", help="model name to send (default: the server's first model, as glmf capacity)")
    add_client_flags(p, DEFAULTS, "row")
    p.add_argument("--json", type=Path, help="write the result (with per-request records) here")
    a = p.parse_args(argv)
    try:
        users = [int(u) for u in a.users.split(",") if u.strip()]
    except ValueError:
        p.error(f"--users takes comma-separated integers, got {a.users!r}")
    if a.workers is not None and a.workers < 1:
        p.error(f"--workers takes an integer >= 1, got {a.workers}")
    if a.client_retries < 0:
        p.error(f"--client-retries takes an integer >= 0, got {a.client_retries}")
    facts = None
    if a.boot_log:
        from pytest_glmf.gates.boot.parse import parse_boot_log

        if len(a.url) > 1 and len(a.boot_log) != len(a.url):
            p.error(f"{len(a.boot_log)} --boot-log for {len(a.url)} --url: give one boot log per url, in order")
        try:
            each = [parse_boot_log(log.read_text(errors="replace")).to_dict() for log in a.boot_log]
        except OSError as exc:
            p.error(f"--boot-log: {exc}")
        facts = each[0] if len(each) == 1 else replica_facts(
            each, a.url if len(a.url) > 1 else [str(log) for log in a.boot_log],
            assigned_by="client" if len(a.url) > 1 else "router")
    # what the server says of itself fills what no boot log gave (one server; replicas: their logs)
    if len(a.url) == 1:
        facts, said = shell_facts(a.url[0], facts)
        print(f"glmf curve: the server says: {said}", file=sys.stderr)
    try:
        prompts = load_prompt_variants(a.prompt_file)
    except (OSError, UnicodeDecodeError) as exc:
        p.error(str(exc))
    settings = CurveRowSettings(max_tokens=a.max_tokens, runs=a.runs, warmup=not a.no_warmup, rate_per_s=a.rate,
                                spread_max_pct=a.spread_max, path=a.path, model=a.model,
                                continuous_usage=a.continuous_usage, lag_p99_max_s=a.lag_p99_max_ms / 1e3,
                                client_error_max_pct=a.client_error_max,
                                workers=a.workers, arrival=a.arrival, shared_prefix=a.shared_prefix,
                                client_retries=a.client_retries)
    url, workload, run_settings = a.url if len(a.url) > 1 else a.url[0], workload_for(settings, prompts), \
        run_settings_for(settings, users)
    finished: list[dict] = []
    try:
        result = run_curve(url, users, workload=workload, settings=run_settings, facts=facts, on_row=finished.append,
                           progress=lambda line: print(fold(line), file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        if finished:
            print(curve_table(finished))
        doc = summary(curve_result(url, finished, workload, run_settings), records=True)
        return interrupted("curve", a.json, doc, f"{len(finished)} of {len(users)} rows")
    print(curve_table(result["rows"]))
    print(knee_sentence(result["knee"]))
    if a.json:
        a.json.write_text(json.dumps(summary(result, records=True), indent=1, default=str))
    return 0 if all(r["valid"] for r in result["rows"]) else 1


def add_client_flags(p: argparse.ArgumentParser, defaults: Any, what: str) -> None:
    """The client's settings as flags, one wording for `glmf curve` and `glmf capacity` (same names;
    `defaults` is the gate's settings, `what` a row or a probe)."""
    p.add_argument("--path", default=defaults.path)
    p.add_argument("--continuous-usage", action="store_true", help="ask for usage on every chunk (vLLM)")
    p.add_argument("--spread-max", type=float, default=defaults.spread_max_pct,
                   help=f"flag {what}s whose runs spread more than this (%%)")
    p.add_argument("--client-error-max", type=float, default=defaults.client_error_max_pct, metavar="PCT",
                   help=f"client self-check: a {what}'s run is client-bound when its timestamps can move TTFT, "
                        "per-user tok/s or ITL by more than PCT %% (default: --spread-max)")
    p.add_argument("--lag-p99-max-ms", type=float, default=defaults.lag_p99_max_s * 1e3,
                   help="client self-check, information only: event-loop lag p99 above this is named beside the "
                        f"error bound (open-loop sends later than this mark a run; default {defaults.lag_p99_max_s * 1e3:g})")
    p.add_argument("--client-retries", type=int, default=defaults.client_retries,
                   help=f"runs per {what} measured again in place of runs the self-check marks (default "
                        f"{defaults.client_retries}; 0: never)")
