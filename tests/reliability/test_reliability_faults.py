"""Reliability matrix, server faults: the simulator's injected faults through the plugin (real
pytest subprocesses, real sim processes). Each: the affected test fails or errors with the cause in
one sentence and the server's log tail; once the server is gone the other tests skip with a reason
(they do not hang); what was measured before is in the result file, marked incomplete; no retry
hides a failure. After every case no server process of the session is left (`no_leftovers`)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import psutil
import pytest

LANES = """\
schema: 1
lanes:
  oom: {launcher: sim, time_scale: 0.01, boot_timeout_s: 30, sim_args: [--fault, boot-oom]}
  hang: {launcher: sim, time_scale: 0.01, boot_timeout_s: 2, sim_args: [--fault, boot-hang]}
  crash1: {launcher: sim, time_scale: 0.01, boot_timeout_s: 30, sim_args: [--fault, crash-first-request]}
  batch:
    launcher: sim
    time_scale: 0.01
    boot_timeout_s: 30
    model: /models/GLM-5.3-Flash-NVFP4
    kv: fp8_e4m3
    mem: 0.90
    ctx: 131072
    maxbs: 128
    extra: --max-mamba-cache-size 640 --mamba-ssm-dtype bfloat16
    sim_args: [--fault, crash-after-requests=4]
  notok: {launcher: sim, time_scale: 0.01, boot_timeout_s: 30, sim_args: [--fault, no-tokens]}
  ok:
    launcher: sim
    time_scale: 0.01
    boot_timeout_s: 30
    timeouts: {first_token_s: 1.5, between_tokens_s: 1.5}
"""
CURVE_THRESHOLDS = """\
lanes:
  batch:
    curve:
      settings: {max_tokens: 8, runs: 1, warmup: false, lag_p99_max_s: 1.0, cpu_max_frac: 1.0, client_error_max_pct: 1.0e+9}
      rows:
        - {users: 2, per_user_tok_s: {min: 0.001}}
        - {users: 3, per_user_tok_s: {min: 0.001}}
        - {users: 4, per_user_tok_s: {min: 0.001}}
"""
CHAT = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8}


@pytest.fixture
def lanes(pytester: pytest.Pytester) -> list[str]:
    path = pytester.makefile(".yaml", lanes=LANES)
    return ["-p", "no:cacheprovider", "--glmf-lanes", str(path)]


def our_servers(directory: Path) -> list[psutil.Process]:
    """Simulator processes started from this test's directory (the pytester cwd)."""
    found = []
    for p in psutil.process_iter(["cmdline", "cwd", "status"]):
        cmd = p.info["cmdline"] or []
        if "pytest_glmf.sim" in cmd and p.info["cwd"] == str(directory) and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p)
    return found


@pytest.fixture(autouse=True)
def no_leftovers(pytester: pytest.Pytester):
    yield
    deadline = time.monotonic() + 5
    while our_servers(pytester.path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert our_servers(pytester.path) == [], "a server outlived its session"
    for doc in result_docs(pytester):
        port = doc["provenance"].get("port")
        if port:
            listening = [c for c in psutil.net_connections("tcp")
                         if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
            assert not listening, f"port {port} of the session still listens"


def result_docs(pytester: pytest.Pytester) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((pytester.path / "glmf-results").glob("*-2*.json"))]


def test_boot_oom_errors_every_test_once_with_the_oom_and_marks_the_result_incomplete(pytester, lanes) -> None:
    pytester.makepyfile("def test_a(glmf_server): pass\ndef test_b(glmf_client): pass\n")
    result = pytester.runpytest_subprocess(*lanes, "--glmf-lane", "oom", ".")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["BootError: lane 'oom' (sim launcher): the server exited with code 1 "
                                 "during boot"])
    result.stdout.fnmatch_lines(["problems found in the boot log:", "  - *Not enough memory*",
                                 "last * log lines:"])
    assert len(list((pytester.path / "glmf-results").glob("*-server.log"))) == 1   # no second attempt
    (doc,) = result_docs(pytester)
    assert doc["incomplete"] == ["the server did not boot: BootError: lane 'oom' (sim launcher): the server "
                                 "exited with code 1 during boot"]


def test_boot_hang_stops_at_the_boot_timeout(pytester, lanes) -> None:
    pytester.makepyfile("def test_a(glmf_server): pass\n")
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(*lanes, "--glmf-lane", "hang", ".")
    assert time.monotonic() - t0 < 20
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["BootError: lane 'hang' (sim launcher): the server was not ready "
                                 "within boot_timeout_s=2 s (no ready line, health endpoints not 200)",
                                 "command: * -m pytest_glmf.sim * --fault boot-hang",
                                 "boot log: *hang-*-server.log", "last * log lines:"])
    result.stdout.fnmatch_lines(["  | *Load weight end*"])


def test_crash_on_first_request_fails_that_test_and_skips_the_rest(pytester, lanes) -> None:
    pytester.makepyfile(f"""
        def test_0_models(glmf_client, glmf_results):
            glmf_results.record("user", "models", glmf_client.get_json("/v1/models"))

        def test_1_chat(glmf_client):
            list(glmf_client.stream_events("/v1/chat/completions", {CHAT!r}))

        def test_2_after(glmf_client):
            raise AssertionError("must not run: the server is gone")

        def test_3_no_server():
            pass
    """)
    result = pytester.runpytest_subprocess(*lanes, "--glmf-lane", "crash1", "-rs", ".")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "lane 'crash1': the server exited with code 1 during this test (RemoteProtocolError: *)."])
    result.stdout.fnmatch_lines(["last * lines of the server log *crash1-*-server.log:",
                                 "  | *Scheduler hit an exception*"])
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *glmf: lane 'crash1': the server exited with code 1*"])
    (doc,) = result_docs(pytester)
    assert doc["gates"]["user"]["models"]["data"]              # measured before the crash: kept
    assert doc["provenance"]["exit_code"] == 1
    assert [r.split(" (")[0] for r in doc["incomplete"]] == [
        "lane 'crash1': the server exited with code 1 during this test"]


def test_crash_mid_curve_keeps_the_rows_measured_before(pytester, lanes) -> None:
    th = pytester.makefile(".yaml", th=CURVE_THRESHOLDS)
    result = pytester.runpytest_subprocess(*lanes, "--glmf-lane", "batch", "--glmf-thresholds", str(th),
                                           "-k", "test_curve_row", "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1 and outcomes.get("skipped") == 1, outcomes
    result.stdout.fnmatch_lines(["*test_curve_row?users=3?*",
                                 "lane 'batch': the server exited with code 1 during this test *"])
    result.stdout.fnmatch_lines(["SKIPPED *glmf: lane 'batch': the server exited with code 1*"])
    (doc,) = result_docs(pytester)
    assert set(doc["gates"]["curve"]) >= {"users=2"} and "users=4" not in doc["gates"]["curve"]
    assert doc["incomplete"] and "exited with code 1" in doc["incomplete"][0]


PROTOCOL_TESTS = f"""
import pytest, httpx

def set_faults(client, *faults):
    client._http.post("/sim/faults", json={{"faults": list(faults), "replace": True}}).raise_for_status()

def test_503_burst(glmf_client):
    set_faults(glmf_client, "http-503=1")
    list(glmf_client.stream_events("/v1/chat/completions", {CHAT!r}))

def test_stream_cut(glmf_client):
    set_faults(glmf_client, "stream-cut=2")
    list(glmf_client.stream_events("/v1/chat/completions", {CHAT!r}))

def test_malformed_sse(glmf_client):
    set_faults(glmf_client, "malformed-sse")
    list(glmf_client.stream_events("/v1/chat/completions", {CHAT!r}))

def test_server_still_serves(glmf_client):
    glmf_client._http.delete("/sim/faults").raise_for_status()
    events = [e for _, e in glmf_client.stream_events("/v1/chat/completions", {CHAT!r})]
    assert events

def test_zz_never_a_token(glmf_client):   # last: the simulator stays stalled afterwards
    set_faults(glmf_client, "slow=100000")
    list(glmf_client.stream_events("/v1/chat/completions", {CHAT!r}))
"""


def test_protocol_faults_fail_their_test_in_one_sentence_without_retry(pytester, lanes) -> None:
    """One server, faults switched at run time: each broken request fails its own test (a 503 that
    a retry would have hidden stays a failure: the next request would have been served)."""
    pytester.makepyfile(PROTOCOL_TESTS)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(*lanes, "--glmf-lane", "ok", ".")
    assert time.monotonic() - t0 < 40
    result.assert_outcomes(failed=4, passed=1)
    result.stdout.fnmatch_lines([
        "lane 'ok': the server answered with an error status (POST /v1/chat/completions -> HTTP 503: "
        "*overloaded*) at test_*.py:8; no retry was made.",
        "last * lines of the server log *ok-*-server.log:"])
    result.stdout.fnmatch_lines([
        "lane 'ok': the server dropped the connection mid-response (peer closed connection without "
        "sending complete message body*) at test_*.py:12; no retry was made."])
    result.stdout.fnmatch_lines([
        "lane 'ok': the server sent a malformed event stream (malformed SSE data line: *) at test_*.py:16; "
        "no retry was made."])
    result.stdout.fnmatch_lines([
        "lane 'ok': the server did not answer in time (ReadTimeout: *) at test_*.py:25; no retry was made."])
    (doc,) = result_docs(pytester)
    assert len(doc["incomplete"]) == 4 and all("no retry was made" in r for r in doc["incomplete"])


def test_no_tokens_and_stalls_fail_the_curve_row_not_hang_it(pytester, lanes) -> None:
    """A server that answers but never sends a token: the curve's first-token timeout (from the
    lane's `timeouts`) ends the row with the reason per request, well before any default."""
    th = pytester.makefile(".yaml", th="lanes:\n  ok:\n    curve:\n      settings: {max_tokens: 8, runs: 1, "
                                       "warmup: false}\n      rows:\n        - {users: 2}\n")
    pytester.makepyfile(stall_plugin="""
        import httpx, pytest
        @pytest.fixture(autouse=True)
        def stall(glmf_server):
            httpx.post(glmf_server.base_url + "/sim/faults", json={"faults": ["slow=100000"]}).raise_for_status()
    """)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(*lanes, "--glmf-lane", "ok", "--glmf-thresholds", str(th),
                                           "--pyargs", "pytest_glmf.suites", "-k", "test_curve_row", "-p",
                                           "stall_plugin")
    elapsed_s = time.monotonic() - t0
    result.assert_outcomes(failed=1)
    assert elapsed_s < 30
    result.stdout.fnmatch_lines(["*no token within 1.5 s*"])


def test_answers_without_tokens_fail_the_curve_row_with_the_reason(pytester, lanes) -> None:
    """A server that answers at once with zero tokens (HTTP 200, a finished stream): every request is
    a failed request with its reason, never a fast row."""
    th = pytester.makefile(".yaml", th="lanes:\n  notok:\n    curve:\n      settings: {max_tokens: 8, runs: 1, "
                                       "warmup: false}\n      rows:\n        - {users: 2}\n")
    result = pytester.runpytest_subprocess(*lanes, "--glmf-lane", "notok", "--glmf-thresholds", str(th),
                                           "-k", "test_curve_row")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["failed requests @ 2 users*| 2 *| <= 0 *| +2; no content chunk*"])
