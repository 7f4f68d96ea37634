"""The one registry of what this process must undo however it ends: servers it started (booting ones
included), containers being created, the session's result file.

  * a normal exit, or an exception nobody caught: `atexit` runs what is still registered;
  * SIGTERM (how CI cancels a job; it skips `finally` blocks and atexit): the handler runs it, then
    does what was there before (an earlier handler, or dying by SIGTERM as asked);
  * SIGKILL or the OOM killer: nothing in this process can run. Process-launched servers then get
    SIGTERM from the kernel (PR_SET_PDEATHSIG, launch/process.py), and containers carry labels by
    which the next session on that Docker engine removes them (launch/docker `cleanup_stale`).

Ctrl-C is a KeyboardInterrupt: pytest's own teardown and the launchers' `finally` blocks handle it.

One registry per process on purpose (`register` below): signal handlers and atexit belong to the
process, not to one pytest session, and a script that launches a lane gets the same protection.
"""
from __future__ import annotations

import atexit
import itertools
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

# An undo function gets `urgent`: True on SIGTERM (CI sends SIGKILL soon after: short grace
# periods), False at a normal exit.
Undo = Callable[[bool], None]


class CleanupRegistry:
    def __init__(self) -> None:
        self._pending: dict[tuple[int, int], tuple[str, Undo]] = {}   # (0 first | 1, order) -> (what, undo)
        self._order = itertools.count()
        self._lock = threading.RLock()
        self._atexit_installed = False
        self._previous_sigterm: Any = None    # the disposition before ours (None: ours is not installed)

    def register(self, what: str, undo: Undo, *, first: bool = False) -> Callable[[], None]:
        """Run `undo` if this process ends before the returned function is called (which forgets
        it). `first`: run before the others (a session writes its result file before its server
        stops)."""
        key = (0 if first else 1, next(self._order))
        with self._lock:
            self._pending[key] = (what, undo)
            if not self._atexit_installed:
                atexit.register(self.run_all, False)
                self._atexit_installed = True
        self._install_sigterm()

        def forget() -> None:
            with self._lock:
                self._pending.pop(key, None)
                empty = not self._pending
            if empty:
                self._restore_sigterm()

        return forget

    def pending(self) -> list[str]:
        """What would be undone now, in order."""
        with self._lock:
            return [what for _, (what, _) in sorted(self._pending.items())]

    def run_all(self, urgent: bool = False) -> None:
        """Undo everything still registered, in order, each once; one failing undo does not stop the rest."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                _, undo = self._pending.pop(min(self._pending))
            try:
                undo(urgent)
            except Exception:  # noqa: BLE001 - the next server must still be stopped
                pass

    def on_sigterm(self, signum: int, frame: Any) -> None:
        previous = self._previous_sigterm
        self._restore_sigterm()
        self.run_all(urgent=True)
        if callable(previous):
            previous(signum, frame)
        else:                                # the default disposition: die by SIGTERM, as asked
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def _install_sigterm(self) -> None:
        """Handlers can only be set from the main thread; a process that ignores SIGTERM keeps doing so."""
        if threading.current_thread() is not threading.main_thread():
            return
        with self._lock:
            if self._previous_sigterm is not None:
                return
            current = signal.getsignal(signal.SIGTERM)
            if current == signal.SIG_IGN:
                return
            self._previous_sigterm = current if current is not None else signal.SIG_DFL
            signal.signal(signal.SIGTERM, self.on_sigterm)

    def _restore_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        with self._lock:
            previous, self._previous_sigterm = self._previous_sigterm, None
            if previous is not None and signal.getsignal(signal.SIGTERM) == self.on_sigterm:
                signal.signal(signal.SIGTERM, previous)


_REGISTRY = CleanupRegistry()   # this process's
register = _REGISTRY.register
pending = _REGISTRY.pending
run_all = _REGISTRY.run_all
