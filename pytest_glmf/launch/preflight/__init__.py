"""Preflight: a lane's command line checked by the engine's own parser before the server starts.

A 30-minute boot that dies on `error: ambiguous option` is found out in seconds instead: the
launcher hands the lane here first, and unknown, ambiguous or ill-typed flags fail with one line
naming the flag, the lane key that produced it and the closest real flags.

Where the parser runs (`probe.py`, stdlib only, builds the parser the way the engine's own entry
point does):
- docker lanes: in the lane's image, with the interpreter the command line names
  (`python3 -m sglang.launch_server ...`), the lane's volumes and environment, no network, no GPU,
  removed afterwards (`docker run --rm` through the SDK);
- process lanes: the interpreter the command line names, on this machine;
- other lanes (sim, attach) and command lines that do not start a known entry point are not checked.

Verdicts are cached per engine environment (image id, or interpreter path + file stamp + engine
version), probe version and flags under ~/.cache/pytest-glmf/preflight (GLMF_PREFLIGHT_CACHE).
GLMF_PREFLIGHT=off skips preflight; a probe that cannot run at all (no Python in the image, the
engine not importable) does not block the boot: the server's own start decides, and the result
records why preflight did not run.
"""
from __future__ import annotations

import difflib
import os
from typing import TYPE_CHECKING, Any

from pytest_glmf.config.lanes import build_server_argv
from pytest_glmf.launch.base import BootError
from pytest_glmf.launch.docker.spec import server_argv
from pytest_glmf.launch.preflight import runner
from pytest_glmf.launch.preflight.result import Preflight
from pytest_glmf.launch.preflight.sources import entry_point, flag_sources

__all__ = ["Preflight", "PreflightError", "argv_for", "check", "problem_line", "run_preflight"]

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}


class PreflightError(BootError):
    """The engine's own parser rejects the lane's command line."""


def enabled() -> bool:
    return os.environ.get("GLMF_PREFLIGHT", "on").strip().lower() not in ("0", "off", "no", "false")


def run_preflight(lane: "LaneConfig", argv: list[str]) -> Preflight:
    """The engine's verdict on `argv` (the command the launcher is about to run) for this lane."""
    if not enabled():
        return Preflight("not run", why="GLMF_PREFLIGHT=off")
    entry = entry_point(lane.engine, argv)
    if entry is None:
        return Preflight("not run", why="the command line does not start a known engine entry point")
    interpreter, flags = entry
    if lane.launcher == "docker":
        return runner.in_image(lane, interpreter, flags)
    if lane.launcher == "process":
        return runner.with_executable(lane, interpreter, flags)
    return Preflight("not run", why=f"launcher {lane.launcher} runs no engine command line")


def problem_line(lane: "LaneConfig", result: Preflight, argv: list[str]) -> str:
    """The one line a user reads: the first problem, its lane key and the closest real flags."""
    sources = flag_sources(lane, argv)
    engine = f"{ENGINE_NAMES.get(result.engine or '', result.engine)} {result.version or '(version unknown)'}"

    def one(p: dict[str, Any]) -> str:
        flag = str(p["flag"])
        key = sources.get(flag) or sources.get(flag.replace("_", "-")) or "the command line"
        if p["kind"] == "ambiguous":
            what = f"is ambiguous, it could be {', '.join(p['candidates'])}"
        elif p["kind"] == "unknown":
            close = difflib.get_close_matches(flag, result.options, n=3, cutoff=0.8)
            what = "is not a flag" + (f"; closest: {', '.join(close)}" if close else "")
        elif p["kind"] == "missing_required":
            return f"{flag} is required and missing"
        else:
            what = "is rejected: " + str(p["message"]).split(": ", 1)[-1]
        return f"{flag} (lane key {key}) {what}"

    first, rest = result.problems[0], result.problems[1:]
    more = f"; and {len(rest)} more: " + "; ".join(one(p) for p in rest) if rest else ""
    return (f"preflight: lane {lane.name!r} ({lane.source}): {engine} ({result.where}) rejects the command line: "
            f"{one(first)}{more}")


def argv_for(lane: "LaneConfig") -> list[str]:
    """The command line the lane's launcher would run (docker: inside the container)."""
    if lane.launcher == "docker":
        return server_argv(lane)[0]

    return build_server_argv(lane)


def check(lane: "LaneConfig", argv: list[str]) -> Preflight:
    """Raise PreflightError with the one line when the engine rejects argv; else the verdict."""
    result = run_preflight(lane, argv)
    if result.status == "rejected":
        raise PreflightError(problem_line(lane, result, argv))
    return result
