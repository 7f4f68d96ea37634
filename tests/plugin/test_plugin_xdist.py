"""pytest-xdist: one server per session (launched and stopped once, by the controller), and
glmf_serial tests never overlap other tests that use the server. Real `-n 2` runs."""
from __future__ import annotations

import json
import os

import pytest

SESSION_TESTS = """
import json, os, time
import pytest

def log(kind, t0, glmf_client):
    pid = glmf_client.get_json("/health")["pid"]
    with open("intervals.jsonl", "a") as f:
        f.write(json.dumps({"kind": kind, "t0": t0, "t1": time.time(), "pid": pid,
                            "worker": os.environ.get("PYTEST_XDIST_WORKER")}) + "\\n")

@pytest.mark.parametrize("i", range(6))
def test_plain(i, glmf_client, glmf_results):
    t0 = time.time()
    time.sleep(0.15)
    glmf_results.record("curve", f"plain{i}", {"i": i})
    log("plain", t0, glmf_client)

@pytest.mark.glmf_serial
def test_speed(glmf_client):
    t0 = time.time()
    time.sleep(0.5)
    log("serial", t0, glmf_client)

def test_no_server():
    pass
"""


def read_intervals(pytester: pytest.Pytester) -> list[dict]:
    return [json.loads(line) for line in (pytester.path / "intervals.jsonl").read_text().splitlines()]


def test_two_workers_share_one_server_launched_and_stopped_once(pytester, fake_lanes, launched_pids, pid_alive) -> None:
    lanes = fake_lanes()
    pytester.makepyfile(test_session=SESSION_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--glmf-lanes", str(lanes),
                                           "--glmf-lane", "ok", "test_session.py")
    result.assert_outcomes(passed=8)
    pids = launched_pids()
    assert len(pids) == 1, f"expected one launch for the session, got {len(pids)}"
    intervals = read_intervals(pytester)
    assert {i["pid"] for i in intervals} == {pids[0]}
    assert {i["worker"] for i in intervals} == {"gw0", "gw1"}  # both workers used the one server
    assert not pid_alive(pids[0])  # the owner stopped it after the workers finished
    # the serial test ran alone: no other server test overlapped it on the other worker
    serial = next(i for i in intervals if i["kind"] == "serial")
    overlapping = [i for i in intervals if i["kind"] == "plain" and i["t0"] < serial["t1"] and i["t1"] > serial["t0"]]
    assert overlapping == []
    # both workers' records ended up in one result file
    doc = json.loads(next((pytester.path / "glmf-results").glob("ok-2*.json")).read_text())
    assert sorted(doc["gates"]["curve"]) == [f"plain{i}" for i in range(6)]
    assert doc["provenance"]["pid"] == pids[0]
    assert list((pytester.path / "glmf-results" / ".locks").iterdir()) == []  # the serial lock is cleaned up


def test_boot_failure_under_xdist_fails_every_server_test_once_launched(pytester, fake_lanes, launched_pids) -> None:
    lanes = fake_lanes()
    pytester.makepyfile(test_session=SESSION_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--glmf-lanes", str(lanes),
                                           "--glmf-lane", "exit", "test_session.py")
    result.assert_outcomes(passed=1, errors=7)
    assert len(launched_pids()) == 1
    result.stdout.fnmatch_lines(["*BootError: lane 'exit' (process launcher): the server exited with code 3 during boot*"])


def test_serial_lock_is_not_taken_without_xdist(pytester, fake_lanes) -> None:
    """Without xdist the tests already run one at a time: no lock files appear."""
    lanes = fake_lanes()
    pytester.makepyfile(test_session=SESSION_TESTS)
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "ok", "test_session.py")
    result.assert_outcomes(passed=8)
    assert not (pytester.path / "glmf-results" / ".locks").exists()
    assert os.path.exists(pytester.path / "glmf-results" / "ok-latest.json")
