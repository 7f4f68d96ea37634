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
- sim lanes, and process lanes whose command runs the simulator (`python -m pytest_glmf.sim`,
  `glmf sim`): the simulator's own parser, in this process (a typo there used to end as the 40th
  line of an argparse usage dump, once per test);
- attach lanes and command lines that do not start a known entry point are not checked.

Verdicts are cached per engine environment (image id, or interpreter path + file stamp + engine
version), probe version and flags under ~/.cache/pytest-glmf/preflight (GLMF_PREFLIGHT_CACHE).
GLMF_PREFLIGHT=off (or the lane key `preflight: off`) skips preflight. A probe that cannot run at
all (no Python in the image, the engine not importable, a parser the probe cannot find) is loud: a
line in the session header (`not_run_line`), `provenance.preflight` in the result file with the
reason; under the lane key `preflight: required` the boot fails with that line, so every test of the
lane fails; under the default `auto` the server's own start decides. One verdict per lane and
command line per process: the header's check and the boot's are the same run.
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
from pytest_glmf.launch.sim import sim_argv

__all__ = ["Preflight", "PreflightError", "argv_for", "check", "header_line", "not_run_line", "problem_line", "run_preflight"]

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "sim": "glmf sim"}
SIM_MODULE = "pytest_glmf.sim"


class PreflightError(BootError):
    """The engine's own parser rejects the lane's command line."""


def enabled() -> bool:
    return os.environ.get("GLMF_PREFLIGHT", "on").strip().lower() not in ("0", "off", "no", "false")


_NOT_RUN: dict[str, Preflight] = {}


def run_preflight(lane: "LaneConfig", argv: list[str]) -> Preflight:
    """The engine's verdict on `argv` (the command the launcher is about to run) for this lane.
    runner.py caches ok/rejected verdicts on disk; a probe that could not run is tried once per
    process (the header's check and the boot's), not twice at its timeout."""
    if not enabled():
        return Preflight("not run", why="GLMF_PREFLIGHT=off")
    if lane.preflight == "off":
        return Preflight("not run", why="the lane sets preflight: off")
    key = repr((str(runner.cache_dir()), lane.name, lane.source, lane.launcher, lane.image, lane.executable,
                sorted(lane.env.items()), sorted(lane.volumes.items()), argv))
    if key in _NOT_RUN:
        return _NOT_RUN[key]
    result = _run(lane, argv)
    if result.status == "not run":
        _NOT_RUN[key] = result
    return result


def _run(lane: "LaneConfig", argv: list[str]) -> Preflight:
    sim = simulator_flags(argv)
    if sim is not None:
        return runner.in_simulator(sim)
    entry = entry_point(lane.engine, argv)
    if entry is None:
        return Preflight("not run", why="the command line does not start a known engine entry point")
    interpreter, flags = entry
    if lane.launcher == "docker":
        return runner.in_image(lane, interpreter, flags)
    if lane.launcher == "process":
        return runner.with_executable(lane, interpreter, flags)
    return Preflight("not run", why=f"launcher {lane.launcher} runs no engine command line")


def simulator_flags(argv: list[str]) -> list[str] | None:
    """The simulator's flags when argv runs the built-in simulator, else None."""
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] == SIM_MODULE:
        return list(argv[3:])
    if len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == "glmf" and argv[1] == "sim":
        return list(argv[2:])
    return None


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


def not_run_line(lane: "LaneConfig", result: Preflight) -> str:
    """The loud line of a preflight that did not run (the session header, the boot error when required)."""
    what = ("the lane requires it (preflight: required)" if lane.preflight == "required"
            else "the boot goes ahead unchecked (set preflight: required to fail instead)")
    return (f"preflight NOT RUN for lane {lane.name!r} ({lane.source}, {result.where or lane.launcher}): "
            f"{result.why}; {what}")


def header_line(lane: "LaneConfig") -> str | None:
    """The session header's preflight line for a lane that runs an engine command line (None for
    sim and attach lanes, and when preflight is switched off)."""
    if lane.launcher not in ("docker", "process") or not enabled() or lane.preflight == "off":
        return None
    try:
        argv = argv_for(lane)
        result = run_preflight(lane, argv)
    except Exception as exc:  # noqa: BLE001 - the header never breaks the session; the boot says it again
        return f"glmf: preflight NOT RUN for lane {lane.name!r}: {type(exc).__name__}: {exc}"
    if result.status == "not run":
        return "glmf: " + not_run_line(lane, result)
    engine = f"{ENGINE_NAMES.get(result.engine or '', result.engine)} {result.version or '(version unknown)'}"
    if result.status == "rejected":
        return f"glmf: preflight REJECTED lane {lane.name!r}: {engine} ({result.where}): {len(result.problems)} problem(s)"
    return f"glmf: preflight ok for lane {lane.name!r}: {engine} ({result.where}{', cached' if result.cached else ''})"


def argv_for(lane: "LaneConfig") -> list[str]:
    """The command line the lane's launcher would run (docker: inside the container)."""
    if lane.launcher == "docker":
        return server_argv(lane)[0]
    if lane.launcher == "sim":
        return sim_argv(lane)

    return build_server_argv(lane)


def check(lane: "LaneConfig", argv: list[str]) -> Preflight:
    """Raise PreflightError with the one line when the engine rejects argv, or when it could not run
    and the lane requires it; else the verdict."""
    result = run_preflight(lane, argv)
    if result.status == "rejected":
        raise PreflightError(problem_line(lane, result, argv))
    if result.status == "not run" and lane.preflight == "required":
        raise PreflightError(not_run_line(lane, result))
    return result
