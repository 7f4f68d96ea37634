"""The process launcher: run the engine as a child process on this machine.

argv is a list (never a shell), the child gets its own process group so stop() reaches every
worker it forks, stdout+stderr stream to a log file under the results dir, and readiness is the
one rule of `readiness.py` within `boot_timeout_s`. From its start the server is in the cleanup
registry (`cleanup.py`): a SIGTERM or an exit mid-boot stops it too.
"""
from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import httpx

from pytest_glmf.config.lanes import LaneConfig, build_server_argv
from pytest_glmf.gates.boot.parse import parse_boot_log
from pytest_glmf.launch import cleanup, readiness
from pytest_glmf.launch.base import BootError, Server, log_tail_lines
from pytest_glmf.redact import Redactor

name = "process"

STOP_GRACE_S = 15.0
DRAIN_S = 2.0            # an exited server's last lines reach its log within this (workers it forked may hold the pipe)
URGENT_GRACE_S = 5.0     # on SIGTERM, or when a boot failed: CI's SIGKILL may follow soon


def free_port() -> int:
    """A port nobody listens on right now (bind 127.0.0.1:0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers do not count
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class PortTaken(BootError):
    """The lane's port was taken before the server could bind it."""


def _bind_failed(log_path: Path) -> bool:
    """The server's own words for a lost port race (uvicorn, which SGLang, vLLM and the simulator
    serve with: "[Errno 98] ... address already in use")."""
    with open(log_path, "rb") as log:
        log.seek(0, os.SEEK_END)
        log.seek(max(0, log.tell() - 16384))
        return b"address already in use" in log.read().lower()


def run_on_free_port(lane: LaneConfig, make_argv: Callable[[LaneConfig], list[str]], results_dir: Path,
                     session_id: str, launcher: str, attempts: int = 3) -> Server:
    """`run` on the lane's own port, or on a free one it did not name. A free port is found by
    binding port 0 and releasing it, so another process (a client's outgoing connection among
    them: they share the ephemeral range) can take it before the server binds it; then a new port
    is chosen, a few times. A port the lane names is used as written, once."""
    if lane.port is not None:
        return run(lane, make_argv(lane), results_dir, session_id, launcher)
    for attempt in range(attempts):
        chosen = replace(lane, port=free_port())
        try:
            return run(chosen, make_argv(chosen), results_dir, session_id, launcher)
        except PortTaken:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def boot_problems(text: str) -> list[str]:
    """Problems the boot-log parser finds; never lets a parser bug hide the real boot failure."""
    try:
        return list(parse_boot_log(text).problems)
    except Exception:  # noqa: BLE001 - the parser may be incomplete; the log tail still tells the story
        return []


# argparse's last word before exit 2: "PROG: error: MESSAGE" after a "usage: PROG ..." dump
_ARGPARSE_ERROR = re.compile(r"^(?P<prog>\S[^:]*): error: (?P<message>.+)$")


def argparse_refusal(text: str) -> str | None:
    """The line an engine's argument parser ended the boot with (the usage dump before it is
    noise: the real error used to be the 40th line of the tail), None when it did not."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines or not any(ln.startswith("usage:") for ln in lines):
        return None
    m = _ARGPARSE_ERROR.match(lines[-1])
    return f"{m['prog']}: error: {m['message']}" if m else None


def boot_error(lane: LaneConfig, launcher: str, what: str, argv: list[str] | None, log_path: Path | None) -> BootError:
    text = log_path.read_text(errors="replace") if log_path is not None and log_path.exists() else ""
    refused = argparse_refusal(text)
    if refused is not None:   # one line says it: the parser's own words, not its usage dump
        what = f"{what}: its argument parser refused the command line ({refused})"
    lines = [f"lane {lane.name!r} ({launcher} launcher): {what}"]
    if argv:
        lines.append("command: " + " ".join(Redactor.from_environment(lane.env, argv).argv(argv)))
    if log_path is not None:
        lines.append(f"boot log: {log_path}")
        problems = boot_problems(text)
        if problems:
            lines.append("problems found in the boot log:")
            lines += [f"  - {p}" for p in problems]
        tail = [] if refused is not None else log_tail_lines(log_path)
        if refused is None:
            lines.append(f"last {len(tail)} log lines:" if tail else "the boot log is empty")
        lines += [f"  | {line}" for line in tail]
    return BootError("\n".join(lines))


def wait_ready(proc: subprocess.Popen[bytes], base_url: str, lane: LaneConfig, log_path: Path,
               argv: list[str], launcher: str) -> None:
    deadline = time.monotonic() + lane.boot_timeout_s
    next_http = 0.0
    answers = ""
    line = readiness.ready_line(lane.engine)
    seen = False
    scanned = 0  # bytes of the log already searched for the ready line (boot logs reach megabytes)
    overlap = len(line or "")
    with httpx.Client(timeout=httpx.Timeout(readiness.PROBE_TIMEOUT_S)) as client, open(log_path, "rb") as log:
        def logged() -> bool:      # the ready line in the part of the log not searched yet
            nonlocal scanned
            log.seek(max(0, scanned - overlap))
            chunk = log.read()
            scanned = max(scanned, log.tell())
            return line is not None and line.encode() in chunk

        while True:
            if proc.poll() is not None:
                error = boot_error(lane, launcher, f"the server exited with code {proc.returncode} during boot",
                                   argv, log_path)
                raise PortTaken(str(error)) if _bind_failed(log_path) else error
            if line is not None and not seen:
                seen = logged()
            now = time.monotonic()
            if seen or now >= next_http:
                ready, answers = readiness.probe(client, base_url, seen)
                if ready:
                    if line is not None and not seen:
                        readiness.catch_up(logged)
                    return
                next_http = now + 0.5
            if now > deadline:
                why = f"its ready line was logged, but {answers}" if seen else "no ready line, health endpoints not 200"
                raise boot_error(lane, launcher, f"the server was not ready within boot_timeout_s="
                                 f"{lane.boot_timeout_s:g} s ({why})", argv, log_path)
            time.sleep(0.1)


def _die_with_parent() -> None:
    """Runs in the child before exec (Linux): the server gets SIGTERM when the pytest process that
    started it dies, even by SIGKILL or the OOM killer, when no handler of ours can run."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def stop_process(proc: subprocess.Popen[bytes], log: "IO[bytes] | LogPump", grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to the whole process group, SIGKILL after the grace period."""
    try:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        # the leader may be gone while workers it forked still hold the group: kill what is left
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    finally:
        log.close()


class LogPump:
    """Copies the server's stdout+stderr into the log file line by line, secrets masked."""

    def __init__(self, proc: subprocess.Popen[bytes], out: IO[bytes], redactor: Redactor) -> None:
        self.out = out
        self.redactor = redactor
        self.stream = proc.stdout
        self.thread = threading.Thread(target=self._run, name=f"glmf-log-{proc.pid}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        assert self.stream is not None
        try:
            for raw in iter(self.stream.readline, b""):
                if self.redactor.values:
                    raw = self.redactor.text(raw.decode("utf-8", errors="replace")).encode("utf-8")
                self.out.write(raw)
                self.out.flush()
        except (OSError, ValueError):
            pass                 # the file was closed under us: the server is being stopped

    def drain(self, within_s: float = DRAIN_S) -> None:
        """Wait (at most `within_s`) until everything the exited server wrote is in the log file: the
        pump copies behind the process, so its last lines (a crash's traceback) can lag its exit."""
        self.thread.join(within_s)

    def close(self) -> None:
        self.thread.join(5.0)    # the server is gone: its pipe ends, the pump drains and returns
        self.out.close()
        if self.stream is not None:
            self.stream.close()


def log_path_for(results_dir: Path, session_id: str, lane: LaneConfig) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    return results_dir / f"{lane.name}-{session_id}-server.log"


def run(lane: LaneConfig, argv: list[str], results_dir: Path, session_id: str, launcher: str) -> Server:
    """Start argv for a lane whose port is already chosen; block until ready or raise BootError
    (leaving nothing running)."""
    assert lane.port is not None
    if not port_is_free(lane.port):
        # readiness probes would find whatever already listens there and call it our server
        raise PortTaken(f"lane {lane.name!r} ({launcher} launcher): port {lane.port} on 127.0.0.1 is already "
                        "in use; stop what listens there or remove port from the lane (a free port is then chosen)")
    log_path = log_path_for(results_dir, session_id, lane)
    log = open(log_path, "wb")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **lane.env}, start_new_session=True,
                                # the kernel ties PDEATHSIG to the forking *thread*: only the main
                                # thread lives as long as pytest (a pool thread would kill the server)
                                preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None)
    except OSError as exc:
        log.close()
        raise boot_error(lane, launcher, f"cannot start the server: {exc}", argv, None) from None
    # The server's output reaches the log file through the redactor: tokens in its env or flags
    # never land on disk, in a boot error or in a failure's log tail.
    pump = LogPump(proc, log, Redactor.from_environment(lane.env, argv))
    # From here until stop(): a SIGTERM or an exit (mid-boot too) stops the server.
    forget = cleanup.register(f"{launcher} server of lane {lane.name!r} (pid {proc.pid})",
                              lambda urgent: stop_process(proc, pump, URGENT_GRACE_S if urgent else STOP_GRACE_S))
    base_url = f"http://127.0.0.1:{lane.port}"
    try:
        wait_ready(proc, base_url, lane, log_path, argv, launcher)
    except BaseException:
        forget()
        stop_process(proc, pump, grace_s=URGENT_GRACE_S)
        raise

    def stop() -> None:
        forget()
        stop_process(proc, pump)

    provenance = {"launcher": launcher, "argv": argv, "pid": proc.pid, "port": lane.port,
                  "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    return Server(base_url=base_url, engine=lane.engine, lane=lane, boot_log_path=log_path,
                  provenance=provenance, launcher=launcher, _stop=stop, _alive=exit_watch(proc, pump, provenance))


def exit_watch(proc: subprocess.Popen[bytes], pump: LogPump, provenance: dict[str, Any]) -> Callable[[], bool]:
    """The server's `is_alive`: False once the process has exited, its exit code then recorded in
    `provenance` (what a "server gone" message and the result file say) and its log drained, so a
    message that quotes the log's tail right after shows the server's last words."""

    def alive() -> bool:
        code = proc.poll()
        if code is not None and "exit_code" not in provenance:
            pump.drain()
            provenance["exit_code"] = code
        return code is None

    return alive


def start(lane: LaneConfig, results_dir: Path, session_id: str) -> Server:
    return run_on_free_port(lane, build_server_argv, results_dir, session_id, name)
