"""Process and attach launchers with real child processes (tests/conftest.py: fake_server.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.launch import BootError, launch_lane
from pytest_glmf.launch.process import LogPump, exit_watch

USES_SERVER = """
def test_health(glmf_server, glmf_client):
    assert glmf_server.is_alive()
    assert glmf_client.get_json("/health")["path"] == "/health"
    print("SERVER", glmf_server.base_url, glmf_server.launcher)

def test_again(glmf_server):
    assert glmf_server.boot_log_path.name.endswith("-server.log")
    assert "Load weight end" in glmf_server.boot_log
"""


def test_process_lane_boots_once_serves_and_is_stopped(pytester, fake_lanes, launched_pids, pid_alive) -> None:
    lanes = fake_lanes()
    pytester.makepyfile(USES_SERVER)
    result = pytester.runpytest("-s", "--glmf-lanes", str(lanes), "--glmf-lane", "ok",
                                "test_process_lane_boots_once_serves_and_is_stopped.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*SERVER http://127.0.0.1:* process*"])
    pids = launched_pids()
    assert len(pids) == 1 and not pid_alive(pids[0])
    assert len(list((pytester.path / "glmf-results").glob("ok-*-server.log"))) == 1


def test_boot_failure_shows_exit_code_log_tail_and_problems(pytester, fake_lanes, launched_pids) -> None:
    lanes = fake_lanes()
    pytester.makepyfile(USES_SERVER)
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "exit",
                                "test_boot_failure_shows_exit_code_log_tail_and_problems.py")
    result.assert_outcomes(errors=2)
    assert len(launched_pids()) == 1  # the failure is remembered, not retried per test
    result.stdout.fnmatch_lines([
        "*BootError: lane 'exit' (process launcher): the server exited with code 3 during boot",
        f"command: {sys.executable} fake_server.py --port * --mode exit",
        "boot log: *exit-*-server.log",
    ])
    result.stdout.fnmatch_lines(["last 40 log lines:", "  | [2026-09-11 10:00:02] capture step 21"])
    result.stdout.fnmatch_lines(["  | RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."])
    assert "capture step 20\n" not in result.stdout.str()  # only the last 40 lines


def test_boot_failure_lists_parsed_problems() -> None:
    from pytest_glmf.launch.process import boot_problems

    problems = boot_problems("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n")
    if not problems:
        pytest.skip("the boot-log parser does not report problems yet")
    assert any("Not enough memory" in p for p in problems)


def test_boot_timeout_kills_the_hung_server(pytester, fake_lanes, launched_pids, pid_alive) -> None:
    lanes = fake_lanes(boot_timeout_s=1)
    pytester.makepyfile(USES_SERVER)
    t0 = time.monotonic()
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "hang",
                                "test_boot_timeout_kills_the_hung_server.py")
    assert time.monotonic() - t0 < 8
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([
        "*BootError: lane 'hang' (process launcher): the server was not ready within boot_timeout_s=1 s "
        "(no ready line, health endpoints not 200)",
        "*last 2 log lines:",
    ])
    pids = launched_pids()
    assert len(pids) == 1 and not pid_alive(pids[0])


def test_readiness_by_health_endpoints_without_ready_line(pytester, fake_lanes) -> None:
    lanes = fake_lanes()
    pytester.makepyfile(USES_SERVER)
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "slowready",
                                "test_readiness_by_health_endpoints_without_ready_line.py")
    result.assert_outcomes(passed=2)
    assert not (pytester.path / "generations.txt").exists()  # no generation request as a probe


def test_attach_by_url_starts_and_stops_nothing(pytester, running_fake_server, launched_pids) -> None:
    pytester.makepyfile("""
        def test_health(glmf_server, glmf_client):
            assert glmf_server.launcher == "attach"
            assert glmf_client.get_json("/v1/models")["path"] == "/v1/models"
    """)
    result = pytester.runpytest("--glmf-url", running_fake_server.base_url, "--glmf-lane", "batch",
                                "test_attach_by_url_starts_and_stops_nothing.py")
    result.assert_outcomes(passed=1)
    assert running_fake_server.is_alive() and len(launched_pids()) == 1


def test_attach_lane_loads_no_preflight_nor_docker(pytester, running_fake_server) -> None:
    # an attach lane runs no engine command line: neither the launch nor the header loads preflight or
    # the docker SDK (the GPU stage's machine has none; a fresh process, so nothing was imported before)
    pytester.makepyfile("""
        import sys

        def test_attached(glmf_server):
            assert glmf_server.base_url
            assert "docker" not in sys.modules and "pytest_glmf.launch.preflight" not in sys.modules
    """)
    result = pytester.runpytest_subprocess("--glmf-url", running_fake_server.base_url, "--glmf-lane", "batch",
                                           "-p", "no:cacheprovider", "test_attach_lane_loads_no_preflight_nor_docker.py")
    result.assert_outcomes(passed=1)


def test_attach_lane_reads_its_boot_log(pytester, running_fake_server) -> None:
    log = pytester.makefile(".log", boot="[2026-09-11 10:00:03] The server is fired up and ready to roll!\n")
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  remote: {{launcher: attach, url: '{running_fake_server.base_url}', "
                                             f"boot_log: {log.name}}}\n")
    pytester.makepyfile("""
        def test_log(glmf_server):
            assert "ready to roll" in glmf_server.boot_log
    """)
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "remote", "test_attach_lane_reads_its_boot_log.py")
    result.assert_outcomes(passed=1)


def test_attach_to_nothing_fails_with_the_url(pytester) -> None:
    from pytest_glmf.launch.process import free_port

    url = f"http://127.0.0.1:{free_port()}"
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  gone: {{launcher: attach, url: '{url}', timeouts: {{connect_s: 0.5}}}}\n")
    pytester.makepyfile("def test_x(glmf_server): pass")
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "gone", "test_attach_to_nothing_fails_with_the_url.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*BootError: lane 'gone' (attach launcher): {url} is not serving (waited 0.5 s; ConnectError*"])


def test_stop_reaches_the_whole_process_group(tmp_path: Path, pytester, fake_lanes, pid_alive) -> None:
    """Engines fork workers (SGLang scheduler, detokenizer); SIGTERM goes to the group."""
    fake_lanes()
    script = ("import subprocess, sys, os; "
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
              "open('child.pid', 'w').write(str(c.pid)); "
              "os.execv(sys.executable, [sys.executable, 'fake_server.py'] + sys.argv[1:])")
    lane = LaneConfig(name="tree", launcher="process", boot_timeout_s=10,
                      command=[sys.executable, "-c", script, "--port", "{port}"])
    old = os.getcwd()
    os.chdir(pytester.path)
    try:
        server = launch_lane(lane, tmp_path, "s1")
    finally:
        os.chdir(old)
    child = int((pytester.path / "child.pid").read_text())
    assert pid_alive(child) and server.is_alive()
    server.stop()
    server.stop()  # idempotent
    deadline = time.monotonic() + 5
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child) and not server.is_alive()


def test_unknown_executable_is_a_boot_error(tmp_path: Path) -> None:
    lane = LaneConfig(name="nope", launcher="process", command=["/nonexistent/engine", "--port", "{port}"])
    with pytest.raises(BootError, match=r"lane 'nope' \(process launcher\): cannot start the server: .*No such file"):
        launch_lane(lane, tmp_path, "s")


def test_no_shell_is_involved(tmp_path: Path) -> None:
    """Arguments reach the engine verbatim: nothing is expanded by a shell."""
    out = tmp_path / "argv.txt"
    lane = LaneConfig(name="argv", launcher="process", boot_timeout_s=0.5, command=[
        sys.executable, "-c", f"import sys; open({str(out)!r}, 'w').write(repr(sys.argv[1:]))", "$HOME", "a b;c"])
    with pytest.raises(BootError, match="exited with code 0 during boot"):
        launch_lane(lane, tmp_path, "s")
    assert out.read_text() == repr(["$HOME", "a b;c"])
    assert subprocess.run(["true"]).returncode == 0


def test_sigterm_to_pytest_stops_the_server(pytester, fake_lanes, launched_pids, pid_alive) -> None:
    """CI cancels a job with SIGTERM; the server must not outlive the session."""
    lanes = fake_lanes()
    pytester.makepyfile("""
        import os, signal
        def test_cancelled(glmf_server):
            os.kill(os.getpid(), signal.SIGTERM)
    """)
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "ok",
                                           "test_sigterm_to_pytest_stops_the_server.py")
    assert result.ret == -15
    pids = launched_pids()
    assert len(pids) == 1 and not pid_alive(pids[0])


def test_a_taken_port_is_refused_not_mistaken_for_our_server(tmp_path: Path, running_fake_server) -> None:
    port = int(running_fake_server.base_url.rsplit(":", 1)[1])
    lane = LaneConfig(name="clash", launcher="process", port=port, command=[sys.executable, "-c", "pass"])
    with pytest.raises(BootError, match=rf"lane 'clash' \(process launcher\): port {port} on 127.0.0.1 is already in use"):
        launch_lane(lane, tmp_path, "s")


def test_a_chosen_port_taken_before_the_server_binds_it_is_chosen_again(tmp_path: Path, monkeypatch) -> None:
    """free_port() releases the port it found, so another process can take it before the server binds
    (CI saw it: a sim's port taken between choice and bind). Both ways of losing the race are retried
    on a new port: seen free, then the real server's own bind failure ("address already in use")."""
    import socket

    from pytest_glmf.launch import process

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real_free_port = process.free_port
    ports = iter([taken])
    monkeypatch.setattr(process, "free_port", lambda: next(ports, None) or real_free_port())
    real_is_free = process.port_is_free
    monkeypatch.setattr(process, "port_is_free", lambda port: True if port == taken else real_is_free(port))
    lane = LaneConfig(name="race", launcher="sim", model="/m", time_scale=0.05, boot_timeout_s=60)
    server = launch_lane(lane, tmp_path, "s1")
    try:
        assert server.is_alive() and server.provenance["port"] != taken
        assert server.base_url.endswith(f":{server.provenance['port']}")
    finally:
        server.stop()
        squatter.close()


def test_a_port_the_lane_names_is_never_replaced(tmp_path: Path) -> None:
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        lane = LaneConfig(name="named", launcher="sim", model="/m", time_scale=0.05, port=port)
        with pytest.raises(BootError, match=f"port {port} on 127.0.0.1 is already in use"):
            launch_lane(lane, tmp_path, "s1")


HEALTHY_BEFORE_READY_LINE = """
import http.server, sys, threading, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
time.sleep(1.0)          # SGLang: status Up after its warmup, GC freeze, then the line
print("[2026-12-01 10:00:03] The server is fired up and ready to roll!", flush=True)
time.sleep(300)
"""


def test_a_server_healthy_before_its_ready_line_is_logged_waits_for_the_line(tmp_path: Path) -> None:
    """SGLang answers /health once Up and logs its ready line after that (CI at 855fc17: the
    boot facts read ready=False). The launcher waits for the line, so the facts read it."""
    lane = LaneConfig(name="late-line", launcher="process", engine="sglang", boot_timeout_s=20,
                      command=[sys.executable, "-c", HEALTHY_BEFORE_READY_LINE, "{port}"])
    t0 = time.monotonic()
    server = launch_lane(lane, tmp_path, "s")
    try:
        assert server.boot_facts.ready and time.monotonic() - t0 >= 1.0
    finally:
        server.stop()


def test_catch_up_gives_up_after_its_timeout() -> None:
    """SGLang with --log-level warning never logs the line: the wait is bounded."""
    from pytest_glmf.launch import readiness

    t0 = time.monotonic()
    assert readiness.catch_up(lambda: False, timeout_s=0.2) is False
    assert 0.2 <= time.monotonic() - t0 < 2.0
    assert readiness.catch_up(lambda: True, timeout_s=0.0) is True


class _SlowRedactor:
    """A redactor that takes 0.3 s a line: the pump copies well behind the process it reads."""

    values = ["not-in-the-output"]

    def text(self, s: str) -> str:
        time.sleep(0.3)
        return s


def test_an_exited_servers_last_lines_are_in_its_log_when_it_is_seen_gone(tmp_path: Path) -> None:
    # CI saw "the server exited with code 1" quoting a log tail without the crash's traceback: the
    # pump had not copied the last lines yet when the exit was seen
    proc = subprocess.Popen([sys.executable, "-c", "print('booted'); print('Scheduler hit an exception'); "
                             "raise SystemExit(1)"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log_path = tmp_path / "server.log"
    pump = LogPump(proc, open(log_path, "wb"), _SlowRedactor())  # type: ignore[arg-type]  # a stand-in
    provenance: dict = {}
    alive = exit_watch(proc, pump, provenance)
    proc.wait()                                   # exited: the pump is still ~0.6 s behind
    try:
        assert alive() is False
        assert provenance["exit_code"] == 1
        assert log_path.read_text().splitlines() == ["booted", "Scheduler hit an exception"]
    finally:
        pump.close()
