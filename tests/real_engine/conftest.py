"""Fixtures for the real-engine stage: vLLM on the CPU, booted through our own launcher.

- `real_engine_dir`: the cache dir built by `tests/real_engine/setup` (checked with `setup --check`).
  Absent or stale: skip with the setup command outside CI; in CI (`CI=true`) an error with the
  reason, so the stage can never go green by skipping.
- `real_lanes`: examples/real-engine-lanes.yaml with `${GLMF_REAL_ENGINE_DIR}` resolved into a
  temp copy (the lanes loader does not expand env vars), loaded by `pytest_glmf.config.lanes.load_lanes`.
- `real_servers`: boots lanes on demand with `pytest_glmf.launch.launch_lane` and keeps memory in
  check: at most the oracle plus one other server run at once (~3.3 GB each); every server is
  stopped at module end, also when a test fails.
- `real_report`: one JSON note for the stage (timings, tables, disagreements), written at session
  end to $GLMF_REAL_ENGINE_RESULTS (default: the session's temp results dir) and printed as a path.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_stage import (  # tests/real_engine/engine_stage.py
    RealServers,
    resolved_lanes,
    results_dir,
    stage_dir,
    stage_report,
)
from vllm_stage import DIR_VAR, LANES_FILE, ORACLE, SETUP, default_dir  # this folder's names


@pytest.fixture(scope="session")
def real_engine_dir() -> Path:
    return stage_dir(SETUP, DIR_VAR, default_dir(), "venv + models, ~3 min cold")


@pytest.fixture(scope="session")
def real_lanes(real_engine_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return resolved_lanes(LANES_FILE, DIR_VAR, real_engine_dir, tmp_path_factory.mktemp("real-engine-lanes"))


REPORT_KEY = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def real_results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return results_dir("GLMF_REAL_ENGINE_RESULTS", tmp_path_factory, "real-engine-results")


@pytest.fixture(scope="session")
def real_report(request: pytest.FixtureRequest, real_results_dir: Path) -> Any:
    yield from stage_report(request.config, REPORT_KEY, real_results_dir, "real-engine-report.json")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The stage's note in the CI log: timings and the gate tables (rendering only; verdicts were
    given by the tests)."""
    report = config.stash.get(REPORT_KEY, None)
    if not report:
        return
    tr = terminalreporter
    tr.section("real engine (vLLM on the CPU)")
    tr.write_line(f"stage {report.get('stage_s', '?')} s; boot s per lane: {report.get('boot_s', {})}")
    facts = report.get("boot_facts") or {}
    if facts:
        tr.write_line(f"boot facts: vLLM {facts.get('server_version')}, kv_tokens {facts.get('kv_tokens')}, "
                      f"max_concurrency {facts.get('max_concurrency')}, seats {facts.get('max_running_requests')}")
    for key in ("curve", "drift", "acceptance"):
        if (report.get(key) or {}).get("table"):
            tr.write_line(f"-- {key}")
            tr.write_line(report[key]["table"])
    for mode, brief in (report.get("tools") or {}).items():
        tr.write_line(f"-- tools {mode}: turns ok {brief['parsed']}/{brief['turns']}, leaks {brief['leaks']}, "
                      f"wrong calls {brief['wrong_calls']}, answers with tool calls "
                      f"{brief['answers_with_calls']}/{brief['answers']}")
    tr.write_line(f"note and server logs: {report['results_dir']}")


@pytest.fixture(scope="module")  # stopped after the module that used them: vLLM holds ~3 GB and a core
def real_servers(real_lanes: dict[str, Any], real_report: dict[str, Any], real_results_dir: Path) -> Any:
    servers = RealServers(real_lanes, real_results_dir, real_report, keep=ORACLE)
    try:
        yield servers
    finally:
        servers.stop_all()
