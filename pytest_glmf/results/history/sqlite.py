"""The embedded store: one SQLite file (default `<results>/history.sqlite`), zero setup.

WAL journal, so readers (a session's baseline, `glmf history`) never block the writer; writers
take the file's write lock up front (BEGIN IMMEDIATE) and wait up to the busy timeout (30 s, or
`sqlite:///PATH?timeout=S`) for another session that is storing at the same moment, so two
sessions finishing at once both land. SQLite does not always wait: switching a new file to WAL
while another connection creates it, or a lock it sees as a deadlock, answers "locked" at once,
so opening and BEGIN are tried again (short sleeps) until the same timeout has passed. A file that
is not a database, or stays locked past the timeout, is one HistoryError line (store.py); nothing
here deletes or repairs a user's file.
"""
from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pytest_glmf.results.history.store import Location, SqlStore

T = TypeVar("T")


class SqliteStore(SqlStore):
    dialect = "sqlite"
    id_column = "INTEGER PRIMARY KEY AUTOINCREMENT"   # ids are never reused after a delete
    float_type = "REAL"

    def __init__(self, location: Location):
        super().__init__(location)
        self.conn: sqlite3.Connection | None = None
        path = Path(location.target)
        with self.errors("opening"):
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: transactions are the explicit BEGIN/COMMIT below, nothing implicit
            self.conn = sqlite3.connect(path, timeout=location.timeout_s, isolation_level=None,
                                        check_same_thread=False)
            self.conn.execute("PRAGMA foreign_keys = ON")
            conn = self.conn
            # also the first read: a non-database fails here
            self._patiently(lambda: conn.execute("PRAGMA journal_mode = WAL"))

    def _patiently(self, step: Callable[[], T]) -> T:
        """`step`, tried again while SQLite answers "locked"/"busy" at once instead of waiting its
        busy timeout, until the store's timeout has passed (then the last error stands)."""
        deadline = time.monotonic() + self.location.timeout_s
        while True:
            try:
                return step()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(min(0.05 * (1 + random.random()), max(0.0, deadline - time.monotonic())))

    @contextmanager
    def _transaction(self, lock: bool = False) -> Iterator[sqlite3.Cursor]:
        assert self.conn is not None
        cur = self.conn.cursor()
        self._patiently(lambda: cur.execute("BEGIN IMMEDIATE" if lock else "BEGIN"))
        try:
            yield cur
        except BaseException:
            if self.conn.in_transaction:
                cur.execute("ROLLBACK")
            raise
        else:
            cur.execute("COMMIT")
        finally:
            cur.close()

    def _has_table(self, cur: Any, name: str) -> bool:
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        return cur.fetchone() is not None

    def _explain(self, exc: Exception) -> str | None:
        if isinstance(exc, sqlite3.OperationalError):
            msg = str(exc)
            if _is_busy(exc):
                return (f"the file stayed locked by another process for more than {self.location.timeout_s:g} s "
                        f"({msg})")
            if "unable to open" in msg:
                return f"cannot open the file ({msg}): is its directory writable?"
            return msg
        if isinstance(exc, sqlite3.DatabaseError):   # "file is not a database", "disk image is malformed"
            return (f"not a readable SQLite database ({exc}): move the file away (the next session starts a new "
                    "store) and re-import the result files with `glmf history import DIR`")
        if isinstance(exc, OSError):
            return f"{exc.strerror or exc}: {exc.filename or self.location.target}"
        return None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    msg = str(exc)
    return "locked" in msg or "busy" in msg
