"""What the plugin says when the server misbehaves mid-session, and the per-gate time limit.

The plugin's hooks stay thin; the sentences live here:
  * `gone_message`: the server process/container is gone (an attached server: stopped answering)
    -> one sentence (lane, when, exit code) and the tail of its log; the test that noticed fails with it, later tests skip with a reason.
  * `broken_request_message`: a request failed at the protocol level (connection dropped, stream
    cut, malformed SSE, HTTP 5xx, timeout) while the server lives -> one sentence naming the cause,
    where in the test it happened, and the log tail. No retry happens anywhere: one broken request
    is one failure.
  * `gate_timer`: `timeouts.gate_s` of the lane bounds one test's call (SIGALRM, main thread only);
    a stuck server or client never stalls CI beyond it.
"""
from __future__ import annotations

import signal
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_glmf.launch.base import LOG_TAIL_LINES

if TYPE_CHECKING:
    from pytest_glmf.launch.base import Server

DEFAULT_GATE_S = 3600.0      # one gate test (a whole curve row with its runs) within an hour


class GateTimeout(Exception):
    """A test ran past the lane's `timeouts.gate_s`."""


def log_tail(server: "Server", n: int = LOG_TAIL_LINES) -> str:
    path = server.boot_log_path
    if path is None:
        return "(no server log: the server was attached without one; boot_log: FILE in the lane shows its last lines here)"
    try:
        lines = Path(path).read_text(errors="replace").splitlines()[-n:]
    except OSError as exc:
        return f"(server log {path} unreadable: {exc.strerror})"
    head = f"last {len(lines)} lines of the server log {path}:"
    return "\n".join([head] + [f"  | {line}" for line in lines]) if lines else f"the server log {path} is empty"


def exit_description(server: "Server") -> str:
    code = server.provenance.get("exit_code")
    return "exited" if code is None else f"exited with code {code}" if code >= 0 else f"was killed by signal {-code}"


def wait_gone(server: "Server", within_s: float) -> bool:
    """True when the server is gone or goes within `within_s` (a crashing server drops the
    connection first and exits a moment later: without the wait its crash reads as a wire error)."""

    deadline = time.monotonic() + within_s
    while server.is_alive():
        if server.launcher == "attach" or time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def gone_message(server: "Server", when: str) -> str | None:
    """None while the server lives; else 'lane X: the server exited ... <when>' + log tail."""
    if server.is_alive():
        return None
    what = (f"stopped answering (nothing accepts connections at {server.base_url} any more)"
            if server.launcher == "attach" else exit_description(server))
    return f"lane {server.lane.name!r}: the server {what} {when}.\n{log_tail(server)}"


def _broken_cause(exc: BaseException) -> str | None:
    """A one-line cause for failures that are the server's (or the wire's), None for others."""
    from pytest_glmf.engine.httperror import request_failure

    if isinstance(exc, GateTimeout):
        return str(exc)
    failure = request_failure(exc)
    return failure[1] if failure is not None else None


def cause_class(exc: BaseException) -> str:
    """The failure ledger's cause class of a broken request or a gate timeout."""
    from pytest_glmf.engine.httperror import request_failure

    failure = request_failure(exc)
    return failure[0] if failure is not None else "server"


def _where(exc: BaseException, root: Path | None) -> str:
    """` at file:line` of the innermost frame in the user's tree (the line that made the request)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        path = Path(frame.filename)
        if root is None or "site-packages" in frame.filename:
            continue
        try:
            return f" at {path.relative_to(root)}:{frame.lineno}"
        except ValueError:
            continue
    return ""


def broken_request_message(exc: BaseException, server: "Server | None", lane_name: str,
                           root: Path | None = None) -> str | None:
    cause = _broken_cause(exc)
    if cause is None:
        return None
    tail = f"\n{log_tail(server)}" if server is not None else ""
    return f"lane {lane_name!r}: {cause}{_where(exc, root)}; no retry was made.{tail}"


@contextmanager
def gate_timer(limit_s: float | None, what: str) -> Iterator[None]:
    """Raise GateTimeout in the main thread when the block runs longer than limit_s."""
    if not limit_s or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, signal.SIG_IGN, None):
        yield                                    # someone else owns SIGALRM (pytest-timeout...)
        return

    def expired(signum: int, frame: object) -> None:
        raise GateTimeout(f"{what} ran longer than timeouts.gate_s={limit_s:g} s and was stopped")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
