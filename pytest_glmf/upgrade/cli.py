"""`glmf upgrade --lanes FILE [--lane NAME] --to SPEC [--from SPEC] [--json OUT] [--python PY]`: what a new
engine version changes for your lanes, before a GPU boots.

SPEC is an image (`lmsysorg/sglang:v0.5.23`: the preflight probe runs in a throwaway container, as
preflight does; `--from` defaults to the lane's own image or interpreter) or a pinned pip
requirement (`vllm==0.33.0`, `sglang==0.5.23`: the wheel is downloaded without dependencies into
~/.cache/pytest-glmf/upgrade (GLMF_UPGRADE_CACHE, else XDG_CACHE_HOME/pytest-glmf/upgrade) and its
pure-Python files imported ahead of `--python PY`, an interpreter with a CPU torch and the engine's
dependencies, or without `--python` of a CPU base venv the command sets up there once and caches
(upgrade/base.py; upgrade/overlay.py).

Per lane, from both versions' own parsers (launch/preflight/probe.py `--describe`): flags the lane
passes that are removed, renamed (same destination, new spelling), ambiguous, deprecated, or whose
choices or default changed, and every problem the new parser has with the lane's command line.
From the new release's source (pip specs: its files are here; images: not read): boot-log formats
the boot gate reads that vanished or moved, `/metrics` names the gates read that vanished,
endpoints the gates call that vanished. Exit 1 when a lane would break (a parse problem, a removed
or deprecated flag, a vanished boot format, metric or endpoint), 0 when not, 2 on bad input.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.upgrade.base import ensure_base

BREAKING = ("problem", "removed", "renamed", "ambiguous", "deprecated", "boot format vanished",
            "metric vanished", "endpoint vanished")


def cache_dir() -> Path:
    if os.environ.get("GLMF_UPGRADE_CACHE"):
        return Path(os.environ["GLMF_UPGRADE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-glmf" / "upgrade"


class Side:
    """One version: where its parser runs and where its source is (None for an image)."""

    def __init__(self, spec: str, python: str | None = None, image: str | None = None):
        self.spec, self.python, self.image = spec, python, image
        self.package_parent: Path | None = None


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
    # the venv's own path, not its interpreter's target: venvs made from one python differ
    base_key = hashlib.sha256(os.path.abspath(base_python).encode()).hexdigest()[:12]   # stable across runs
    dest = cache_dir() / f"{name}-{version}-{base_key}"
    env = {"VLLM_TARGET_DEVICE": "cpu"} if engine == "vllm" else {}
    extra = ["orjson"] if engine == "vllm" else []
    python = dest / "bin" / "python"
    if not python.exists():
        try:
            python = build(spec, base_python, dest, cache_dir() / "wheels", extra, env)
        except (OverlayError, subprocess.CalledProcessError, OSError) as exc:
            raise ConfigError(f"{spec}: {exc}") from None
    return Side(spec, python=str(python))


def describe(side: Side, engine: str, lanes: list[Any], argvs: list[list[str]]) -> list[dict[str, Any]]:
    """The probe's answer (with every action) for each lane's flags, from one build of this side's parser."""
    from pytest_glmf.launch.preflight.runner import PROBE_SOURCE, parse_answer

    probe_args = [engine, json.dumps(argvs), "--describe"]
    if side.image:
        from pytest_glmf.launch.preflight import argv_for
        from pytest_glmf.launch.preflight.runner import probe_in_image
        from pytest_glmf.launch.preflight.sources import entry_point

        entry = entry_point(engine, argv_for(lanes[0])) if lanes[0].launcher == "docker" else None
        try:
            out, err, code = probe_in_image(lanes[0], side.image, entry[0] if entry else "python3", probe_args)
        except Exception as exc:  # noqa: BLE001 - docker's errors, the launcher's BootError: one line for the user
            raise ConfigError(f"{side.spec}: the probe could not run in the image: {exc}") from None
    else:
        own = {k: v for lane in lanes if side.python == lane.executable for k, v in lane.env.items()}
        env = {**os.environ, **({"VLLM_TARGET_DEVICE": "cpu"} if engine == "vllm" else {}), **own}
        proc = subprocess.run([side.python or "", "-W", "ignore", "-c", PROBE_SOURCE, *probe_args],
                              capture_output=True, text=True, env=env, timeout=600)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    answer = parse_answer(out)
    if answer is None:
        tail = (err.strip().splitlines() or ["no output"])[-1][:300]
        raise ConfigError(f"{side.spec}: the {engine} parser could not be built (exit {code}): {tail}")
    package_dir = _package_dir(side, engine)
    return [{**answer, **one, "package_dir": package_dir, "image": side.image} for one in answer["batch"]]


def _package_dir(side: Side, engine: str) -> str | None:
    """The new release's package directory, for pip specs (built here); None for images and the lane's own."""
    if not side.python or not is_requirement(side.spec):
        return None
    out = subprocess.run([side.python, "-c", f"import importlib.util as u; print(u.find_spec({engine!r}).origin)"],
                         capture_output=True, text=True, env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"})
    return str(Path(out.stdout.strip()).parent) if out.returncode == 0 and out.stdout.strip() else None


def _actions(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {flag: a for a in answer.get("actions") or [] for flag in a["flags"]}


def flag_changes(lane_flags: list[str], old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """What changed for the flags the lane passes (each once), and the new parser's problems."""
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
        if was is not None and was["default"] != now["default"]:
            out.append({"flag": flag, "change": "default changed", "detail": f"{was['default']!r} -> {now['default']!r}"})
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


def source_changes(engine: str, package_dir: str | None) -> list[dict[str, Any]]:
    """Boot formats, metric names and endpoints the gates use, against the new release's source."""
    from pytest_glmf.upgrade.surface import ENDPOINTS, boot_formats, metric_names, source_has, source_mentions

    if package_dir is None:
        return [{"flag": "-", "change": "source not read", "detail": "only a pip requirement's files are read here; "
                                                                     "give one to check boot formats and metrics"}]
    parent = Path(package_dir).parent
    out = []
    for name, source, skeleton in boot_formats(engine):
        where = source_has(parent, source, skeleton)
        if where is None:
            out.append({"flag": name, "change": "boot format vanished", "detail": f"{source}: {skeleton[:90]!r}"})
        elif where != source:
            out.append({"flag": name, "change": "boot format moved", "detail": f"{source} -> {where}"})
    metrics = metric_names(engine)
    stems = {m: m[: -len("_total")] if m.endswith("_total") else m for m in metrics}
    seen = source_mentions(parent, engine, sorted({*metrics, *stems.values()}))
    out += [{"flag": m, "change": "metric vanished", "detail": "no such name in the new release's source"}
            for m in metrics if not (seen.get(m) or seen.get(stems[m]))]
    paths = source_mentions(parent, engine, list(ENDPOINTS[engine]))
    out += [{"flag": p, "change": "endpoint vanished", "detail": "no route with that path in the new release"}
            for p, ok in paths.items() if not ok]
    return out


def render(report: list[dict[str, Any]]) -> str:
    rows = [("lane", "what", "change", "detail")]
    for lane in report:
        if not lane["changes"]:
            rows.append((lane["lane"], "-", "no change", f"{lane['from']} -> {lane['to']}"))
        rows += [(lane["lane"], c["flag"], c["change"] + (" (breaks)" if c["change"] in BREAKING else ""), c["detail"])
                 for c in lane["changes"]]
    widths = [min(max(len(str(r[i])) for r in rows), 40) for i in range(3)]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r[:3], widths, strict=True)) + "  " + str(r[3])
                     for r in rows)


def cli(argv: list[str] | None = None) -> int:
    from pytest_glmf.config.lanes import load_lanes
    from pytest_glmf.launch.preflight import argv_for
    from pytest_glmf.launch.preflight.sources import entry_point

    ap = argparse.ArgumentParser(prog="glmf upgrade", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", required=True, metavar="FILE", help="the lanes file")
    ap.add_argument("--lane", metavar="NAME", help="one lane (default: every docker/process lane of the file)")
    ap.add_argument("--to", required=True, metavar="SPEC", help="an image or a pinned requirement (vllm==0.33.0)")
    ap.add_argument("--from", dest="from_", metavar="SPEC", help="default: the lane's image or interpreter")
    ap.add_argument("--json", metavar="OUT", help="write the report as JSON")
    ap.add_argument("--python", metavar="PY", help="the interpreter pip requirements are imported ahead of "
                                                   "(default: a CPU base venv set up once under the cache)")
    args = ap.parse_args(argv)
    try:
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
            from_spec = args.from_ or (lane.image if lane.launcher == "docker" else None)
            if from_spec is None:
                sides.setdefault(lane.executable, Side(lane.executable, python=lane.executable))
                from_key = lane.executable
            else:
                from_key = from_spec
                if from_spec not in sides:
                    sides[from_spec] = side_for(from_spec, args.python, lane.engine)
            if args.to not in sides:
                sides[args.to] = side_for(args.to, args.python, lane.engine)
            groups.setdefault((from_key, args.to, lane.engine), []).append((lane, entry[1]))
        report = []
        for (from_key, to_key, engine), members in groups.items():
            lanes_here, argvs = [m[0] for m in members], [m[1] for m in members]
            olds = describe(sides[from_key], engine, lanes_here, argvs)
            news = describe(sides[to_key], engine, lanes_here, argvs)
            source = source_changes(engine, news[0].get("package_dir"))
            for lane, lane_flags, old, new in zip(lanes_here, argvs, olds, news, strict=True):
                changes = flag_changes(lane_flags, old, new) + source
                report.append({"lane": lane.name, "engine": lane.engine,
                               "from": f"{old.get('version')} ({sides[from_key].spec})",
                               "to": f"{new.get('version')} ({sides[to_key].spec})", "parser": new.get("parser"),
                               "changes": changes, "breaks": any(c["change"] in BREAKING for c in changes)})
    except ConfigError as exc:
        print(f"glmf upgrade: {exc}", file=sys.stderr)
        return 2
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps({"lanes": report}, indent=1))
    broken = [r["lane"] for r in report if r["breaks"]]
    print(f"\n{len(broken)} of {len(report)} lane(s) would break" + (f": {', '.join(broken)}" if broken else ""))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(cli())
