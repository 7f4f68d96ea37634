"""The released SGLang 0.5.23 served from a container on the real Docker engine: the docker
launcher, preflight inside the image, readiness through the published port, the boot log from
docker's log stream, identity and cleanup, all against the real server (tests/real_sglang has the
gates). The image is glmf-test/python:1 (busybox + the host's Python, .ci/docker-engine) with the
SGLang stage's venv, stand-in and model mounted read-only at their host paths.

Needs `.ci/docker-engine up` and `tests/real_sglang/setup` (CI runs both).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_glmf.config.lanes import LaneConfig, load_lanes
from pytest_glmf.launch import launch_lane

pytestmark = [pytest.mark.docker_engine, pytest.mark.real_sglang]
REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "real_engine"))
from engine_stage import stage_dir  # noqa: E402  (tests/real_engine/engine_stage.py)

SETUP = REPO / "tests" / "real_sglang" / "setup"
DIR_VAR = "GLMF_REAL_SGLANG_DIR"


def test_real_sglang_in_a_container_boots_answers_and_is_removed(
        docker_client: Any, session_id: str, leftovers: Callable[[], list[Any]],
        python_lane: Callable[..., LaneConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = stage_dir(SETUP, DIR_VAR, Path(os.environ.get(DIR_VAR) or Path.home() / ".cache/pytest-glmf/real-sglang"),
                  "venv, stand-in and models, ~3 min cold")
    monkeypatch.setenv(DIR_VAR, str(d))
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(tmp_path / "preflight"))
    oracle = load_lanes(REPO / "examples" / "real-sglang-lanes.yaml")["sglang-oracle"]
    template = python_lane("sglang-docker")
    lane = dataclasses.replace(oracle, name="sglang-docker", launcher="docker", image=template.image,
                               volumes={**template.volumes, str(d): str(d)}, boot_timeout_s=300)
    server = launch_lane(lane, tmp_path, session_id)
    try:
        facts = server.boot_facts
        assert (facts.engine, facts.ready, facts.problems) == ("sglang", True, [])
        assert (facts.kv_tokens, facts.context_len) == (32768, 8192)
        assert server.provenance["preflight"]["status"] == "ok"
        assert server.provenance["preflight"]["where"] == f"image {template.image}"
        assert server.provenance["engine_identity"]["version"] == "0.5.23"
        assert server.config.tool_call_parser == "hermes" and server.config.speculates is False
        reply = httpx.post(server.base_url + "/v1/chat/completions", timeout=120, json={
            "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4
    finally:
        server.stop()
    assert leftovers() == []
