"""`glmf tools`: the tool-call gate from a shell."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_glmf.cli import interrupted
from pytest_glmf.engine.client import Client
from pytest_glmf.gates.tools.harness import TurnResult, harness_summary, load_scenarios, run_harness
from pytest_glmf.gates.tools.spec import DEFAULTS, TOOL_CHOICES
from pytest_glmf.gates.tools.table import render_summary


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="glmf tools", description="Tool-call gate: parsed turns, leaks, schema-valid arguments.")
    ap.add_argument("--url", required=True, help="server base URL")
    ap.add_argument("--concurrency", type=int, default=1, help="turns in flight at once (default 1)")
    ap.add_argument("--tool-choice", default=DEFAULTS.tool_choice, choices=TOOL_CHOICES)
    ap.add_argument("--strict", action="store_true", help='add "strict": true to every function')
    ap.add_argument("--scenarios", help="YAML file of scenarios (default: the packaged set)")
    ap.add_argument("--no-stream-check", action="store_true", help="skip the streamed request of each turn")
    ap.add_argument("--json", dest="json_out", help="write the result JSON here")
    args = ap.parse_args(argv)
    if args.concurrency < 1:
        ap.error("--concurrency must be >= 1")
    scenarios = load_scenarios(args.scenarios)
    finished: list[TurnResult] = []
    try:
        with Client(args.url) as client:
            summary = run_harness(client, scenarios, concurrency=args.concurrency, tool_choice=args.tool_choice,
                                  strict=args.strict, check_stream=not args.no_stream_check, on_turn=finished.append)
    except KeyboardInterrupt:
        done = harness_summary(finished, scenarios, concurrency=args.concurrency, tool_choice=args.tool_choice,
                               strict=args.strict)
        if finished:
            print(render_summary(done))
        return interrupted("tools", Path(args.json_out) if args.json_out else None, done,
                           f"{len(finished)} turn(s)")
    print(render_summary(summary))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    return 0 if summary["parsed"] == summary["turns"] and summary["turns"] else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
