"""Preflight on the real Docker engine: the lane's command line is checked inside the lane's image
by the engine's own parser, in a throwaway container, before the server's container is created.

The image is glmf-test/python:1 (busybox + bind-mounted host Python, .ci/docker-engine) with the
contract oracle's venv mounted read-only: its `python -m sglang.launch_server` is the released
SGLang 0.5.23, so the parser answering inside the container is SGLang's own (no GPU needed to
parse). Needs `.ci/docker-engine up` and `tests/contract/setup` (CI runs both).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.launch import preflight
from pytest_glmf.launch.docker import LABEL_OWNER, OWNER
from pytest_glmf.launch.preflight import PreflightError

pytestmark = pytest.mark.docker_engine
REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "contract"))
from oracle_env import oracle_python  # noqa: E402  (tests/contract/oracle_env.py)


@pytest.fixture
def released_lane(docker_client: Any, python_lane: Callable[..., LaneConfig], tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> Callable[..., LaneConfig]:
    python = oracle_python()
    venv = python.parents[1]
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(tmp_path / "cache"))
    # the host's Python prefix and /usr (as the docker tests mount them), plus the oracle's venv
    mounts = {**python_lane("mounts").volumes, str(venv): str(venv)}

    def make(**fields: Any) -> LaneConfig:
        base = {"name": "batch", "launcher": "docker", "image": "glmf-test/python:1", "executable": str(python),
                "model": "/models/GLM-5.3-Flash-NVFP4", "kv": "fp8_e4m3", "mem": 0.9, "ctx": 131072, "maxbs": 128,
                "extra": ["--max-mamba-cache-size", "640", "--mamba-ssm-dtype", "bfloat16", "--tool-call-parser",
                          "glm47"], "volumes": mounts, "source": "lanes.yaml"}
        return LaneConfig(**{**base, **fields})
    return make


def _probe_containers(client: Any) -> list[Any]:
    return [c for c in client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={OWNER}"})
            if c.name.endswith("-preflight")]


def test_sglangs_parser_in_the_image_accepts_the_recipe_lane(docker_client: Any, released_lane) -> None:
    lane = released_lane()
    result = preflight.check(lane, preflight.argv_for(lane))
    assert (result.status, result.engine, result.version, result.problems) == ("ok", "sglang", "0.5.23", [])
    assert result.where == "image glmf-test/python:1" and not result.cached
    assert _probe_containers(docker_client) == []          # the probe's container is gone
    t0 = time.monotonic()
    again = preflight.check(lane, preflight.argv_for(lane))
    assert again.cached and time.monotonic() - t0 < 2.0     # per image id: no container this time


def test_a_renamed_flag_fails_in_seconds_with_one_line(docker_client: Any, released_lane) -> None:
    lane = released_lane(cuda_graph_max_bs_flag="--cuda-graph-max-bs")
    t0 = time.monotonic()
    with pytest.raises(PreflightError) as info:
        preflight.check(lane, preflight.argv_for(lane))
    assert time.monotonic() - t0 < 120
    assert str(info.value) == (
        "preflight: lane 'batch' (lanes.yaml): SGLang 0.5.23 (image glmf-test/python:1) rejects the command line: "
        "--cuda-graph-max-bs (lane key cuda_graph_max_bs_flag) is ambiguous, it could be --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill")
    assert _probe_containers(docker_client) == []


def test_the_session_stops_before_the_servers_container_exists(docker_client: Any, released_lane,
                                                              pytester: pytest.Pytester) -> None:
    lane = released_lane(extra=["--max-mamba-cach-size", "640"])
    volumes = "".join(f"      {host}: {bind}\n" for host, bind in lane.volumes.items())
    lanes = pytester.makefile(".yaml", lanes=(
        f"lanes:\n  batch:\n    launcher: docker\n    image: glmf-test/python:1\n    executable: {lane.executable}\n"
        f"    model: /models/GLM\n    extra: --max-mamba-cach-size 640\n    boot_timeout_s: 30\n"
        f"    volumes:\n{volumes}"))
    before = {c.id for c in docker_client.containers.list(all=True)}
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "batch", "-k", "test_boot",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines([
        f"PreflightError: preflight: lane 'batch' ({lanes}): SGLang 0.5.23 (image glmf-test/python:1) rejects the "
        "command line: --max-mamba-cach-size (lane key extra) is not a flag; closest: --max-mamba-cache-size"])
    assert {c.id for c in docker_client.containers.list(all=True)} == before   # nothing created, nothing left
