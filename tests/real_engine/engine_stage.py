"""What the real-engine stages share (tests/real_engine: vLLM; tests/real_sglang: SGLang): the
setup check, the lanes file with its cache dir filled in, and servers booted on demand through the
plugin's own launcher. Plain functions and a class; each stage's conftest makes its fixtures.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def stage_dir(setup: Path, dir_var: str, default: Path, cost: str) -> Path:
    """The stage's cache dir once `setup --check` says it is built and current. Not built: skip
    with the setup command outside CI; with CI=true fail, so a stage never goes green by skipping."""
    d = Path(os.environ.get(dir_var) or default)
    env = dict(os.environ, **{dir_var: str(d)})
    try:
        proc = subprocess.run(["bash", str(setup), "--check"], env=env, capture_output=True, text=True, timeout=120)
        ok, why = proc.returncode == 0, (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok, why = False, [f"{type(exc).__name__}: {exc}"]
    if not ok:
        msg = f"not set up ({why[0]}); run `{setup.relative_to(REPO)}` ({cost}; set {dir_var} to move it)"
        if in_ci():
            pytest.fail(f"CI=true and {msg}", pytrace=False)
        pytest.skip(msg)
    return d


def resolved_lanes(lanes_file: Path, dir_var: str, d: Path, tmp: Path) -> dict[str, Any]:
    """The lanes file with `${DIR_VAR}` filled in (a temp copy), loaded by the plugin's own loader."""
    from pytest_glmf.config.lanes import load_lanes

    path = tmp / lanes_file.name
    path.write_text(lanes_file.read_text().replace("${" + dir_var + "}", str(d)))
    return load_lanes(path)


def results_dir(env_var: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """Server logs and the stage's note: $ENV_VAR (CI artifacts) or the session's temp dir."""
    d = os.environ.get(env_var)
    out = Path(d) if d else tmp_path_factory.getbasetemp() / name
    out.mkdir(parents=True, exist_ok=True)
    return out


def stage_report(config: pytest.Config, key: pytest.StashKey[dict], out: Path, filename: str) -> Iterator[dict]:
    """The stage's note (timings, tables): stashed for the terminal summary, written at the end."""
    report: dict[str, Any] = {"schema": 1, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "results_dir": str(out)}
    config.stash[key] = report
    t0 = time.monotonic()
    yield report
    report["stage_s"] = round(time.monotonic() - t0, 1)
    (out / filename).write_text(json.dumps(report, indent=2, default=str))


class RealServers:
    """Boot lanes on demand through `pytest_glmf.launch.launch_lane`; never more than `keep` (the
    oracle) plus one other server at once."""

    def __init__(self, lanes: dict[str, Any], results_dir: Path, report: dict[str, Any], keep: str) -> None:
        self.lanes, self.results_dir, self.report, self.keep = lanes, results_dir, report, keep
        self.session_id = "real-" + uuid.uuid4().hex[:8]
        self.running: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        from pytest_glmf.launch import launch_lane

        server = self.running.get(name)
        if server is not None and server.is_alive():
            return server
        for other in [n for n in self.running if n not in (self.keep, name)]:
            self.stop(other)
        t0 = time.monotonic()
        server = launch_lane(self.lanes[name], self.results_dir, self.session_id)
        self.report.setdefault("boot_s", {})[name] = round(time.monotonic() - t0, 1)
        self.running[name] = server
        return server

    def stop(self, name: str) -> None:
        server = self.running.pop(name, None)
        if server is not None:
            server.stop()

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)
