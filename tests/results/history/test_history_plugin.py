"""The history store through the plugin (pytester sessions against a real HTTP server): every
session lands in the store, also two finishing at once and under -n 2, on SQLite and on the real
PostgreSQL; `--glmf-baseline history:5` picks and names its runs; slow drift warns or fails; a
store that is down costs one line and nothing else."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.results.history import open_store, parse_location
from pytest_glmf.results.provenance import gpu_info
from pytest_glmf.testing.truth_server import TruthServer

# The test measures nothing itself: it records the numbers the outer test chose (GLMF_TEST_VALUES),
# so every session's result is known exactly. BARRIER makes several sessions finish together.
TEST_FILE = '''
import json, os, pathlib, time

def test_numbers(glmf_server, glmf_results):
    values = json.loads(os.environ.get("GLMF_TEST_VALUES") or "{}")
    glmf_results.record("curve", "users=48", {"users": 48, "per_user_tok_s": 50.0, "ttft_p95_s": 0.76,
                                              "spread_pct": 1.0, **values})
    assert not os.environ.get("FAIL"), "failing on purpose"

def test_wait_for_the_others(glmf_server):
    barrier = os.environ.get("BARRIER")
    if barrier:
        d = pathlib.Path(barrier)
        (d / str(os.getpid())).touch()
        deadline = time.monotonic() + 60
        while len(list(d.iterdir())) < int(os.environ["BARRIER_N"]) and time.monotonic() < deadline:
            time.sleep(0.01)
'''


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with TruthServer(ttft_ms=5, itl_ms=2, seats=8) as ts:
        yield ts.url


@pytest.fixture
def session_args(pytester: pytest.Pytester, truth_url: str) -> list[str]:
    pytester.makepyfile(test_numbers=TEST_FILE)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{truth_url}'}}\n")
    # the sessions record numbers without judging them (no thresholds section, no check): allowed on
    # purpose, or every one would fail as "nothing was verified" (plugin/verified.py)
    return ["--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-results", str(pytester.path / "results"),
            "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestUnraisableExceptionWarning",
            "--glmf-allow-unverified", "test_numbers.py"]


@pytest.fixture
def run_session(pytester: pytest.Pytester, session_args: list[str],
                monkeypatch: pytest.MonkeyPatch) -> Callable[..., pytest.RunResult]:
    def run(*extra: str, values: dict[str, float] | None = None) -> pytest.RunResult:
        monkeypatch.setenv("GLMF_TEST_VALUES", json.dumps(values or {}))
        return pytester.runpytest_subprocess(*session_args, *extra)
    return run


@pytest.fixture
def lane_doc(make_doc: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Earlier runs of the attach lane `truth` as the plugin will see this host: no model
    revision, this host's GPU (none on CI)."""
    gpu = gpu_info()

    def doc(i: int, tok_s: float, **kw: Any) -> dict[str, Any]:
        kw.setdefault("lane", "truth")
        return make_doc(i, {"per_user_tok_s": tok_s}, gpu_name=gpu.get("gpu_name"), gpu_count=gpu.get("gpu_count", 0),
                        model_revision="", **kw)
    return doc


def default_store(pytester: pytest.Pytester) -> Path:
    return pytester.path / "results" / "history.sqlite"


def stored(value: str | Path, base: Path) -> list[Any]:
    with open_store(parse_location(str(value), base, base)) as store:
        return store.runs()


def result_file(pytester: pytest.Pytester) -> Path:
    (path,) = [p for p in (pytester.path / "results").glob("truth-2*.json")]
    return path


# ---------------------------------------------------------------------------- every session lands


def test_a_session_lands_in_the_default_store_with_its_verdict(pytester, run_session, monkeypatch, unfold) -> None:
    result = run_session()
    result.assert_outcomes(passed=2)
    doc = json.loads(result_file(pytester).read_text())
    assert doc["exitstatus"] == 0
    result_file(pytester).rename(pytester.path / "first.json")
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([   # the header folds at 120
        f"glmf: history={default_store(pytester)} slow drift=warn over 5 runs",
        f"glmf: history: run {doc['session_id']} (passed) stored in {default_store(pytester)}"])
    (run,) = stored(default_store(pytester), pytester.path)
    assert (run.session_id, run.lane, run.verdict, run.engine, run.launcher) == \
        (doc["session_id"], "truth", "passed", "sglang", "attach")
    monkeypatch.setenv("FAIL", "1")
    run_session().assert_outcomes(passed=1, failed=1)
    assert [r.verdict for r in stored(default_store(pytester), pytester.path)] == ["failed", "passed"]


def test_off_writes_no_store(pytester, run_session) -> None:
    run_session("--glmf-history", "off").assert_outcomes(passed=2)
    assert not default_store(pytester).exists() and not (pytester.path / "results" / ".history-pending").exists()


def _concurrent(pytester: pytest.Pytester, session_args: list[str], extra: list[str], n: int) -> list[str]:
    """n sessions started together whose last test waits for all of them: they finish at once."""
    barrier = pytester.path / "barrier"
    barrier.mkdir()
    import os

    env = {**os.environ, "BARRIER": str(barrier), "BARRIER_N": str(n)}
    procs = [subprocess.Popen([sys.executable, "-m", "pytest", *session_args, *extra], cwd=pytester.path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(n)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * n, "\n\n".join(outs)
    return outs


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_two_sessions_finishing_at_once_both_land_in_sqlite(pytester, session_args, xdist) -> None:
    outs = _concurrent(pytester, session_args, xdist, 2)
    runs = stored(default_store(pytester), pytester.path)
    assert len(runs) == 2 and {r.verdict for r in runs} == {"passed"}
    for out in outs:
        assert "glmf: history NOT stored" not in out and "glmf: history: run " in out


@pytest.mark.postgres
@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_two_sessions_finishing_at_once_both_land_in_postgres(pytester, session_args, pg_url, xdist) -> None:
    outs = _concurrent(pytester, session_args, ["--glmf-history", pg_url, *xdist], 2)
    runs = stored(pg_url, pytester.path)
    assert len(runs) == 2 and {r.verdict for r in runs} == {"passed"}
    password = pg_url.split(":")[2].split("@")[0]
    for out in outs:
        assert "glmf: history: run " in out and password not in out
    assert password not in json.dumps([json.loads(p.read_text()) for p in (pytester.path / "results").glob("*.json")])


# ---------------------------------------------------------------------------- baselines from history


def test_history_5_compares_with_the_median_of_the_right_runs_and_names_them(pytester, run_session, lane_doc,
                                                                             unfold) -> None:
    with open_store(parse_location(None, pytester.path, pytester.path / "results")) as store:
        for i in range(6):                                   # tok/s 40..45: the last 5 are 41..45, median 43
            store.add_run(lane_doc(i, 40.0 + i))
        store.add_run(lane_doc(6, 20.0, exitstatus=1))        # failed: never a baseline
        store.add_run(lane_doc(7, 99.0, engine="vllm"))       # another engine
        store.add_run(lane_doc(8, 99.0, lane="other"))
        ids = [lane_doc(i, 0)["session_id"] for i in range(1, 6)]
    label = ("history: median of the last 5 passing run(s) on lane truth, gpu -, model revision -, engine sglang: "
             + ", ".join(ids)) if not gpu_info() else None
    slow = run_session("--glmf-baseline", "history:5", "-rf", values={"per_user_tok_s": 30.0})
    slow.assert_outcomes(passed=1, failed=1)
    pytest.LineMatcher(unfold(slow.stdout.str()).splitlines()).fnmatch_lines([   # the header folds at 120
        "glmf: lane=truth launcher=attach * baseline=history results=*",
        "glmf: history=* baseline=median of the last 5 passing runs slow drift=warn over 5 runs",
        "*1 regression(s) against the baseline (history: median of the last 5 passing run(s) on lane truth, gpu *"
        f"engine sglang: {', '.join(ids)})",
        # the allowed change is the runs' own spread, 41..45 around 43 (9.3 %), wider than the 5 % tolerance
        "curve.per_user_tok_s [[]users=48[]] | 43.0     | 30.0 | -13 (-30.2 %) | drop <= 4 (9.3 %)",
        f"Baseline: {label or '*'}",
    ])
    doc = json.loads(result_file(pytester).read_text())
    assert [r["session_id"] for r in doc["compared_with"]["runs"]] == ids
    # inside the runs' own spread (41..45 around 43: 9.3 %) a lower number is not a regression
    pytester.path.joinpath("results").joinpath(result_file(pytester).name).unlink()
    run_session("--glmf-baseline", "history", values={"per_user_tok_s": 39.5}).assert_outcomes(passed=2)


def test_history_baseline_with_no_stored_run_compares_nothing_and_says_so(pytester, run_session) -> None:
    result = run_session("--glmf-baseline", "history:3")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["glmf: history baseline: no passing run stored yet on lane truth, gpu *: nothing "
                                 "to compare against (this run starts the history)"])


# ---------------------------------------------------------------------------- slow drift


@pytest.fixture
def drifting(pytester: pytest.Pytester, lane_doc: Callable[..., dict[str, Any]]) -> Callable[[int], None]:
    """Stored runs: six flat around 50 tok/s, then `worse` runs each 2 % below the one before (no
    step beyond the 5 % tolerance)."""
    def seed(worse: int) -> None:
        values = [50.0, 50.1, 49.9, 50.05, 49.95, 50.02] + [50.0 * 0.98 ** n for n in range(1, worse + 1)]
        with open_store(parse_location(None, pytester.path, pytester.path / "results")) as store:
            for i, v in enumerate(values):
                store.add_run(lane_doc(i, v))
    return seed


def test_a_slow_drift_is_a_warning_by_default(pytester, run_session, drifting) -> None:
    drifting(4)
    result = run_session(values={"per_user_tok_s": 50.0 * 0.98 ** 5})     # the 5th worse run
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines([
        "*GlmfDriftWarning: slow drift: 1 metric(s) worse over the last 5 runs than the 5 before (lane truth, gpu *; "
        "rank test p < 0.01, median shift beyond the tolerance)",
        "*metric * | median before | median last | change | allowed | p * | series (oldest first)",
        "*curve.per_user_tok_s [[]users=48[]] | 50.0 * | 47.1 * | -5.9 % | 5.0 % * | 0.00397 | 50.1 49.9 50.0 50.0 "
        "50.0 49.0 48.0 47.1 46.1 45.2",
        "*(a failure instead: --glmf-history-drift fail)",
    ])


def test_a_slow_drift_fails_the_test_when_asked(pytester, run_session, drifting) -> None:
    drifting(4)
    result = run_session("--glmf-history-drift", "fail", values={"per_user_tok_s": 50.0 * 0.98 ** 5})
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*slow drift: 1 metric(s) worse over the last 5 runs than the 5 before (lane truth*",
                                 "*(--glmf-history-drift fail; a warning only: --glmf-history-drift warn)"])


def test_one_night_earlier_the_drift_is_not_yet_material(pytester, run_session, drifting) -> None:
    drifting(3)
    result = run_session("--glmf-history-drift", "fail:5", values={"per_user_tok_s": 50.0 * 0.98 ** 4})
    result.assert_outcomes(passed=2)           # medians 4 % apart: inside the 5 % tolerance
    assert "GlmfDriftWarning" not in result.stdout.str()


def test_ini_twins(pytester, run_session, unfold) -> None:
    pytester.makeini("[pytest]\nglmf_history = off\n")
    run_session().assert_outcomes(passed=2)
    assert not default_store(pytester).exists()
    pytester.makeini(f"[pytest]\nglmf_history = {pytester.path / 'team.sqlite'}\nglmf_history_drift = fail:6\n"
                     "glmf_history_required = true\n")
    result = run_session()
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        f"glmf: history={pytester.path / 'team.sqlite'} slow drift=fail over 6 runs required"])
    assert len(stored(pytester.path / "team.sqlite", pytester.path)) == 1
    pytester.makeini("[pytest]\nglmf_history_drift = sometimes\n")
    run_session().stderr.fnmatch_lines(["ERROR: glmf_history_drift (ini): 'sometimes' is not one of warn, fail, off*"])


def test_drift_option_errors(pytester, run_session) -> None:
    result = run_session("--glmf-history-drift", "loud")
    result.stderr.fnmatch_lines(["ERROR: --glmf-history-drift: 'loud' is not one of warn, fail, off, optionally with "
                                 ":K, the number of runs compared with the K before (K >= 3), e.g. fail:6"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = run_session("--glmf-baseline", "history:0")
    result.stderr.fnmatch_lines(["ERROR: --glmf-baseline: 'history:0': the history form is history or history:K "
                                 "with K >= 1 (the number of passing runs whose median is the baseline), e.g. history:5"])
    result = run_session("--glmf-baseline", "history", "--glmf-history", "off")
    result.stderr.fnmatch_lines(["ERROR: --glmf-baseline history needs a history store, but --glmf-history is off"])
    result = run_session("--glmf-history", "mysql://db/x")
    result.stderr.fnmatch_lines(["ERROR: --glmf-history: 'mysql' is not a store this plugin knows; expected a SQLite "
                                 "file path, sqlite:///PATH[[]?timeout=S[]], postgresql://USER@HOST:PORT/DB, or off"])


# ---------------------------------------------------------------------------- a store that is down


def test_a_corrupt_store_costs_one_line_and_the_run_is_stored_by_the_next_session(pytester, run_session) -> None:
    store = default_store(pytester)
    store.parent.mkdir(parents=True)
    store.write_text("not a database " * 500)
    result = run_session()
    result.assert_outcomes(passed=2)
    first = result_file(pytester)
    result.stdout.fnmatch_lines([
        f"glmf: history NOT stored: history store {store}: opening: not a readable SQLite database (file is not a "
        "database): move the file away (the next session starts a new store) and re-import the result files with "
        f"`glmf history import DIR`; the results are in {first}, queued for the next session (or: glmf history "
        f"import {pytester.path / 'results'})"])
    assert json.loads(first.read_text())["gates"]["curve"]["users=48"]["per_user_tok_s"] == 50.0
    store.rename(store.with_suffix(".broken"))
    again = run_session()
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["glmf: history: run * (passed) stored in * (+1 earlier run(s) that were queued)"])
    assert len(stored(store, pytester.path)) == 2
    assert not list((pytester.path / "results" / ".history-pending").iterdir())


def test_a_newer_schema_is_left_alone_with_one_line(pytester, run_session) -> None:
    location = parse_location(None, pytester.path, pytester.path / "results")
    open_store(location).close()
    with sqlite3.connect(location.target) as conn:
        conn.execute("UPDATE glmf_schema SET version = 99")
    result = run_session()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"glmf: history NOT stored: history store {location.target} has schema version 99; "
                                 "this pytest-glmf knows versions up to 1: upgrade pytest-glmf or point --glmf-history "
                                 "at another store (nothing was written to it); the results are in *"])


@pytest.mark.postgres
def test_a_wrong_postgres_password_costs_one_line_and_never_shows_the_password(pytester, run_session, pg_url,
                                                                              unfold) -> None:
    wrong = pg_url.replace(":" + pg_url.split(":")[2].split("@")[0] + "@", ":Wr0ng-Passw0rd@")
    result = run_session("--glmf-history", wrong)
    result.assert_outcomes(passed=2)
    masked = wrong.replace("Wr0ng-Passw0rd", "***")
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        f"glmf: history={masked} slow drift=warn over 5 runs",
        f"glmf: history NOT stored: history store {masked}: connecting: connection failed: *"
        "password authentication failed for user *; the results are in *"])
    everything = result.stdout.str() + result.stderr.str() + "".join(
        p.read_text() for p in (pytester.path / "results").rglob("*") if p.is_file() and p.suffix in (".json", ".md"))
    assert "Wr0ng-Passw0rd" not in everything
    # the queued run reaches the right store with the next session
    run_session("--glmf-history", pg_url).stdout.fnmatch_lines(["*(+1 earlier run(s) that were queued)"])
    assert len(stored(pg_url, pytester.path)) == 2


def test_required_store_stops_the_session_before_it_starts(pytester, run_session) -> None:
    store = default_store(pytester)
    store.parent.mkdir(parents=True)
    store.write_text("junk " * 1000)
    result = run_session("--glmf-history-required")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --glmf-history-required: history store {store}: opening: not a readable "
                                 "SQLite database*"])


def test_required_store_that_fails_at_the_end_fails_the_session(pytester, run_session) -> None:
    location = parse_location(None, pytester.path, pytester.path / "results")
    open_store(location).close()
    holder = sqlite3.connect(location.target, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")                 # another writer that never lets go
    try:
        result = run_session("--glmf-history-required", "--glmf-history", f"sqlite:///{location.target}?timeout=1")
    finally:
        holder.execute("ROLLBACK")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["glmf: history NOT stored: history store *: storing run *: the file stayed locked by "
                                 "another process for more than 1 s (database is locked); the results are in *"])


def test_a_killed_session_is_stored_as_incomplete_by_the_next_one(pytester, session_args, run_session) -> None:
    import os
    import signal
    import time

    env = {**os.environ, "BARRIER": str(pytester.path / "never"), "BARRIER_N": "2"}
    (pytester.path / "never").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *session_args], cwd=pytester.path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list((pytester.path / "never").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)                            # the first test is done, the second waits
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run_session().stdout.fnmatch_lines(["*(+1 earlier run(s) that were queued)"])
    runs = stored(default_store(pytester), pytester.path)
    assert sorted(r.verdict for r in runs) == ["incomplete", "passed"]
    (killed,) = [r for r in runs if r.verdict == "incomplete"]
    assert killed.incomplete[0].endswith("died without a clean stop (killed)")
