"""Through the plugin: a docker lane under `-n 2` is one container, shared by both workers."""
from __future__ import annotations

import json
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.docker_engine

USER_TESTS = """
import json, os

def record(server, name):
    with open("seen.jsonl", "a") as f:
        f.write(json.dumps({"test": name, "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                            "container": server.provenance["container_id"],
                            "url": server.base_url}) + "\\n")

def test_a(glmf_server, glmf_boot_facts):
    assert glmf_boot_facts.max_running_requests == 8
    record(glmf_server, "a")

def test_b(glmf_server): record(glmf_server, "b")
def test_c(glmf_server): record(glmf_server, "c")
def test_d(glmf_server): record(glmf_server, "d")
def test_e(glmf_server): record(glmf_server, "e")
def test_f(glmf_server): record(glmf_server, "f")
"""


def test_two_xdist_workers_share_one_container(pytester: pytest.Pytester, docker_client: Any,
                                               python_lane: Any) -> None:
    import docker.errors

    lane = python_lane("xdist")
    lanes = {"lanes": {"xdist": {"engine": "sglang", "launcher": "docker", "image": lane.image,
                                 "command": lane.command, "volumes": lane.volumes,
                                 "boot_timeout_s": 60}}}
    pytester.makefile(".yaml", lanes=json.dumps(lanes))    # JSON is YAML
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "--glmf-lanes", "lanes.yaml", "--glmf-lane", "xdist",
                                           "-p", "no:cacheprovider", "test_user.py", timeout=180)
    result.assert_outcomes(passed=6)
    seen = [json.loads(line) for line in (pytester.path / "seen.jsonl").read_text().splitlines()]
    assert len(seen) == 6
    assert {s["worker"] for s in seen} <= {"gw0", "gw1"} and all(s["worker"] for s in seen)
    containers = {s["container"] for s in seen}
    assert len(containers) == 1, f"one container for the whole session, saw {containers}"
    assert len({s["url"] for s in seen}) == 1
    with pytest.raises(docker.errors.NotFound):              # the controller removed it at the end
        docker_client.containers.get(containers.pop())
    logs = list((pytester.path / "glmf-results").rglob("xdist-*-server.log"))
    assert len(logs) == 1 and "ready to roll" in logs[0].read_text()
    print(f"workers: {sorted({s['worker'] for s in seen})}; python {sys.version.split()[0]}")
