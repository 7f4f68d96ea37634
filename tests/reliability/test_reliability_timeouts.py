"""Reliability matrix, timeouts: boot, connect, first token, between tokens and per gate, each set
per lane (`boot_timeout_s`, `timeouts: {connect_s, first_token_s, between_tokens_s, gate_s}`), with
finite defaults; a stuck server or test never stalls the session beyond them. (Boot hang: the
faults matrix; first token on the client and the curve: the faults matrix too.)"""
from __future__ import annotations

import socket
import time

import pytest

from pytest_glmf.config.lanes import TIMEOUT_KEYS, LaneConfig
from pytest_glmf.engine.client import Timeouts
from pytest_glmf.launch import health


def test_every_timeout_has_a_finite_default() -> None:
    lane = LaneConfig(name="x")
    client = Timeouts()
    defaults = {"boot_timeout_s": lane.boot_timeout_s, "connect_s": client.connect_s,
                "first_token_s": client.first_token_s, "between_tokens_s": client.between_tokens_s,
                "gate_s": health.DEFAULT_GATE_S}
    assert defaults == {"boot_timeout_s": 1800.0, "connect_s": 10.0, "first_token_s": 600.0,
                        "between_tokens_s": 60.0, "gate_s": 3600.0}
    assert set(TIMEOUT_KEYS) <= set(defaults)


def test_gate_timeout_stops_a_stuck_test_and_the_session_goes_on(pytester: pytest.Pytester) -> None:
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  ok: {launcher: sim, time_scale: 0.01, boot_timeout_s: 30, "
                                             "timeouts: {gate_s: 1}}\n")
    pytester.makepyfile("""
        import time

        def test_stuck(glmf_server):
            time.sleep(60)

        def test_next(glmf_client):
            assert glmf_client.get_json("/v1/models")["data"]

        def test_no_server():
            time.sleep(1.5)     # the gate limit is for tests on the server only
    """)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane",
                                           "ok", ".")
    assert time.monotonic() - t0 < 30
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(["lane 'ok': test test_gate_timeout_stops_a_stuck_test_and_the_session_goes_on.py::"
                                 "test_stuck ran longer than timeouts.gate_s=1 s and was stopped at "
                                 "test_gate_timeout_stops_a_stuck_test_and_the_session_goes_on.py:4; "
                                 "no retry was made."])


def test_gate_timer_leaves_a_foreign_alarm_alone() -> None:
    """pytest-timeout (signal method) owns SIGALRM when it is used: the gate timer steps aside."""
    import signal

    def foreign(signum, frame):  # pragma: no cover - never fires here
        raise AssertionError

    previous = signal.signal(signal.SIGALRM, foreign)
    try:
        with health.gate_timer(0.05, "x"):
            time.sleep(0.15)
        assert signal.getsignal(signal.SIGALRM) is foreign
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_gate_timer_fires_and_restores() -> None:
    import signal

    before = signal.getsignal(signal.SIGALRM)
    t0 = time.monotonic()
    with pytest.raises(health.GateTimeout, match=r"^work ran longer than timeouts.gate_s=0.2 s and was stopped$"):
        with health.gate_timer(0.2, "work"):
            time.sleep(5)
    assert time.monotonic() - t0 < 1.0
    assert signal.getsignal(signal.SIGALRM) == before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_connect_timeout_bounds_attaching_to_a_silent_listener(pytester: pytest.Pytester) -> None:
    """A port that accepts connections and never answers (a wedged server): the attach launcher
    gives up after the lane's connect_s, not after its per-probe HTTP timeouts."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  wedged: {{launcher: attach, url: 'http://127.0.0.1:{port}', "
                                                 "timeouts: {connect_s: 1}}\n")
        pytester.makepyfile("def test_x(glmf_server): pass\n")
        t0 = time.monotonic()
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes),
                                               "--glmf-lane", "wedged", ".")
        elapsed_s = time.monotonic() - t0
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"BootError: lane 'wedged' (attach launcher): http://127.0.0.1:{port} is not "
                                 "serving (waited 1 s; ReadTimeout: timed out)"])
    assert elapsed_s < 15


def test_between_tokens_timeout_ends_a_stalled_stream_in_the_curve(pytester: pytest.Pytester) -> None:
    """The stream starts, then the server stalls mid-answer: the lane's between_tokens_s ends it."""
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  ok: {launcher: sim, time_scale: 0.5, boot_timeout_s: 30, "
                                             "sim_args: [--autotune-s, '0'], "
                                             "timeouts: {first_token_s: 30, between_tokens_s: 1}}\n")
    th = pytester.makefile(".yaml", th="lanes:\n  ok:\n    curve:\n      settings: {max_tokens: 600, runs: 1, "
                                       "warmup: false}\n      rows:\n        - {users: 1}\n")
    pytester.makepyfile(stall_plugin="""
        import threading, time, httpx, pytest

        @pytest.fixture(autouse=True)
        def stall_mid_stream(glmf_server):
            def later():
                time.sleep(0.8)   # tokens are flowing by then (600 tokens take ~2 s at this scale)
                httpx.post(glmf_server.base_url + "/sim/faults", json={"faults": ["slow=100000"]})
            threading.Thread(target=later, daemon=True).start()
    """)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane", "ok",
                                           "--glmf-thresholds", str(th), "-p", "stall_plugin", "-k", "test_curve_row")
    assert time.monotonic() - t0 < 40
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*stream stalled for 1 s*"])
