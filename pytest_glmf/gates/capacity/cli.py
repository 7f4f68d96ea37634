"""`glmf capacity`: capacity under a service level from a shell, the same code as the suite.

    glmf capacity --url URL --slo per_user_tok_s=50,ttft_s=1.0 [--boot-log LOG] [--prompt-tokens 2400]
                  [--context 2048,8192,32768] [--rate] [--bisect] [--json OUT] [--plot OUT.png]

Without --context: one search (the most concurrent users meeting the service level). With
--context: the frontier, one search per context length, shortest first. With --rate: also the
open-loop capacity (Poisson arrivals). Each answer (the last probe that passed) comes with the
boundary the probes put beside it and that boundary's 95 % interval, and its cost (probes,
measured requests, wall time), in the text and the JSON. The client's settings are `glmf curve`'s
(--workers, --client-error-max, --lag-p99-max-ms, --client-retries, --spread-max). Exit 0 when every search found an
answer from valid measurements, 1 otherwise (no answer: nothing met the service level, or
undecided: a probe the client could not measure), 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.capacity.spec import DEFAULTS, SLO, CapacitySettings, build_slo
from pytest_glmf.gates.curve.cli import add_client_flags
from pytest_glmf.gates.spec import build_settings
from pytest_glmf.gates.verdict import fold


def parse_slo(text: str) -> SLO:
    """`per_user_tok_s=50,ttft_s=1.0[,users_pct=95,ttft_pct=95,allow_queueing=true]`."""
    data: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, eq, value = part.partition("=")
        if not eq:
            raise ConfigError(f"--slo: {part!r} is not KEY=VALUE")
        low = value.strip().lower()
        if low in ("true", "false"):
            data[key.strip()] = low == "true"
        else:
            try:
                data[key.strip()] = float(value)
            except ValueError:
                raise ConfigError(f"--slo {key}: expected a number, got {value!r}") from None
    return build_slo(data, "--slo")


def _ints(p: argparse.ArgumentParser, flag: str, text: str | None) -> list[int]:
    try:
        return [int(x) for x in (text or "").split(",") if x.strip()]
    except ValueError:
        p.error(f"{flag} takes comma-separated integers, got {text!r}")
    return []


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="glmf capacity", description="Capacity under a service level against a "
                                "running server: the most concurrent users (and request rate) that meet it.")
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--slo", required=True, help="service level: per_user_tok_s=50,ttft_s=1.0 (also users_pct, "
                   "ttft_pct, allow_queueing=true)")
    p.add_argument("--boot-log", type=Path, help="the server's boot log: its seats and KV pool bound the search "
                   "(without it: what the server says at /server_info)")
    p.add_argument("--prompt-tokens", type=int, default=DEFAULTS.prompt_tokens,
                   help=f"prompt tokens per user, fitted with the server's /tokenize (default {DEFAULTS.prompt_tokens}; "
                        "0: the prompt file as it is)")
    p.add_argument("--max-tokens", type=int, default=DEFAULTS.max_tokens)
    p.add_argument("--context", help="frontier: comma-separated prompt tokens per user, e.g. 2048,8192,32768,57344")
    p.add_argument("--runs", type=int, default=DEFAULTS.runs, help=f"measured runs per probe (default {DEFAULTS.runs})")
    p.add_argument("--start", type=int, help="first users value to probe (default 8)")
    p.add_argument("--resolution", type=float, default=DEFAULTS.resolution_pct,
                   help=f"resolution in percent of the answer (default {DEFAULTS.resolution_pct:g})")
    p.add_argument("--resolution-users", type=int, help="resolution in users (instead of a percentage)")
    p.add_argument("--max-users", type=int, default=DEFAULTS.max_users)
    p.add_argument("--bisect", action="store_true",
                   help="bracket and bisect only (default: each probe where a fit of the probes so far puts the boundary)")
    p.add_argument("--shared-prefix", action="store_true",
                   help="every user sends the same prompt, a unique line last (a prefix cache stores it once)")
    p.add_argument("--prompt-file", help="the text prompts are made of (default: the recipe's briefing)")
    p.add_argument("--model", help="model name to send (default: the server's first model)")
    # the client's settings, as `glmf curve` names them
    p.add_argument("--workers", type=int, help="client worker processes reading the streams (default: as many as "
                   "the measured cost per token event needs; a probe still client-bound is measured again with "
                   "twice as many, up to the cores)")
    add_client_flags(p, DEFAULTS, "probe")
    p.add_argument("--rate", action="store_true", help="also search the open-loop rate (Poisson arrivals)")
    p.add_argument("--rate-requests", type=int, default=DEFAULTS.rate.requests, help="requests per open-loop run")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="the server is a simulator at this time scale: report the modelled GPU's units")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--plot", type=Path, help="write the frontier as a PNG here (needs --context and matplotlib)")
    a = p.parse_args(argv)
    try:
        slo = parse_slo(a.slo)
        settings: CapacitySettings = build_settings(CapacitySettings, {
            "prompt_tokens": a.prompt_tokens or None, "max_tokens": a.max_tokens, "runs": a.runs,
            "resolution_pct": a.resolution, "resolution_users": a.resolution_users, "max_users": a.max_users,
            "shared_prefix": a.shared_prefix, "guided": not a.bisect, "prompt_file": a.prompt_file, "model": a.model,
            "start_users": a.start, "path": a.path, "continuous_usage": a.continuous_usage, "workers": a.workers,
            "spread_max_pct": a.spread_max, "lag_p99_max_s": a.lag_p99_max_ms / 1e3,
            "client_error_max_pct": a.client_error_max,
            "client_retries": a.client_retries, "rate": {"requests": a.rate_requests}}, "glmf capacity")
    except ConfigError as exc:
        p.error(str(exc))
    contexts = _ints(p, "--context", a.context)
    if a.plot and not contexts:
        p.error("--plot draws the frontier: give --context too")
    facts = None
    if a.boot_log:
        from pytest_glmf.gates.boot.parse import parse_boot_log

        try:
            facts = parse_boot_log(a.boot_log.read_text(errors="replace")).to_dict()
        except OSError as exc:
            p.error(f"--boot-log: {exc}")
    from pytest_glmf.gates.curve.endpoints import shell_facts

    facts, said = shell_facts(a.url, facts)    # seats and KV pool the server says, where no log did
    print(f"glmf capacity: the server says: {said}", file=sys.stderr)
    return run(a, slo, settings, contexts, facts)


def run(a: argparse.Namespace, slo: SLO, settings: CapacitySettings, contexts: list[int],
        facts: dict[str, Any] | None) -> int:
    from pytest_glmf.gates.capacity.measure import measure_capacity, measure_frontier, measure_rate_capacity
    from pytest_glmf.gates.capacity.table import capacity_report, frontier_table, rate_report

    said: list[str] = []   # the probes' verdicts so far: what a Ctrl-C keeps of an unfinished search

    def say(line: str) -> None:         # an error: printed whole
        said.append(line)
        print(line, file=sys.stderr, flush=True)

    def progress(line: str) -> None:    # folded at 120 columns, a table row whole
        said.append(line)
        print(fold(line), file=sys.stderr, flush=True)

    kw: dict[str, Any] = {"facts": facts, "time_scale": a.time_scale, "progress": progress}
    out: dict[str, Any] = {"slo": slo.to_dict()}
    ok = True
    users = None
    try:
        if contexts:
            frontier = measure_frontier(a.url, slo, settings, contexts=contexts, **kw)
            for point in frontier.points:
                print(capacity_report(point) + "\n")
            print(f"frontier: {slo.describe()}\n{frontier_table(frontier, facts)}")
            out["frontier"] = frontier.to_dict()
            ok = all(pt.users is not None for pt in frontier.points)
            users = next((pt for pt in frontier.points if pt.workload["prompt_tokens"] == settings.prompt_tokens), None)
            if a.plot:
                from pytest_glmf.gates.capacity.plot import plot_frontier

                try:
                    print(f"plot: {plot_frontier(frontier, a.plot, facts=facts)}")
                except RuntimeError as exc:
                    say(f"glmf capacity: {exc}")
                    ok = False
        else:
            users = measure_capacity(a.url, slo, settings, **kw)
            print(capacity_report(users))
            out["capacity"] = users.to_dict()
            ok = users.users is not None
        if a.rate:
            rate = measure_rate_capacity(a.url, slo, replace(settings), users_capacity=users, **kw)
            print("\n" + rate_report(rate))
            out["rate"] = rate.to_dict()
            ok = ok and rate.rate_per_s is not None
    except ValueError as exc:      # e.g. no /tokenize for prompt_tokens
        say(f"glmf capacity: {exc}")
        return 2
    except KeyboardInterrupt:
        from pytest_glmf.cli import interrupted

        probes = [line for line in said if line.startswith(("capacity users=", "capacity rate="))
                  and (": meets " in line or ": misses " in line)]   # judged probes, not warm passes
        return interrupted("capacity", a.json, {**out, "progress": said},
                           f"{', '.join(k for k in out if k != 'slo') or 'no finished search'}; {len(probes)} probe(s)")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1, default=str))
    return 0 if ok else 1
