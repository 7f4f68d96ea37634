"""`glmf capacity`: capacity under a service level from a shell, the same code as the suite.

    glmf capacity --url URL --slo per_user_tok_s=50,ttft_s=1.0 [--boot-log LOG] [--prompt-tokens 2400]
                  [--context 2048,8192,32768] [--rate] [--bisect] [--json OUT] [--plot OUT.png]

Without --context: one search (the most concurrent users meeting the service level). With
--context: the frontier, one search per context length, shortest first. With --rate: also the
open-loop capacity (Poisson arrivals). Each answer (the last probe that passed) comes with the
boundary the probes put beside it and that boundary's 95 % interval, and its cost (probes,
measured requests, wall time), in the text and the JSON. Every capacity setting (spec.py) is a
flag of its name, checked as the thresholds file's are (gates/flags.py); the client's are named as
`glmf curve`'s (--workers, --client-error-max, --lag-p99-max-ms, --client-retries, --spread-max). Exit 0 when every search found an
answer from valid measurements, 1 otherwise (no answer: nothing met the service level, or
undecided: a probe the client could not measure), 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.capacity.spec import SLO, CapacitySettings, build_slo
from pytest_glmf.gates.curve.cli import CLIENT_ALIASES, MODEL_HELP
from pytest_glmf.gates.flags import Alias, SettingFlags
from pytest_glmf.text import fold


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


def _prompt_tokens(text: str) -> int | None:
    """--prompt-tokens N; 0: the prompt file as it is (the setting's null)."""
    return int(text) or None


FLAGS = SettingFlags(CapacitySettings, aliases={
    **CLIENT_ALIASES, "resolution_pct": "--resolution", "start_users": "--start", "frontier.contexts": "--context",
    "guided": Alias("--bisect", const=False, help="bracket and bisect only (default: each probe where a fit of the "
                    "probes so far puts the boundary); the same as --no-guided")},
    types={"prompt_tokens": _prompt_tokens},
    help={"prompt_tokens": "prompt tokens per user, fitted with the server's /tokenize (0: the prompt file as it is)",
          "model": MODEL_HELP.replace(", as glmf capacity", ""),
          "frontier.contexts": "frontier: comma-separated prompt tokens per user, e.g. 2048,8192,32768,57344"})


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="glmf capacity", description="Capacity under a service level against a "
                                "running server: the most concurrent users (and request rate) that meet it.")
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--slo", required=True, help="service level: per_user_tok_s=50,ttft_s=1.0 (also users_pct, "
                   "ttft_pct, allow_queueing=true)")
    p.add_argument("--boot-log", type=Path, help="the server's boot log: its seats and KV pool bound the search "
                   "(without it: what the server says at /server_info)")
    p.add_argument("--rate", action="store_true", help="also search the open-loop rate (Poisson arrivals)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="the server is a simulator at this time scale: report the modelled GPU's units")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--plot", type=Path, help="write the frontier as a PNG here (needs --context and matplotlib)")
    FLAGS.add(p, "the capacity's settings (gates/capacity/spec.py; the client's are the curve's)")
    a = p.parse_args(argv)
    if a.time_scale <= 0:
        p.error(f"--time-scale: expected a number > 0, got {a.time_scale:g}")
    try:
        slo = parse_slo(a.slo)
    except ConfigError as exc:
        p.error(str(exc))
    settings: CapacitySettings = FLAGS.settings(p, a)
    contexts = list(settings.frontier.contexts)
    if a.plot and not contexts:
        p.error("--plot draws the frontier: give --context too")
    facts = None
    if a.boot_log:
        from pytest_glmf.gates.boot.parse import parse_boot_log

        try:
            facts = parse_boot_log(a.boot_log.read_text(errors="replace")).to_dict()
        except OSError as exc:
            p.error(f"--boot-log: {exc}")
    from pytest_glmf.gates.boot.told import shell_facts

    facts, said = shell_facts(a.url, facts)    # seats and KV pool the server says, where no log did
    print(f"glmf capacity: the server says: {said}", file=sys.stderr)
    return run(a, slo, settings, contexts, facts)


def run(a: argparse.Namespace, slo: SLO, settings: CapacitySettings, contexts: list[int],
        facts: dict[str, Any] | None) -> int:
    from pytest_glmf.gates.capacity.measure import measure_capacity, measure_frontier, measure_rate_capacity
    from pytest_glmf.gates.capacity.table import (
        capacity_report,
        frontier_entries,
        frontier_table,
        rate_report,
        users_key,
    )
    from pytest_glmf.load import ContextTooShort
    from pytest_glmf.results.gatejson import command_document, write_document

    said: list[str] = []   # the probes' verdicts so far: what a Ctrl-C keeps of an unfinished search

    def say(line: str) -> None:         # an error: printed whole
        said.append(line)
        print(line, file=sys.stderr, flush=True)

    def progress(line: str) -> None:    # folded at 120 columns, a table row whole
        said.append(line)
        print(fold(line), file=sys.stderr, flush=True)

    kw: dict[str, Any] = {"facts": facts, "time_scale": a.time_scale, "progress": progress}
    out: dict[str, Any] = {"slo": slo.to_dict()}
    entries: dict[str, Any] = {}     # as the suite's glmf_capacity records them (fixture.py)
    ok = True
    users = None
    try:
        if contexts:
            frontier = measure_frontier(a.url, slo, settings, contexts=contexts, **kw)
            for point in frontier.points:
                print(capacity_report(point) + "\n")
            print(f"frontier: {slo.describe()}\n{frontier_table(frontier, facts)}")
            out["frontier"] = frontier.to_dict()
            entries.update(frontier_entries(frontier, facts))
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
            entries[users_key(users.workload)] = users.to_record()
            ok = users.users is not None
        if a.rate:
            rate = measure_rate_capacity(a.url, slo, replace(settings), users_capacity=users, **kw)
            print("\n" + rate_report(rate))
            out["rate"] = rate.to_dict()
            entries["rate"] = rate.to_record()
            ok = ok and rate.rate_per_s is not None
    except ContextTooShort as exc:     # the workload cannot fit the server's context
        exc.gate = "capacity"
        say(f"glmf {exc.text('flags')}")
        return 2
    except ValueError as exc:      # e.g. no /tokenize for prompt_tokens
        say(f"glmf capacity: {exc}")
        return 2
    except KeyboardInterrupt:
        from pytest_glmf.cli import interrupted

        probes = [line for line in said if line.startswith(("capacity users=", "capacity rate="))
                  and (": meets " in line or ": misses " in line)]   # judged probes, not warm passes
        return interrupted("capacity", a.json, command_document("capacity", {"capacity": entries}, url=a.url,
                                                                output={**out, "progress": said}),
                           f"{', '.join(k for k in out if k != 'slo') or 'no finished search'}; {len(probes)} probe(s)")
    code = 0 if ok else 1
    if a.json:
        write_document(a.json, command_document("capacity", {"capacity": entries}, url=a.url, exitstatus=code,
                                                output=out))
    return code
