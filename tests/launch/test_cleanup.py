"""The one cleanup registry (launch/cleanup.py): what a process started is undone at exit and on SIGTERM,
in order, each thing once, and the SIGTERM disposition that was there before comes back."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_glmf.launch.cleanup import CleanupRegistry


@pytest.fixture
def cleanup():
    """A registry of its own (the process's one may hold other tests' servers)."""
    registry = CleanupRegistry()
    yield registry
    registry.run_all()


def test_order_first_entries_first_each_once_and_failures_do_not_stop_the_rest(cleanup) -> None:
    done: list[str] = []

    def boom(urgent: bool) -> None:
        raise RuntimeError("broken undo")

    forget_a = cleanup.register("server a", lambda urgent: done.append(f"a {urgent}"))
    cleanup.register("broken", boom)
    cleanup.register("session", lambda urgent: done.append("session"), first=True)
    forget_c = cleanup.register("server c", lambda urgent: done.append("c"))
    forget_c()
    assert cleanup.pending() == ["session", "server a", "broken"]
    cleanup.run_all(urgent=True)
    assert done == ["session", "a True"]
    forget_a()                                # already undone: forgetting is harmless
    cleanup.run_all()
    assert done == ["session", "a True"]


def test_sigterm_handler_is_installed_while_something_is_pending(cleanup) -> None:
    before = signal.getsignal(signal.SIGTERM)
    forget = cleanup.register("x", lambda urgent: None)
    assert signal.getsignal(signal.SIGTERM) == cleanup.on_sigterm
    forget()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_process_that_ignores_sigterm_keeps_ignoring_it(cleanup) -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        forget = cleanup.register("x", lambda urgent: None)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        forget()
    finally:
        signal.signal(signal.SIGTERM, previous)


SCRIPT = """
import os, signal, sys
from pytest_glmf.launch import cleanup

def write(what):
    def undo(urgent):
        with open("undone.txt", "a") as f:
            f.write(f"{what} urgent={urgent}\\n")
    return undo

mode = sys.argv[1]
if mode == "chain":
    signal.signal(signal.SIGTERM, lambda s, f: (write("previous handler")(False), sys.exit(7)))
cleanup.register("session", write("session"), first=True)
cleanup.register("server", write("server"))
if mode in ("sigterm", "chain"):
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause()
"""


@pytest.mark.parametrize("mode, code, lines", [
    ("sigterm", -signal.SIGTERM, ["session urgent=True", "server urgent=True"]),   # then dies by SIGTERM
    ("chain", 7, ["session urgent=True", "server urgent=True", "previous handler urgent=False"]),
    ("exit", 0, ["session urgent=False", "server urgent=False"]),                    # atexit
])
def test_in_a_real_process(tmp_path: Path, mode: str, code: int, lines: list[str]) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([sys.executable, str(script), mode], cwd=tmp_path, timeout=60, capture_output=True)
    assert proc.returncode == code, proc.stderr.decode()
    assert (tmp_path / "undone.txt").read_text().splitlines() == lines
