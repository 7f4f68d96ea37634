"""Run the preflight probe where the engine lives (an image, an interpreter), with a cache.

The probe (probe.py) is passed as `python -c SOURCE ENGINE FLAGS_JSON`; its answer is the line
starting with `GLMF-PREFLIGHT ` on stdout (anything the engine prints while building its parser
is ignored). Cache keys: the engine environment's identity (docker: the image id, the interpreter
and the mounted volumes; process: the interpreter's real path and file stamp and the engine
package's version and file stamp), the probe's own hash and the flags.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker.errors
from docker.utils import parse_repository_tag

from pytest_glmf import __version__
from pytest_glmf.launch import cleanup
from pytest_glmf.launch.docker import DockerLauncher, container_spec
from pytest_glmf.launch.preflight.probe import abbreviations, parse_all
from pytest_glmf.launch.preflight.result import Preflight
from pytest_glmf.sim.args import build_parser

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig

PROBE_SOURCE = Path(__file__).with_name("probe.py").read_text()
PROBE_HASH = hashlib.sha256(PROBE_SOURCE.encode()).hexdigest()[:16]
MARK = "GLMF-PREFLIGHT "
# Importing an engine's argument parser imports torch: seconds, more on a cold page cache.
TIMEOUT_S = float(os.environ.get("GLMF_PREFLIGHT_TIMEOUT_S", "300"))


def cache_dir() -> Path:
    return Path(os.environ.get("GLMF_PREFLIGHT_CACHE") or Path.home() / ".cache" / "pytest-glmf" / "preflight")


def _key(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _cached(key: str) -> dict[str, Any] | None:
    try:
        return json.loads((cache_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None


def _store(key: str, answer: dict[str, Any]) -> None:
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(answer))
        tmp.replace(d / f"{key}.json")        # atomic: concurrent sessions never read half a file
    except OSError:
        pass                                   # a cache that cannot be written only costs time


def parse_answer(stdout: str) -> dict[str, Any] | None:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(MARK)]
    if not lines:
        return None
    try:
        return json.loads(lines[-1][len(MARK):])
    except ValueError:
        return None


def verdict(answer: dict[str, Any], where: str, cached: bool, seconds: float | None) -> Preflight:
    return Preflight("rejected" if answer.get("problems") else "ok", engine=answer.get("engine"),
                     version=answer.get("version"), where=where, cached=cached, seconds=seconds,
                     problems=list(answer.get("problems") or []), abbreviations=list(answer.get("abbreviations") or []),
                     options=list(answer.get("options") or []))


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


# -- a process lane: the interpreter on this machine --------------------------------------------------

_STAMP = ("import importlib.util, importlib.metadata as m, os, sys\n"
          "s = importlib.util.find_spec(sys.argv[1])\n"
          "v = None\n"
          "for d in (sys.argv[1], sys.argv[1] + '-cpu'):\n"
          "    try:\n        v = m.version(d); break\n    except m.PackageNotFoundError:\n        pass\n"
          "print(v, os.stat(s.origin).st_mtime_ns if s and s.origin else None)")


def with_executable(lane: "LaneConfig", interpreter: str, flags: list[str]) -> Preflight:
    exe = shutil.which(interpreter) or interpreter
    where = f"executable {interpreter}"
    if not Path(exe).exists():
        return Preflight("not run", why=f"{interpreter} not found on this machine", where=where)
    env = {**os.environ, **lane.env}
    try:
        stamp = subprocess.run([exe, "-c", _STAMP, lane.engine], capture_output=True, text=True, timeout=60,
                               env=env).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Preflight("not run", why=f"{interpreter}: {exc}", where=where)
    st = os.stat(exe)
    key = _key({"probe": PROBE_HASH, "engine": lane.engine, "exe": os.path.realpath(exe),
                "exe_stamp": [st.st_mtime_ns, st.st_size], "package": stamp, "flags": flags})
    if (answer := _cached(key)) is not None:
        return verdict(answer, where, True, 0.0)
    t0 = time.monotonic()
    try:
        proc = subprocess.run([exe, "-c", PROBE_SOURCE, lane.engine, json.dumps(flags)], capture_output=True,
                              text=True, timeout=TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Preflight("not run", why=f"the probe did not finish: {exc}", where=where)
    answer = parse_answer(proc.stdout)
    if answer is None:
        return Preflight("not run", why=f"the probe failed (exit {proc.returncode}): {_last_line(proc.stderr)}",
                         where=where)
    _store(key, answer)
    return verdict(answer, where, False, round(time.monotonic() - t0, 2))


# -- the built-in simulator (sim lanes, and process lanes that run it): its own parser, here ----------


def in_simulator(flags: list[str]) -> Preflight:
    """The simulator's own parser (sim/args.py) on `flags`, in this process: it is this package."""
    t0 = time.monotonic()
    parser = build_parser()
    options = sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})
    answer = {"engine": "sim", "version": __version__, "options": options,
              "problems": parse_all(parser, flags), "abbreviations": abbreviations(parser, flags)}
    return verdict(answer, "the built-in simulator", False, round(time.monotonic() - t0, 2))


# -- a docker lane: the image's own interpreter, in a throwaway container ------------------------------

def in_image(lane: "LaneConfig", interpreter: str, flags: list[str]) -> Preflight:
    where = f"image {lane.image}"
    launcher = DockerLauncher()
    try:
        client = launcher.client()
    except Exception as exc:  # noqa: BLE001 - BootError: the launcher says it again, with its context
        return Preflight("not run", why=str(exc), where=where)
    try:
        try:
            image = client.images.get(lane.image)
        except docker.errors.ImageNotFound:
            image = None                      # the probe's run pulls it, as the launcher would
        volumes = sorted(lane.volumes.items())
        key = _key({"probe": PROBE_HASH, "engine": lane.engine, "image": image.id if image else None,
                    "interpreter": interpreter, "volumes": volumes, "flags": flags}) if image else None
        if key and (answer := _cached(key)) is not None:
            return verdict(answer, where, True, 0.0)
        spec = container_spec(lane, f"preflight-{uuid.uuid4().hex[:8]}")
        spec["name"] += "-preflight"
        spec.update(entrypoint=[interpreter], command=["-c", PROBE_SOURCE, lane.engine, json.dumps(flags)],
                    network_disabled=True)
        for gone in ("ports", "device_requests"):   # no port to publish, no GPU: parsing needs neither
            spec.pop(gone, None)
        t0 = time.monotonic()
        out, err, code = _run_once(client, spec, cleanup)
        answer = parse_answer(out)
        if answer is None:
            return Preflight("not run", why=f"the probe failed in the image (exit {code}): {_last_line(err)}",
                             where=where)
        if key is None:
            image = client.images.get(lane.image)
            key = _key({"probe": PROBE_HASH, "engine": lane.engine, "image": image.id, "interpreter": interpreter,
                        "volumes": volumes, "flags": flags})
        _store(key, answer)
        return verdict(answer, where, False, round(time.monotonic() - t0, 2))
    except docker.errors.DockerException as exc:
        return Preflight("not run", why=f"the engine could not run the probe: {exc}", where=where)
    finally:
        launcher.close()


def probe_in_image(lane: "LaneConfig", image: str, interpreter: str, probe_args: list[str]) -> tuple[str, str, int | None]:
    """Run the probe with `probe_args` in a throwaway container of `image`, set up as preflight's (the lane's
    volumes and environment, no network, no GPU, removed afterwards): (stdout, stderr, exit code).
    `glmf upgrade` asks an image this way for its parser's whole description."""
    launcher = DockerLauncher()
    try:
        client = launcher.client()
        spec = container_spec(replace(lane, image=image), f"upgrade-{uuid.uuid4().hex[:8]}")
        spec["name"] += "-preflight"
        spec.update(entrypoint=[interpreter], command=["-c", PROBE_SOURCE, *probe_args], network_disabled=True)
        for gone in ("ports", "device_requests"):
            spec.pop(gone, None)
        return _run_once(client, spec, cleanup)
    finally:
        launcher.close()


def _run_once(client: Any, spec: dict[str, Any], cleanup: Any) -> tuple[str, str, int | None]:
    """Create, start, wait for and remove one probe container; (stdout, stderr, exit code)."""

    try:
        container = client.containers.create(**spec)
    except docker.errors.ImageNotFound:
        repo, tag = parse_repository_tag(spec["image"])
        client.images.pull(repo, tag=tag or "latest")
        container = client.containers.create(**spec)
    forget = cleanup.register(f"preflight container {spec['name']}", lambda urgent: _remove(container))
    try:
        container.start()
        try:
            code = container.wait(timeout=TIMEOUT_S).get("StatusCode")
        except Exception as exc:  # noqa: BLE001 - requests' read timeout, a connection lost
            return "", f"no answer within {TIMEOUT_S:g} s ({type(exc).__name__})", None
        out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        return out, err, code
    finally:
        _remove(container)
        forget()


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
