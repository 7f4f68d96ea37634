"""Fixtures for the running-SGLang stage: the released SGLang 0.5.23 on the CPU, launched by the
plugin's own process launcher (pytest_glmf/examples/real-sglang-lanes.yaml).

- `sglang_dir`: the cache dir built by `tests/real_sglang/setup` (`setup --check`); not built: skip
  with the setup command outside CI, fail with CI=true.
- `sglang_lanes`: the lanes file with `${GLMF_REAL_SGLANG_DIR}` filled in.
- `sglang_servers`: boots lanes on demand (tests/real_engine/engine_stage.py `RealServers`): the
  oracle plus at most one other server (~4.5 GB each); all stopped at module end.
- `sglang_report`: the stage's note (timings, tables), written to $GLMF_REAL_SGLANG_RESULTS (default:
  the session's temp dir) and printed at the end of the session.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "real_engine"))
from engine_stage import RealServers, resolved_lanes, results_dir, stage_dir, stage_report  # noqa: E402  (tests/real_engine/engine_stage.py)
from sglang_stage import DIR_VAR, LANES_FILE, ORACLE, SETUP  # noqa: E402  (this folder's names)

REPORT_KEY = pytest.StashKey[dict]()


def default_dir() -> Path:
    return Path(os.environ.get(DIR_VAR) or Path.home() / ".cache" / "pytest-glmf" / "real-sglang")


@pytest.fixture(scope="session")
def sglang_dir() -> Path:
    return stage_dir(SETUP, DIR_VAR, default_dir(), "venv, stand-in and models, ~3 min cold, 3 GB")


@pytest.fixture(scope="session")
def sglang_lanes(sglang_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return resolved_lanes(LANES_FILE, DIR_VAR, sglang_dir, tmp_path_factory.mktemp("real-sglang-lanes"))


@pytest.fixture(scope="session")
def sglang_results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return results_dir("GLMF_REAL_SGLANG_RESULTS", tmp_path_factory, "real-sglang-results")


@pytest.fixture(scope="session")
def sglang_report(request: pytest.FixtureRequest, sglang_results_dir: Path) -> Any:
    yield from stage_report(request.config, REPORT_KEY, sglang_results_dir, "real-sglang-report.json")


@pytest.fixture(scope="module")  # stopped after the module that used them: each server holds ~4.5 GB
def sglang_servers(sglang_lanes: dict[str, Any], sglang_report: dict[str, Any], sglang_results_dir: Path) -> Any:
    servers = RealServers(sglang_lanes, sglang_results_dir, sglang_report, keep=ORACLE)
    try:
        yield servers
    finally:
        servers.stop_all()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The stage's note in the CI log (rendering only; the tests gave the verdicts)."""
    report = config.stash.get(REPORT_KEY, None)
    if not report:
        return
    tr = terminalreporter
    tr.section("real SGLang (0.5.23 on the CPU)")
    tr.write_line(f"stage {report.get('stage_s', '?')} s; boot s per lane: {report.get('boot_s', {})}")
    for key in ("boot_facts", "server_config", "health_s"):
        if report.get(key) is not None:
            tr.write_line(f"{key}: {report[key]}")
    for key in ("curve", "capacity", "drift", "tools", "suites"):
        if (report.get(key) or {}).get("table"):
            tr.write_line(f"-- {key}")
            tr.write_line(report[key]["table"])
    tr.write_line(f"note and server logs: {report['results_dir']}")
