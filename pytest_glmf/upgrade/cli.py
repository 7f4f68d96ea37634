"""`glmf upgrade --lanes FILE [--lane NAME] --to SPEC [--from SPEC] [--json OUT] [--python PY]`: what a new
engine version changes for your lanes, before a GPU boots.

SPEC is an image (`lmsysorg/sglang:v0.5.23`: the preflight probe runs in a throwaway container, as
preflight does; `--from` defaults to the lane's own image or interpreter), a pinned pip requirement
(`vllm==0.34.0`, `sglang==0.5.23`: the wheel is downloaded without dependencies into
~/.cache/pytest-glmf/upgrade (GLMF_UPGRADE_CACHE, else XDG_CACHE_HOME/pytest-glmf/upgrade) and its
pure-Python files imported ahead of `--python PY`, an interpreter with a CPU torch and the engine's
dependencies, or without `--python` of a CPU base venv the command sets up there once and caches
(upgrade/base.py; upgrade/overlay.py), or `NAME==latest` (the newest release pip finds; upgrade/latest.py).

Per lane, from both versions' own parsers (launch/preflight/probe.py `--describe`): flags the lane
passes that are removed, renamed (same destination, new spelling), ambiguous, deprecated, or whose
choices changed, every problem the new parser has with the lane's command line, and the defaults
that changed behind flags the lane does not pass (a lane that sets a flag keeps its value: nothing to
say), argparse's and the ones the engine's config settles on. Where the release runs here (a pip
requirement, an interpreter), its own code judges the values argparse does not check
(upgrade/values.py: JSON flags against its config classes, quantization methods and parsers against
its registries, the env vars it reads). From the new release's source (pip specs), what this
pytest-glmf reads of it (upgrade/coverage.py): boot lines, `/metrics` names, endpoints; a gap there is
the plugin's, reported apart from the lanes with its own exit code (EXIT_CODES).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.text import WIDTH
from pytest_glmf.upgrade import values
from pytest_glmf.upgrade.base import ensure_base

BREAKING = ("problem", "removed", "renamed", "ambiguous", "deprecated")


def cache_dir() -> Path:
    if os.environ.get("GLMF_UPGRADE_CACHE"):
        return Path(os.environ["GLMF_UPGRADE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-glmf" / "upgrade"


class Side:
    """One version: where its parser runs and where its source is (None for an image)."""

    def __init__(self, spec: str, python: str | None = None, image: str | None = None):
        self.spec, self.python, self.image = spec, python, image
        self.package_parent: Path | None = None


def overlay_dir(cache: Path, name: str, version: str, base_python: str) -> Path:
    """Where a release's overlay over `base_python` is kept (reused while its python exists)."""
    # the venv's own path, not its interpreter's target: venvs made from one python differ
    base_key = hashlib.sha256(os.path.abspath(base_python).encode()).hexdigest()[:12]   # stable across runs
    return cache / f"{name}-{version}-{base_key}"


def is_requirement(spec: str) -> bool:
    """A pip requirement (any version operator; only NAME==VERSION is then accepted), not an image."""
    return any(op in spec for op in ("==", ">=", "<=", "~=", "!=", "<", ">")) and "/" not in spec and ":" not in spec


def side_for(spec: str, base_python: str | None, engine: str) -> Side:
    from pytest_glmf.upgrade.overlay import OverlayError, build, parse_requirement

    if not is_requirement(spec):
        if any(c.isspace() for c in spec) or not spec:
            raise ConfigError(f"--to/--from {spec!r}: give an image (repo:tag) or a pinned requirement (NAME==VERSION)")
        return Side(spec, image=spec)
    try:
        name, version = parse_requirement(spec)
    except OverlayError as exc:
        raise ConfigError(str(exc)) from None
    if name not in (engine, f"{engine}-cpu"):
        raise ConfigError(f"{spec}: the lanes run {engine}; give {engine}==VERSION")
    if not base_python:
        base_python = ensure_base(engine, cache_dir())
    elif not Path(base_python).exists():
        raise ConfigError(f"--python {base_python}: no such interpreter")
    dest = overlay_dir(cache_dir(), name, version, base_python)
    env = {"VLLM_TARGET_DEVICE": "cpu"} if engine == "vllm" else {}
    extra = ["orjson"] if engine == "vllm" else []
    python = dest / "bin" / "python"
    if not python.exists():
        try:
            python = build(spec, base_python, dest, cache_dir() / "wheels", extra, env)
        except (OverlayError, subprocess.CalledProcessError, OSError) as exc:
            raise ConfigError(f"{spec}: {exc}") from None
    return Side(spec, python=str(python))


def _interpreter(python: str) -> str | None:
    """The interpreter's path when it exists (a bare name: on PATH), else None."""
    if "/" not in python:
        return shutil.which(python)
    return python if os.path.exists(python) else None


def run_side(side: Side, engine: str, lanes: list[Any], argvs: list[list[str]]) -> dict[str, Any]:
    """This side's answer for the lanes: per lane the parser's (with every action), and, where the release
    runs here (a pip requirement's overlay, an interpreter), what its own code says of the lanes' values
    (upgrade/values.py) and the defaults its config settles on."""
    from pytest_glmf.launch.preflight.runner import parse_answer

    if side.image:
        from pytest_glmf.launch.preflight import argv_for
        from pytest_glmf.launch.preflight.runner import probe_in_image
        from pytest_glmf.launch.preflight.sources import entry_point

        probe_args = [engine, json.dumps(argvs), "--describe"]
        entry = entry_point(engine, argv_for(lanes[0])) if lanes[0].launcher == "docker" else None
        try:
            out, err, code = probe_in_image(lanes[0], side.image, entry[0] if entry else "python3", probe_args)
        except Exception as exc:  # noqa: BLE001 - docker's errors, the launcher's BootError: one line for the user
            raise ConfigError(f"{side.spec}: the probe could not run in the image: {exc}") from None
        answer = parse_answer(out)
        if answer is None:
            raise ConfigError(f"{side.spec}: the {engine} parser could not be built (exit {code}): {_tail(err)}")
        return {"batch": [{**answer, **one} for one in answer["batch"]], "values": None, "resolved": {},
                "version": answer.get("version"), "parser": answer.get("parser"), "package_dir": None}
    python = side.python or ""
    own = {k: v for lane in lanes if python == lane.executable for k, v in lane.env.items()}
    env = {**os.environ, **({"VLLM_TARGET_DEVICE": "cpu"} if engine == "vllm" else {}), **own}
    payload = json.dumps([{"argv": argv, "env": lane.env} for lane, argv in zip(lanes, argvs, strict=True)])
    from pytest_glmf.launch.preflight import probe as probe_module

    try:
        proc = subprocess.run([python, "-W", "ignore", "-c", Path(values.__file__).read_text(), engine,
                               probe_module.__file__, payload], capture_output=True, text=True, env=env, timeout=600)
    except OSError as exc:
        raise ConfigError(f"{side.spec}: {python} could not run: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{side.spec}: the {engine} parser took over 600 s to build in {python}") from None
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(values.MARK)), None)
    if line is None:
        raise ConfigError(f"{side.spec}: the {engine} parser could not be built (exit {proc.returncode}): "
                          f"{_tail(proc.stderr)}")
    answer = json.loads(line[len(values.MARK):])
    described = answer["probe"]
    return {"batch": [{**described, **one} for one in described["batch"]], "values": answer["lanes"],
            "resolved": answer["resolved"], "version": described.get("version"), "parser": described.get("parser"),
            "package_dir": answer["package_dir"] if is_requirement(side.spec) else None}


def _tail(err: str) -> str:
    return (err.strip().splitlines() or ["no output"])[-1][:300]


def _actions(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {flag: a for a in answer.get("actions") or [] for flag in a["flags"]}


def _spellings(tok: str) -> set[str]:
    """The flag a token sets, as the engines spell it (`--a_b=1` and `--a-b.key v` set `--a-b`; `--no-x`
    sets `--x`, vLLM's hidden `--no-enable-x` as well as argparse's)."""
    name = tok.split("=", 1)[0].split(".", 1)[0]
    name = "--" + name[2:].replace("_", "-")
    return {name, "--" + name[len("--no-"):]} if name.startswith("--no-") else {name}


def _passes(lane_flags: list[str], action: dict[str, Any] | None) -> bool:
    """Whether the lane sets the action's destination, in any spelling."""
    return action is not None and any(_spellings(tok) & set(action["flags"]) for tok in lane_flags
                                      if tok.startswith("--"))


def flag_changes(lane_flags: list[str], old: dict[str, Any], new: dict[str, Any],
                 old_resolved: dict[str, Any] | None = None,
                 new_resolved: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """What changed for the lane's flags (each once), the defaults it relies on that changed, and the new
    parser's problems. A default counts only for a lane that does not pass the flag (in either spelling):
    the default the engine's config settles on (`*_resolved`, upgrade/values.py) where there is one, else
    argparse's."""
    before, after = _actions(old), _actions(new)
    after_by_dest = {a["dest"]: a for a in new.get("actions") or []}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for tok in lane_flags:
        if not tok.startswith("--"):
            continue
        flag = tok.split("=", 1)[0]
        if flag in seen:
            continue
        seen.add(flag)
        was, now = before.get(flag), after.get(flag)
        if was is not None and now is None:
            moved = after_by_dest.get(was["dest"])
            if moved is not None:
                out.append({"flag": flag, "change": "renamed", "detail": f"now {', '.join(moved['flags'])}"})
            else:
                out.append({"flag": flag, "change": "removed", "detail": "not a flag of the new version"})
            continue
        if now is None:
            continue
        if now["deprecated"] and not (was or {}).get("deprecated"):
            out.append({"flag": flag, "change": "deprecated", "detail": now["help"][:160]})
        if was is not None and (was["choices"] or None) != (now["choices"] or None):
            gone = sorted(set(was["choices"] or []) - set(now["choices"] or []))
            added = sorted(set(now["choices"] or []) - set(was["choices"] or []))
            out.append({"flag": flag, "change": "choices changed",
                        "detail": "; ".join(x for x in (f"gone: {', '.join(gone)}" if gone else "",
                                                        f"new: {', '.join(added)}" if added else "") if x)})
    out += relied_defaults(lane_flags, old, new, old_resolved or {}, new_resolved or {})
    known = {(c["flag"], c["change"]) for c in out}
    for p in new.get("problems") or []:
        kind = "ambiguous" if p["kind"] == "ambiguous" else "problem"
        if (p["flag"], "removed") in known or (p["flag"], "renamed") in known:
            continue
        detail = (f"could be {', '.join(p['candidates'])}" if p["kind"] == "ambiguous"
                  else str(p["message"]).split("\n")[0][:200])
        out.append({"flag": p["flag"], "change": kind, "detail": detail})
    for short, full in new.get("abbreviations") or []:
        out.append({"flag": short, "change": "abbreviation", "detail": f"accepted as a prefix of {full}"})
    return out


def relied_defaults(lane_flags: list[str], old: dict[str, Any], new: dict[str, Any], old_resolved: dict[str, Any],
                    new_resolved: dict[str, Any]) -> list[dict[str, Any]]:
    """The defaults that changed behind flags the lane does not pass (it relies on them)."""
    was_by_dest = {a["dest"]: a for a in old.get("actions") or []}
    out = []
    for now in new.get("actions") or []:
        was = was_by_dest.get(now["dest"])
        if was is None or _passes(lane_flags, now) or _passes(lane_flags, was):
            continue
        dest = now["dest"]
        before, after = old_resolved.get(dest, was["default"]), new_resolved.get(dest, now["default"])
        if isinstance(before, dict) and isinstance(after, dict) and "fields" in before and "fields" in after:
            how = [f"{k} {before['fields'][k]!r} -> {after['fields'][k]!r}" for k in before["fields"]
                   if k in after["fields"] and before["fields"][k] != after["fields"][k]]
        elif before == after:
            continue
        else:
            how = [f"{was['default']!r} -> {now['default']!r} (argparse)"] if was["default"] != now["default"] else []
            if dest in old_resolved or dest in new_resolved:
                how.append(f"{before!r} -> {after!r} (the engine's config)")
        if how:
            out.append({"flag": now["flags"][0], "change": "default changed",
                        "detail": f"the lane does not pass it: {'; '.join(how)}"})
    for now in new.get("actions") or []:
        dest = now["dest"]
        if dest in was_by_dest or dest not in new_resolved or isinstance(new_resolved[dest], dict) \
                or _passes(lane_flags, now):
            continue
        out.append({"flag": now["flags"][0], "change": "new default",
                    "detail": f"a new flag the lane does not pass: {new_resolved[dest]!r} (the engine's config)"})
    return out


def value_changes(old_values: list[dict[str, Any]] | None, new_values: list[dict[str, Any]] | None,
                  from_version: str | None) -> list[dict[str, Any]]:
    """The new release's findings on the lane's values (upgrade/values.py); an env var neither version
    reads is no upgrade's doing: kept, not a break."""
    if new_values is None:
        return [{"flag": "-", "change": "values not checked", "detail": "JSON flags, registries and env vars are "
                 "checked where the release runs here (a pip requirement or an interpreter), not in an image"}]
    before = {(f["flag"], f["change"]) for f in old_values or []}
    out = []
    for f in new_values:
        finding = {"flag": f["flag"], "change": f["change"], "detail": f["detail"]}
        if f["change"] == "env var not read" and (f["flag"], f["change"]) in before:
            finding["detail"] += f" (nor did {from_version})"
        elif f["breaks"]:
            finding["breaks"] = True
        out.append(finding)
    return out


def breaks(change: dict[str, Any]) -> bool:
    return bool(change.get("breaks")) or change["change"] in BREAKING


def render(report: list[dict[str, Any]], plugin: list[dict[str, Any]]) -> str:
    rows = [("lane", "what", "change", "detail")]
    for lane in report:
        if not lane["changes"]:
            rows.append((lane["lane"], "-", "no change", f"{lane['from']} -> {lane['to']}"))
        rows += [(lane["lane"], c["flag"], c["change"] + (" (breaks)" if breaks(c) else ""), c["detail"])
                 for c in lane["changes"]]
    widths = [min(max(len(str(r[i])) for r in rows), 40) for i in range(3)]
    indent = sum(widths) + 2 * len(widths)
    lines = []
    for r in rows:
        head = "  ".join(str(v).ljust(w) for v, w in zip(r[:3], widths, strict=True)) + "  "
        detail = textwrap.wrap(str(r[3]), max(WIDTH - indent, 40), break_on_hyphens=False) or [""]
        lines.append(head + detail[0])
        lines += [" " * indent + more for more in detail[1:]]
    gaps = [g for side in plugin for g in side["gaps"]]
    if gaps:
        lines += ["", "the plugin, not the lanes (pytest-glmf needs an update; the lanes boot):"]
        for g in gaps:
            lines += textwrap.wrap(f"{g['message']} ({g['detail']})", WIDTH, initial_indent="  ",
                                   subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines)


EXIT_CODES = """exit codes:
  0  no lane would break and pytest-glmf reads the target release
  1  a lane would break (a flag, value or env var the target refuses or no longer reads)
  2  bad input: a lanes file, spec, lane or interpreter that cannot be used (one line on stderr)
  3  no lane would break, but pytest-glmf does not read the target release fully yet (boot lines,
     metrics, endpoints): upgrade pytest-glmf first, or know which numbers it may read wrong"""


def lane_side(lane: Any) -> Side:
    """A process lane's own interpreter as the `--from` side; one that does not exist is bad input."""
    found = _interpreter(lane.executable)
    if found is None:
        raise ConfigError(f"{lane.source}: lane {lane.name!r}: its interpreter {lane.executable} does not exist; "
                          "fix `executable:` or give --from vllm==VERSION / sglang==VERSION")
    return Side(lane.executable, python=lane.executable)


def cli(argv: list[str] | None = None) -> int:
    from pytest_glmf.config.lanes import load_lanes
    from pytest_glmf.launch.preflight import argv_for
    from pytest_glmf.launch.preflight.sources import entry_point
    from pytest_glmf.upgrade.coverage import gaps
    from pytest_glmf.upgrade.latest import is_latest, resolve_latest

    ap = argparse.ArgumentParser(prog="glmf upgrade", description=__doc__.split("\n\n")[0], epilog=EXIT_CODES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lanes", required=True, metavar="FILE", help="the lanes file")
    ap.add_argument("--lane", metavar="NAME", help="one lane (default: every docker/process lane of the file)")
    ap.add_argument("--to", required=True, metavar="SPEC", help="an image, a pinned requirement (vllm==0.34.0) "
                                                                "or NAME==latest (the newest release on the index)")
    ap.add_argument("--from", dest="from_", metavar="SPEC", help="default: the lane's image or interpreter")
    ap.add_argument("--json", metavar="OUT", help="write the report as JSON")
    ap.add_argument("--python", metavar="PY", help="the interpreter pip requirements are imported ahead of "
                                                   "(default: a CPU base venv set up once under the cache)")
    args = ap.parse_args(argv)
    try:
        to_spec = resolve_latest(args.to) if is_latest(args.to) else args.to
        from_spec_all = resolve_latest(args.from_) if args.from_ and is_latest(args.from_) else args.from_
        lanes = load_lanes(args.lanes)
        if args.lane and args.lane not in lanes:
            raise ConfigError(f"{args.lanes}: no lane {args.lane!r}; lanes: {', '.join(lanes)}")
        chosen = [lanes[args.lane]] if args.lane else [ln for ln in lanes.values()
                                                        if ln.launcher in ("docker", "process") and not ln.command]
        if not chosen:
            raise ConfigError(f"{args.lanes}: no lane runs an engine command line (docker or process lanes)")
        groups: dict[tuple[str, str, str], list[tuple[Any, list[str]]]] = {}   # (from, to, engine) -> lanes
        sides: dict[str, Side] = {}
        for lane in chosen:
            entry = entry_point(lane.engine, argv_for(lane))
            if entry is None:
                raise ConfigError(f"{lane.source}: lane {lane.name!r}: its command line starts no {lane.engine} entry "
                                  "point")
            from_spec = from_spec_all or (lane.image if lane.launcher == "docker" else None)
            if from_spec is None:
                if lane.executable not in sides:
                    sides[lane.executable] = lane_side(lane)
                from_key = lane.executable
            else:
                from_key = from_spec
                if from_spec not in sides:
                    sides[from_spec] = side_for(from_spec, args.python, lane.engine)
            if to_spec not in sides:
                sides[to_spec] = side_for(to_spec, args.python, lane.engine)
            groups.setdefault((from_key, to_spec, lane.engine), []).append((lane, entry[1]))
        report: list[dict[str, Any]] = []
        plugin: list[dict[str, Any]] = []
        for (from_key, to_key, engine), members in groups.items():
            lanes_here, argvs = [m[0] for m in members], [m[1] for m in members]
            old = run_side(sides[from_key], engine, lanes_here, argvs)
            new = run_side(sides[to_key], engine, lanes_here, argvs)
            if new["package_dir"] is None:
                source = [{"flag": "-", "change": "source not read",
                           "detail": "only a pip requirement's files are read here; give one to check what "
                                     "pytest-glmf reads of the release (boot lines, metrics, endpoints)"}]
            else:
                source = []
                if not any(p["engine"] == engine and p["to"] == sides[to_key].spec for p in plugin):
                    plugin.append({"engine": engine, "to": sides[to_key].spec, "version": new["version"],
                                   "gaps": gaps(engine, new["version"], new["package_dir"])})
            for i, (lane, lane_flags) in enumerate(members):
                changes = flag_changes(lane_flags, old["batch"][i], new["batch"][i], old["resolved"], new["resolved"])
                changes += value_changes(old["values"][i] if old["values"] is not None else None,
                                         new["values"][i] if new["values"] is not None else None, old["version"])
                changes += source
                report.append({"lane": lane.name, "engine": lane.engine,
                               "from": f"{old['version']} ({sides[from_key].spec})",
                               "to": f"{new['version']} ({sides[to_key].spec})", "parser": new["parser"],
                               "changes": changes, "breaks": any(breaks(c) for c in changes)})
    except ConfigError as exc:
        print(f"glmf upgrade: {exc}", file=sys.stderr)
        return 2
    print(render(report, plugin))
    if args.json:
        Path(args.json).write_text(json.dumps({"lanes": report, "plugin": plugin}, indent=1))
    broken = [r["lane"] for r in report if r["breaks"]]
    n_gaps = sum(len(p["gaps"]) for p in plugin)
    print(f"\n{len(broken)} of {len(report)} lane(s) would break" + (f": {', '.join(broken)}" if broken else "")
          + (f"; pytest-glmf has {n_gaps} gap(s) on {', '.join(p['to'] for p in plugin if p['gaps'])}"
             if n_gaps else ""))
    return 1 if broken else 3 if n_gaps else 0


if __name__ == "__main__":
    sys.exit(cli())
