"""Without a Docker engine the docker tests skip with the reason, except in CI where they fail.

Runs the real tests/launch/docker module in a subprocess pointed at an engine that does not exist; needs
no engine itself.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run_docker_tests(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env.update(DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock", GLMF_DOCKER_DIR=str(tmp_path))
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/launch/docker/test_docker_engine.py", "-k", "gpu_request",
         "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist", "--basetemp", str(tmp_path / "bt")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_outside_ci_no_engine_skips_with_the_reason(tmp_path: Path) -> None:
    result = _run_docker_tests(tmp_path, None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout
    assert "no Docker engine reachable" in result.stdout and "no-engine.sock" in result.stdout
    assert ".ci/docker-engine up" in result.stdout


def test_in_ci_no_engine_fails_with_the_reason(tmp_path: Path) -> None:
    result = _run_docker_tests(tmp_path, "true")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 error" in result.stdout and "skipped" not in result.stdout
    assert "CI=true and the docker tests cannot run: no Docker engine reachable" in result.stdout
