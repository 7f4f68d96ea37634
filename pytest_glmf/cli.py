"""The `glmf` command: `glmf <sub> ...` dispatches to `cli(argv) -> int` in the module that owns
the subcommand, so the command line runs the same code as the suites."""
from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_glmf.gates.registry import gate_commands
from pytest_glmf.gates.spec import MEASURE_GROUP

# subcommand -> (module with `cli(argv) -> int`, one-line help): the gates' own (each declares its
# command in its spec.py: `GateSpec.command`), then the commands that belong to no gate
GATE_COMMANDS = gate_commands()
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "sim": ("pytest_glmf.sim.__main__", "run the built-in SGLang-compatible simulator"),
    **{name: (module, command.help) for name, (command, module) in GATE_COMMANDS.items()},
    "report": ("pytest_glmf.results.report", "render a result file: tables, Markdown, a PNG, one HTML page (--html)"),
    "compare": ("pytest_glmf.compare.cli", "compare lanes' result files: the recipe's tables, the crossover"),
    "history": ("pytest_glmf.results.history.cli", "stored runs per lane, metric trends, CSV export, re-import"),
    "lanes": ("pytest_glmf.cli", "list lanes and the engine command line each one runs"),
    "thresholds": ("pytest_glmf.cli", "validate a thresholds file"),
    "upgrade": ("pytest_glmf.upgrade.cli", "what a new engine version (image or vllm==X) changes for your lanes, "
                                           "before a GPU boots"),
    "init": ("pytest_glmf.starter", "write the example lanes, test file, CI workflows and thresholds into a directory"),
}


# `glmf --help` shows the commands by what they are for (every subcommand in exactly one group):
# each group's own commands, then the gates' commands declared in it (`GateCommand.group`)
_OWN_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (MEASURE_GROUP, ()),
    ("results", ("report", "compare", "history")),
    ("lanes and configuration", ("init", "lanes", "thresholds")),
    ("engines", ("upgrade", "sim")),
)
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (title, (*own, *(name for name, (command, _) in GATE_COMMANDS.items() if command.group == title)))
    for title, own in _OWN_GROUPS)


# Ctrl-C in a command: one line (never a traceback), exit 130 like a shell; a long command's finished
# work goes to its --json, marked as a pytest session's result file is (`incomplete` says why).
INTERRUPTED = "interrupted (Ctrl-C / SIGINT) before the end"
INTERRUPTED_EXIT = 130


def interrupted(command: str, json_path: Path | None = None, doc: dict[str, Any] | None = None,
                finished: str = "") -> int:
    """A long command's answer to KeyboardInterrupt: what finished (`doc`, described by `finished`,
    e.g. "2 of 4 rows") written to `json_path` with `incomplete`, and one line on stderr saying so."""
    line = f"glmf {command}: {INTERRUPTED}"
    if json_path is not None and doc is not None:
        json_path.write_text(json.dumps({**doc, "incomplete": [INTERRUPTED]}, indent=1, default=str))
        line += f"; {finished or 'what finished'} written to {json_path}, marked incomplete"
    elif finished:
        line += f"; {finished} finished (--json FILE keeps them)"
    print(line, file=sys.stderr, flush=True)
    return INTERRUPTED_EXIT


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: glmf <command> [args...]"]
    for title, names in GROUPS:
        lines += ["", f"{title}:"]
        lines += [f"  {name.ljust(width)}  {SUBCOMMANDS[name][1]}" for name in names]
    lines += ["", "`glmf <command> --help` shows a command's options. The test suites run with "
              "`pytest --glmf-lane NAME`."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:   # a usage error, as argparse's: the help on stderr, exit 2
        print(f"glmf: a command is required\n\n{usage()}", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    sub, rest = argv[0], argv[1:]
    if sub in ("--version", "-V"):
        from pytest_glmf import __version__

        print(f"glmf {__version__}")
        return 0
    if sub not in SUBCOMMANDS:
        print(f"glmf: unknown command {sub!r}\n\n{usage()}", file=sys.stderr)
        return 2
    if sub == "lanes":
        return lanes_cli(rest)
    if sub == "thresholds":
        return thresholds_cli(rest)
    module_name = SUBCOMMANDS[sub][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            print(f"glmf {sub}: not available in this build ({module_name} is missing)", file=sys.stderr)
            return 2
        raise
    func = getattr(module, "cli", None)
    if func is None:
        print(f"glmf {sub}: not available in this build ({module_name}.cli is missing)", file=sys.stderr)
        return 2
    try:
        result = func(rest)
    except KeyboardInterrupt:   # a command without finished work to keep: the one line
        return interrupted(sub)
    return int(result or 0)


def _load_config(sub: str, load: Callable[[str | None], Any], path: str | None) -> Any | None:
    """`load(path)`, or None after one line on stderr: a file the user got wrong is not a traceback."""
    from pytest_glmf.config.yamlfile import ConfigError

    try:
        return load(path)
    except ConfigError as exc:
        print(f"glmf {sub}: {exc}", file=sys.stderr)
        return None


def lanes_cli(argv: list[str]) -> int:
    from pytest_glmf.config.lanes import build_server_argv, load_lanes

    parser = argparse.ArgumentParser(prog="glmf lanes", description=SUBCOMMANDS["lanes"][1])
    parser.add_argument("--lanes", metavar="FILE", help="lanes file (default: the built-in lanes)")
    parser.add_argument("--lane", metavar="NAME", help="check this lane as `pytest --glmf-lane NAME` would "
                                                       "(its launcher's needs, its model paths) and print only it")
    parser.add_argument("--thresholds", metavar="FILE", help="with --lane: the thresholds file must have a section "
                                                             "for it (a session of a lane without one fails)")
    parser.add_argument("--json", action="store_true", help="print the lanes as JSON")
    args = parser.parse_args(argv)
    lanes = _load_config("lanes", load_lanes, args.lanes)
    if lanes is None:
        return 2
    if args.lane is not None:
        known = lanes
        lanes = _load_config("lanes", lambda _: {args.lane: _selected_lane(known, args)}, None)
        if lanes is None:
            return 2
    if args.json:
        print(json.dumps({name: {**lane.to_dict(), "argv": build_server_argv(lane)}
                          for name, lane in lanes.items()}, indent=2))
        return 0
    from dataclasses import replace

    from pytest_glmf.launch.sim import sim_argv

    for name, lane in lanes.items():
        # process and sim lanes without a port get a free one at launch: PORT stands for it
        free = lane.port is None and lane.launcher in ("process", "sim")
        shown = replace(lane, port=FREE_PORT) if free else lane
        argv = sim_argv(shown) if lane.launcher == "sim" else build_server_argv(shown)
        target = lane.url if lane.launcher == "attach" else shlex.join(argv)
        origin = f"; {lane.origin}" if lane.origin else ""
        print(f"{name} ({lane.engine}, launcher {lane.launcher}, from {lane.source}{origin}):\n  {target}")
        if free:
            print("  (PORT: a free port, chosen at launch; set port: in the lane to fix one)")
        elif lane.launcher == "docker" and lane.port is None:
            print("  (in the container; published on a free host port of 127.0.0.1, chosen at launch)")
    return 0


FREE_PORT = "PORT"     # shown in place of a port chosen at launch (build_server_argv writes str(lane.port))


def _selected_lane(lanes: dict[str, Any], args: argparse.Namespace) -> Any:
    """The lane as pytest selects it (same checks, same errors), and with --thresholds its section there."""
    from pytest_glmf.config.lanes import apply_overrides, check_local_volumes, select_lane
    from pytest_glmf.config.thresholds import load_thresholds
    from pytest_glmf.plugin.verified import refuse_ungated_lane

    lane = select_lane(lanes, args.lane, args.lanes or "the built-in lanes")
    lane = apply_overrides(lane)
    check_local_volumes(lane)
    if args.thresholds is not None:
        refuse_ungated_lane(lane.name, load_thresholds(args.thresholds), args.thresholds)
    return lane


def thresholds_cli(argv: list[str]) -> int:
    from pytest_glmf.config.thresholds import load_thresholds

    parser = argparse.ArgumentParser(prog="glmf thresholds", description=SUBCOMMANDS["thresholds"][1])
    parser.add_argument("file", nargs="?", help="thresholds file (default: the one shipped with pytest-glmf)")
    args = parser.parse_args(argv)
    thresholds = _load_config("thresholds", load_thresholds, args.file)
    if thresholds is None:
        return 2
    for lane, gates in thresholds.lanes.items():
        print(f"{lane}: {', '.join(gates) or '(no gates)'}")
    print(f"{thresholds.path}: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
