"""Preflight against the released SGLang 0.5.23: a process lane whose interpreter is the oracle's
Python runs SGLang's own parser (pytest_glmf/launch/preflight/probe.py builds it the way
sglang/srt/server_args.py `prepare_server_args` does)."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from oracle_env import oracle_python

from pytest_glmf.config.lanes import build_server_argv, builtin_lanes
from pytest_glmf.launch import preflight
from pytest_glmf.launch.preflight import PreflightError

pytestmark = pytest.mark.contract


@pytest.fixture
def released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(tmp_path / "cache"))
    return str(oracle_python())


def test_the_builtin_lanes_pass_sglangs_own_parser(released: str) -> None:
    for lane in builtin_lanes().values():
        lane = replace(lane, launcher="process", executable=released)
        result = preflight.check(lane, build_server_argv(lane))
        assert (result.status, result.engine, result.version, result.problems) == ("ok", "sglang", "0.5.23", [])
        assert len(result.options) > 500


def test_the_old_spelling_fails_in_seconds_naming_flag_key_and_the_real_flags(released: str) -> None:
    lane = replace(builtin_lanes()["batch"], launcher="process", executable=released, source="lanes.yaml",
                   cuda_graph_max_bs_flag="--cuda-graph-max-bs",
                   extra=[*builtin_lanes()["batch"].extra, "--max-mamba-cach-size", "64"])
    t0 = time.monotonic()
    with pytest.raises(PreflightError) as info:
        preflight.check(lane, build_server_argv(lane))
    first_s = time.monotonic() - t0
    assert str(info.value) == (
        f"preflight: lane 'batch' (lanes.yaml): SGLang 0.5.23 (executable {released}) rejects the command line: "
        "--cuda-graph-max-bs (lane key cuda_graph_max_bs_flag) is ambiguous, it could be --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill; and 1 more: --max-mamba-cach-size (lane key extra) is not a flag; closest: "
        "--max-mamba-cache-size")
    t0 = time.monotonic()
    with pytest.raises(PreflightError):
        preflight.check(lane, build_server_argv(lane))
    cached_s = time.monotonic() - t0
    # seconds, not a boot (the import of SGLang's parser is most of it); the cache skips even that
    assert first_s < 120 and cached_s < 2.0, (first_s, cached_s)
