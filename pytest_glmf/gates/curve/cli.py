"""`glmf curve`: the curve from a shell, the same code as the suite (`measure_curve`).

Every curve setting (spec.py) is a flag of its name (`--max-tokens`, `--runs`, `--rate-per-s`,
`--prompt-tokens`, ...; gates/flags.py), checked as a thresholds file's `settings:` is; the
names users knew stay as aliases (`--rate`, `--spread-max`, `--client-error-max`, `--lag-p99-max-ms`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_glmf.cli import interrupted
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.boot.told import shell_facts
from pytest_glmf.gates.curve.api import measure_curve, row_record
from pytest_glmf.gates.curve.measure import curve_result, load_settings, summary
from pytest_glmf.gates.curve.spec import CurveRowSettings
from pytest_glmf.gates.curve.table import curve_table, knee_sentence
from pytest_glmf.gates.flags import Alias, AliasSpec, SettingFlags
from pytest_glmf.load import ContextTooShort, load_prompt_variants, replica_facts
from pytest_glmf.results.gatejson import command_document, write_document
from pytest_glmf.text import fold

# The client's settings, named alike by the curve and capacity (the names `glmf curve` and
# `glmf capacity` had before their flags came from the specs stay as aliases).
CLIENT_ALIASES: dict[str, AliasSpec] = {
    "spread_max_pct": "--spread-max",
    "client_error_max_pct": "--client-error-max",
    "lag_p99_max_s": Alias("--lag-p99-max-ms", scale=1e-3),
}
MODEL_HELP = "model name to send (default: the server's first model, as glmf capacity)"

FLAGS = SettingFlags(CurveRowSettings, aliases={**CLIENT_ALIASES, "rate_per_s": "--rate"},
                     help={"model": MODEL_HELP})


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="glmf curve", description="Concurrency curve against a running server.")
    p.add_argument("--url", required=True, action="append",
                   help="server base URL, e.g. http://127.0.0.1:30000 (or a router's); repeat for several replicas: "
                        "the streams are dealt round-robin over them")
    p.add_argument("--users", default="1,8,16", help="comma-separated users values (default 1,8,16)")
    p.add_argument("--boot-log", type=Path, action="append",
                   help="server boot log: seats and KV pool for the row checks; with several --url, one per url "
                        "in the same order (seats are summed, each replica's share checked); without it, what one "
                        "server says at /server_info")
    p.add_argument("--json", type=Path, help="write the result (with per-request records) here")
    FLAGS.add(p, "the curve's settings (gates/curve/spec.py)")
    a = p.parse_args(argv)
    try:
        users = [int(u) for u in a.users.split(",") if u.strip()]
    except ValueError:
        p.error(f"--users takes comma-separated integers, got {a.users!r}")
    if not users or min(users) < 1:
        p.error(f"--users takes comma-separated integers >= 1, got {a.users!r}")
    settings: CurveRowSettings = FLAGS.settings(p, a)
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
        prompts = load_prompt_variants(settings.prompt_file)
    except (OSError, UnicodeDecodeError) as exc:
        p.error(str(exc))
    url = a.url if len(a.url) > 1 else a.url[0]
    finished: list[dict] = []
    try:
        result = measure_curve(url, users, settings=settings, boot_facts=facts, on_row=finished.append,
                               progress=lambda line: print(fold(line), file=sys.stderr, flush=True))
    except ContextTooShort as exc:                # the workload cannot fit the server's context
        print(f"glmf {exc.text('flags')}", file=sys.stderr)
        return 2
    except (ConfigError, ValueError) as exc:      # e.g. prompt_tokens and no /tokenize
        print(f"glmf curve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if finished:
            print(curve_table(finished, names="flags"))
        load = load_settings(settings, users)
        run = curve_result(url, finished, load.workload(prompts), load)
        return interrupted("curve", a.json, curve_document(url, finished, run), f"{len(finished)} of {len(users)} rows")
    print(curve_table(result.run["rows"], names="flags"))
    print(knee_sentence(result.knee))
    # a shell's curve is its speed and TTFT: a row without them (or not the server's) fails; an
    # ITL the client could not tell is said in the row's flags
    code = 0 if all(r.valid and not r.detail.get("client_bound") for r in result.rows) else 1
    if a.json:
        write_document(a.json, curve_document(url, result.run["rows"], result.run, code))
    return code


def curve_document(url: str | list[str], rows: list[dict[str, Any]], run: dict[str, Any],
                   code: int | None = None) -> dict[str, Any]:
    """The result document (results/gatejson.py): each row as the suite records it (`users=N`),
    the runner's answer with its per-request records as the command's own output."""
    return command_document("curve", {"curve": {f"users={r['users']}": row_record(dict(r)) for r in rows}},
                            url=url, exitstatus=code, output=summary(run, records=True))
