"""`glmf tools`: the tool-call gate from a shell, through `measure_tools` (the API the suite uses)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_glmf.cli import interrupted
from pytest_glmf.gates.flags import SettingFlags
from pytest_glmf.gates.tools.api import ToolsResult, measure_tools
from pytest_glmf.gates.tools.spec import ToolsSettings
from pytest_glmf.results.gatejson import command_document, write_document

# The tool gate's settings (spec.py) as flags of their names (gates/flags.py).
FLAGS = SettingFlags(ToolsSettings, help={"concurrency": "turns in flight at once (default here: 1; the suite's: "
                                                         "the largest curve row's users, else 8)"})


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="glmf tools", description="Tool-call gate: parsed turns, leaks, schema-valid arguments.")
    ap.add_argument("--url", required=True, help="server base URL")
    ap.add_argument("--scenarios", help="YAML file of scenarios (default: the packaged set)")
    ap.add_argument("--no-stream-check", action="store_true", help="skip the streamed request of each turn")
    ap.add_argument("--json", dest="json_out", help="write the result JSON here")
    FLAGS.add(ap, "the tool gate's settings (gates/tools/spec.py)")
    args = ap.parse_args(argv)
    settings: ToolsSettings = FLAGS.settings(ap, args)
    so_far: list[ToolsResult] = []      # the result of the turns done, after each one
    try:
        result = measure_tools(args.url, args.scenarios, concurrency=settings.concurrency or 1,
                               tool_choice=settings.tool_choice, strict=settings.strict,
                               check_stream=not args.no_stream_check, max_tokens=settings.max_tokens,
                               on_turn=so_far.append)
    except KeyboardInterrupt:
        if so_far:
            print(so_far[-1].table())
        return interrupted("tools", Path(args.json_out) if args.json_out else None,
                           document(args.url, so_far[-1] if so_far else None),
                           f"{so_far[-1].turns if so_far else 0} turn(s)")
    print(result.table())
    code = 0 if result.parsed == result.turns and result.turns else 1
    if args.json_out:
        write_document(args.json_out, document(args.url, result, code))
    return code


def document(url: str, result: ToolsResult | None, code: int | None = None) -> dict[str, Any]:
    """The result document (results/gatejson.py): the summary as the suite records it, keyed
    `users=CONCURRENCY` as the suite's key ends."""
    entries = {f"users={result.concurrency}": result.summary()} if result else {}
    return command_document("tools", {"tools": entries}, url=url, exitstatus=code)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
