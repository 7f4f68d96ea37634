"""Several lanes in one session (`--glmf-lane a --glmf-lane b`, `--glmf-lane all`): the tests that use
the lane run once per lane, one server at a time (the previous lane's server is stopped before the
next one boots), one result file per lane, and the comparison at the end (terminal and Markdown),
the same one `glmf compare` prints from the result files. `--glmf-lane X` once is today's session."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_glmf.cli import main

LANES = """\
schema: 1
lanes:
  slots:
    launcher: sim
    model: /models/GLM-5.3-Flash-NVFP4
    draft: /models/GLM-5.3-Flash-DFlash2
    spec: dflash
    kv: fp8_e4m3
    ctx: 131072
    maxbs: 16
    time_scale: 0.05
    boot_timeout_s: 60
    matrix:
      --max-mamba-cache-size: [38, 120]
"""
ROW = "{users: 8, per_user_tok_s: {min: 1}, allow_queueing: true}"
THRESHOLDS = f"""\
schema: 1
lanes:
  slots-38:
    boot: {{max_running_requests: {{min: 1}}}}
    curve: {{settings: {{max_tokens: 24, runs: 1, lag_p99_max_s: 1.0, client_error_max_pct: 50}}, rows: [{ROW}]}}
  slots-120:
    boot: {{max_running_requests: {{min: 1}}}}
    curve: {{settings: {{max_tokens: 24, runs: 1, lag_p99_max_s: 1.0, client_error_max_pct: 50}}, rows: [{ROW}]}}
"""
USER_TEST = """\
import json, os, pathlib

SEEN = pathlib.Path(os.environ["SEEN_FILE"])


def test_one_server_at_a_time(glmf_lane, glmf_server, glmf_client):
    assert glmf_client.get_json("/v1/models")["data"]
    seen = json.loads(SEEN.read_text()) if SEEN.exists() else {}
    for lane, pid in seen.items():
        if lane != glmf_lane.name:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            raise AssertionError(f"the server of lane {lane} (pid {pid}) is still running")
    seen[glmf_lane.name] = glmf_server.provenance["pid"]
    SEEN.write_text(json.dumps(seen))
"""
SUITES = resources.files("pytest_glmf.suites")


@pytest.fixture
def files(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lanes = pytester.makefile(".yaml", lanes=LANES)
    thresholds = pytester.makefile(".yaml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_user=USER_TEST)
    monkeypatch.setenv("SEEN_FILE", str(pytester.path / "seen.json"))
    return ["-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-thresholds", str(thresholds)]


def test_two_lanes_launch_test_and_stop_in_turn_and_are_compared(pytester, files, unfold) -> None:
    result = pytester.runpytest_subprocess(
        *files, "--glmf-lane", "slots-38", "--glmf-lane", "slots-120", "-v",
        str(SUITES / "test_boot.py"), str(SUITES / "test_curve.py"), "test_user.py", "-k", "not kv_pool")
    result.assert_outcomes(passed=2 * 4, skipped=2 * 1, deselected=2)   # seats skip: allow_queueing
    out = result.stdout.str()
    pytest.LineMatcher(unfold(out).splitlines()).fnmatch_lines(["glmf: lanes=slots-38,slots-120 (one server at a time) *"])
    # one lane's tests together, then the other's
    order = [line.split("[")[-1].split("]")[0] for line in out.splitlines() if "PASSED" in line or "SKIPPED" in line]
    assert order == sorted(order, key=lambda ids: "slots-120" in ids), order
    assert json.loads((pytester.path / "seen.json").read_text()).keys() == {"slots-38", "slots-120"}
    results = pytester.path / "glmf-results"
    docs = {name: json.loads((results / f"{name}-latest.json").read_text()) for name in ("slots-38", "slots-120")}
    assert docs["slots-38"]["gates"]["boot"]["facts"]["max_running_requests"] == 7
    assert docs["slots-120"]["gates"]["boot"]["facts"]["max_running_requests"] == 24
    assert docs["slots-38"]["session_id"] != docs["slots-120"]["session_id"]
    assert docs["slots-38"]["lane"]["origin"] == "slots: --max-mamba-cache-size=38"
    result.stdout.fnmatch_lines([
        "*glmf results by lane*",
        f"glmf: lane slots-38: {results}/slots-38-*.json (exit 0)",
        f"glmf: lane slots-120: {results}/slots-120-*.json (exit 0)",
        "*glmf comparison*",
        "users | slots-38 (7 seats) * | slots-120 (24 seats)*",
        "8     | * [[]8 users on 7 seats] | *",
        "excluded: slots-38 @ 8 users: seat-starved: 8 users on 7 seats",
        "seats (max_running_requests) | 7 * | 24*",
        f"glmf: comparison written to {results}/compare-*.md (again: glmf compare *)",
    ])
    (md,) = results.glob("compare-*.md")
    assert "| 8 | " in md.read_text() and "[8 users on 7 seats]" in md.read_text()


def test_glmf_compare_prints_what_the_session_printed(pytester, files, capsys) -> None:
    result = pytester.runpytest_subprocess(*files, "--glmf-lane", "all", str(SUITES / "test_boot.py"),
                                           "-k", "test_boot_log_has_no_problems")
    result.assert_outcomes(passed=2)
    session_text = result.stdout.str().split("glmf comparison =")[1].split("\n", 1)[1]
    session_text = session_text.split("\nglmf: comparison written")[0]
    results = pytester.path / "glmf-results"
    paths = [str(next(results.glob(f"{name}-2*.json"))) for name in ("slots-38", "slots-120")]
    capsys.readouterr()   # pytester's own lines
    assert main(["compare", *paths, "--markdown", str(pytester.path / "c.md")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(session_text.strip())
    assert "Boot facts side by side" in printed and "slots: --max-mamba-cache-size=120" in printed


def test_all_is_every_lane_of_the_file_and_one_lane_is_todays_session(pytester, files) -> None:
    result = pytester.runpytest_subprocess(*files, "--glmf-lane", "all", "--collect-only", "-q", "test_user.py")
    result.stdout.fnmatch_lines(["test_user.py::test_one_server_at_a_time[[]slots-38[]]",
                                 "test_user.py::test_one_server_at_a_time[[]slots-120[]]"])
    result = pytester.runpytest_subprocess(*files, "--glmf-lane", "slots-38", "--collect-only", "-q", "test_user.py")
    result.stdout.fnmatch_lines(["test_user.py::test_one_server_at_a_time"])
    assert "[slots-38]" not in result.stdout.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one process", "-n 2"])
def test_a_lane_that_does_not_boot_fails_its_tests_and_the_next_lane_still_runs(pytester, files, xdist) -> None:
    if xdist:
        pytest.importorskip("xdist")
    lanes = pytester.makefile(".yaml", lanes=LANES + (
        "  oom:\n    launcher: sim\n    model: /models/GLM-5.3-Flash-NVFP4\n    sim_args: [--fault, boot-oom]\n"
        "    time_scale: 0.05\n    boot_timeout_s: 60\n"))
    thresholds = pytester.makefile(".yaml", thresholds=THRESHOLDS + "  oom:\n    boot: {max_running_requests: {min: 1}}\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-thresholds",
                                           str(thresholds), "--glmf-lane", "oom", "--glmf-lane", "slots-120",
                                           *xdist, "test_user.py")
    result.assert_outcomes(passed=1, errors=1)
    ledger = [x for x in (pytester.path / "glmf-results" / "failure-ledger.md").read_text().splitlines()
              if x.startswith("- ")]
    assert len(ledger) == 1 and "| lane oom | boot |" in ledger[0], ledger
    result.stdout.fnmatch_lines(["glmf: lane oom: */oom-*-oom.json (exit 1)",
                                 "glmf: lane slots-120: no results recorded (exit 0)"])   # test_user records none
    doc = json.loads((pytester.path / "glmf-results" / "oom-latest.json").read_text())
    assert doc["incomplete"][0].startswith("the server did not boot: ")


def test_the_ini_twin_takes_names_separated_by_spaces(pytester, files) -> None:
    pytester.makeini("[pytest]\nglmf_lane = slots-120 slots-38\n")
    result = pytester.runpytest_subprocess(*files, "--collect-only", "-q", "test_user.py")
    result.stdout.fnmatch_lines(["test_user.py::test_one_server_at_a_time[[]slots-120[]]",
                                 "test_user.py::test_one_server_at_a_time[[]slots-38[]]"])


@pytest.mark.parametrize("extra, message", [
    (["--glmf-url", "http://127.0.0.1:9"], "ERROR: --glmf-url attaches to one server; it cannot be the 2 lanes "
                                           "slots-38, slots-120 *"),
    (["--glmf-baseline", "b.json", "--glmf-update-baseline"], "ERROR: --glmf-baseline */b.json is one lane's result; with several lanes "
                                    "(slots-38, slots-120) use --glmf-baseline history[[]:K] *"),
    (["--glmf-lane", "nope"], "ERROR: unknown lane 'nope' in */lanes.yaml; known lanes: slots-38, slots-120"),
])
def test_what_cannot_mean_several_lanes_is_refused(pytester, files, extra, message) -> None:
    result = pytester.runpytest_subprocess(*files, "--glmf-lane", "slots-38", "--glmf-lane", "slots-120", *extra,
                                           "test_user.py")
    result.stderr.fnmatch_lines([message])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


XDIST_TEST = """\
import json, os, time
import pytest


def log(kind, lane, pid, t0):
    with open("intervals.jsonl", "a") as f:
        f.write(json.dumps({"kind": kind, "lane": lane, "pid": pid, "t0": t0, "t1": time.time(),
                            "worker": os.environ["PYTEST_XDIST_WORKER"]}) + "\\n")


@pytest.mark.parametrize("i", range(6))
def test_plain(i, glmf_lane, glmf_server, glmf_client, glmf_results):
    t0 = time.time()
    assert glmf_client.get_json("/v1/models")["data"]
    time.sleep(0.2)
    glmf_results.record("curve", f"plain{i}", {"i": i})
    log("plain", glmf_lane.name, glmf_server.provenance["pid"], t0)


@pytest.mark.glmf_serial
def test_speed(glmf_lane, glmf_server):
    t0 = time.time()
    time.sleep(0.6)
    log("serial", glmf_lane.name, glmf_server.provenance["pid"], t0)
"""


def intervals(pytester: pytest.Pytester) -> list[dict]:
    return [json.loads(x) for x in (pytester.path / "intervals.jsonl").read_text().splitlines()]


def test_two_lanes_under_xdist_boot_in_turn_and_every_worker_tests_each(pytester, files, pid_alive) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_xdist=XDIST_TEST)
    result = pytester.runpytest_subprocess(*files, "--glmf-lane", "all", "-n", "2", "-v", "test_xdist.py",
                                           str(SUITES / "test_boot.py"), "-k", "not kv_pool", timeout=300)
    result.assert_outcomes(passed=2 * 7 + 2 * 2, skipped=2)   # seats: no curve rows (xdist counts no deselected)
    seen = intervals(pytester)
    pids = {lane: {x["pid"] for x in seen if x["lane"] == lane} for lane in ("slots-38", "slots-120")}
    assert all(len(p) == 1 for p in pids.values()) and pids["slots-38"] != pids["slots-120"], pids
    # the first lane's tests all ended before the second lane's began: one server at a time
    assert max(x["t1"] for x in seen if x["lane"] == "slots-38") < min(x["t0"] for x in seen if x["lane"] == "slots-120")
    # the workers share a lane's tests, each run once: xdist deals the first units to every worker (the
    # first lane's), later lanes' units go to whichever worker asks first
    assert {x["worker"] for x in seen if x["lane"] == "slots-38" and x["kind"] == "plain"} == {"gw0", "gw1"}
    assert sorted(x["lane"] for x in seen if x["kind"] == "plain") == ["slots-120"] * 6 + ["slots-38"] * 6
    # a lane's speed test ran alone on its server
    for serial in (x for x in seen if x["kind"] == "serial"):
        beside = [x for x in seen if x["lane"] == serial["lane"] and x["kind"] == "plain"
                  and x["t0"] < serial["t1"] and x["t1"] > serial["t0"]]
        assert beside == [], (serial, beside)
    assert not any(pid_alive(next(iter(p))) for p in pids.values())
    result.stdout.fnmatch_lines(["glmf: lane slots-38: booting (lane 1 of 2)",
                                 "glmf: lane slots-120: booting (lane 2 of 2)"])
    result.stdout.fnmatch_lines(["  glmf: history: run *-slots-38 (passed) stored in *history.sqlite",
                                 "  glmf: history: run *-slots-120 (passed) stored in *history.sqlite"])
    results = pytester.path / "glmf-results"
    docs = {name: json.loads((results / f"{name}-latest.json").read_text()) for name in ("slots-38", "slots-120")}
    for name, doc in docs.items():   # every worker's records in the lane's one result file
        assert sorted(doc["gates"]["curve"]) == [f"plain{i}" for i in range(6)], name
        assert doc["provenance"]["pid"] in pids[name] and doc["incomplete"] == []
    assert docs["slots-38"]["gates"]["boot"]["facts"]["max_running_requests"] == 7
    assert docs["slots-120"]["gates"]["boot"]["facts"]["max_running_requests"] == 24
    result.stdout.fnmatch_lines(["*glmf comparison*", "seats (max_running_requests) | 7 * | 24*",
                                 f"glmf: comparison written to {results}/compare-*.md (again: glmf compare *)"])
    assert list((results / ".locks").iterdir()) == []   # locks and hand-offs are cleaned up


def test_xdist_with_x_stops_without_booting_the_next_lane(pytester, files) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_xdist=XDIST_TEST + "\n\ndef test_fails(glmf_lane):\n    assert glmf_lane.name != 'slots-38'\n")
    result = pytester.runpytest_subprocess(*files, "--glmf-lane", "all", "-n", "2", "-x", "test_xdist.py", timeout=300)
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)   # xdist: interrupted
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    assert "slots-120" not in {x["lane"] for x in intervals(pytester)}
    assert "glmf: lane slots-120: booting" not in result.stdout.str()
    assert "slots-120-latest.json" not in {p.name for p in (pytester.path / "glmf-results").iterdir()}


def test_several_lanes_take_load_or_loadgroup_distribution(pytester, files) -> None:
    pytest.importorskip("xdist")
    result = pytester.runpytest_subprocess(*files, "--glmf-lane", "all", "-n", "2", "--dist", "loadfile", "test_user.py")
    result.stderr.fnmatch_lines(["ERROR: --dist loadfile: several lanes (slots-38, slots-120) under xdist run with "
                                 "--dist load or loadgroup *"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


RUN_CONFTEST = """
import dataclasses
from pytest_glmf.plugin.run import LaneRun
from pytest_glmf.plugin.session import session_of

OWN = {"settings", "session_id", "worker"}


def pytest_runtest_logstart(nodeid, location):
    import pytest
    run = session_of(pytest_config).run   # after the session switched lanes, before the test's setup
    fresh = LaneRun(run.settings, run.session_id, run.worker)
    left = [f.name for f in dataclasses.fields(LaneRun)
            if f.name not in OWN and getattr(run, f.name) != getattr(fresh, f.name)]
    print(f"\\nRUN {nodeid.split('[')[-1]} {run.lane.name} left={left}")


def pytest_configure(config):
    global pytest_config
    pytest_config = config
"""
PROBE_TEST = """
def test_records_then_fails_on_the_first_lane(glmf_lane, glmf_server, glmf_results):
    glmf_results.record("boot", "probe", {"lane": glmf_lane.name})
    assert glmf_lane.name != "slots-38", "lane A fails"
"""


def test_what_lane_a_knew_is_absent_from_lane_b(pytester: pytest.Pytester, files: list[str]) -> None:
    pytester.makeconftest(RUN_CONFTEST)
    pytester.makepyfile(test_probe=PROBE_TEST)
    result = pytester.runpytest_subprocess(*files, "--glmf-lane", "slots-38", "--glmf-lane", "slots-120", "-s",
                                           "--glmf-allow-unverified", "test_probe.py")
    result.assert_outcomes(passed=1, failed=1)
    # lane B's first test starts from a run with every field at its default (lane A's failure,
    # recorder, server and notes stayed with lane A's run)
    result.stdout.fnmatch_lines(["RUN slots-38] slots-38 left=[[]]", "RUN slots-120] slots-120 left=[[]]"])
    results = pytester.path / "glmf-results"
    docs = {name: json.loads((results / f"{name}-latest.json").read_text()) for name in ("slots-38", "slots-120")}
    assert [t["test"].split("[")[-1] for t in docs["slots-38"]["failed_tests"]] == ["slots-38]"]
    assert docs["slots-120"]["failed_tests"] == []
    assert docs["slots-38"]["exitstatus"] == 1 and docs["slots-120"]["exitstatus"] == 0
    result.stdout.fnmatch_lines([f"glmf: lane slots-38: {results}/slots-38-*.json (exit 1)",
                                 f"glmf: lane slots-120: {results}/slots-120-*.json (exit 0)"])
