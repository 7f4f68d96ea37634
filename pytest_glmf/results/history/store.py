"""Where the history lives (a SQLite file or a PostgreSQL URL), and the SQL both dialects share.

`open_store(location)` (connect.py) connects, applies the schema's migrations (schema.py) and returns a store
with `add_run(doc)`, `runs(...)`, `metrics(...)` and `document(...)`. Every fault (a corrupt or
locked file, an unreachable server, a wrong password, a schema newer than this code) is one
`HistoryError` whose message is a single line naming the store (password masked) and what to do.
The caller decides what a fault means: the plugin keeps the session's JSON result file (the source
of truth for a run) and retries later; `glmf history` prints the line and exits 2.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pytest_glmf.redact import MASK, Redactor
from pytest_glmf.results.history import schema
from pytest_glmf.results.recorder import redact_result

DEFAULT_FILE = "history.sqlite"
DEFAULT_TIMEOUT_S = 30.0          # SQLite: how long a writer waits for another one (busy timeout)
DEFAULT_CONNECT_TIMEOUT_S = 5.0   # PostgreSQL: how long to wait for an unreachable server
FORMS = "a SQLite file path, sqlite:///PATH[?timeout=S], postgresql://USER@HOST:PORT/DB, or off"


class HistoryError(Exception):
    """A fault of the history store, as one line for the user (secrets masked)."""


@dataclass(frozen=True)
class Location:
    kind: str                 # "sqlite" | "postgresql"
    target: str               # file path, or the URL as given (it may carry a password)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def display(self) -> str:
        """The location as printed: never the password."""
        return mask_url(self.target) if self.kind == "postgresql" else self.target

    def redactor(self) -> Redactor:
        """Masks this location's password (and the environment's secrets) in any text."""
        secrets: list[str] = []
        if self.kind == "postgresql":
            parts = urlsplit(self.target)
            secrets = [v for k, v in parse_qsl(parts.query) if k == "password"] + [parts.password or ""]
        return Redactor(dict(os.environ), secrets)


def mask_url(url: str) -> str:
    """postgresql://user:secret@host/db?password=x -> postgresql://user:***@host/db?password=***"""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}:{MASK}@{hostport}"
    query = "&".join(f"{k}={MASK if k == 'password' else v}" for k, v in parse_qsl(parts.query))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def parse_location(value: str | None, base_dir: Path, results_dir: Path) -> Location | None:
    """The store named by --glmf-history / glmf_history / `glmf history --store`: None means off;
    no value means `<results>/history.sqlite`. Raises ValueError naming the valid forms."""
    if value is None:
        return Location("sqlite", str(Path(results_dir) / DEFAULT_FILE))
    value = value.strip()
    if value.lower() in ("off", "none", "no", "false", "0"):
        return None
    if value.startswith(("postgresql://", "postgres://")):
        if not urlsplit(value).path.strip("/") and not urlsplit(value).hostname and "dbname" not in value:
            raise ValueError(f"{mask_url(value)!r} names no server or database; expected {FORMS}")
        return Location("postgresql", value, DEFAULT_CONNECT_TIMEOUT_S)
    timeout_s = DEFAULT_TIMEOUT_S
    if value.startswith("sqlite://"):
        parts = urlsplit(value)
        if parts.netloc or not parts.path.startswith("/") or len(parts.path) < 2:
            raise ValueError(f"{value!r}: a SQLite URL is sqlite:///relative/path or sqlite:////absolute/path")
        for k, v in parse_qsl(parts.query):
            if k != "timeout":
                raise ValueError(f"{value!r}: unknown parameter {k!r} (a SQLite URL takes ?timeout=SECONDS)")
            try:
                timeout_s = float(v)
            except ValueError:
                raise ValueError(f"{value!r}: timeout must be a number of seconds, got {v!r}") from None
        value = parts.path[1:]
    elif "://" in value:
        raise ValueError(f"{value.split('://')[0]!r} is not a store this plugin knows; expected {FORMS}")
    path = Path(base_dir) / os.path.expanduser(value)
    if path.is_dir():
        path = path / DEFAULT_FILE
    return Location("sqlite", str(path.resolve()), timeout_s)


@dataclass(frozen=True)
class Run:
    """One stored session (a glmf_runs row without its document)."""

    id: int
    session_id: str
    lane: str
    started_at: str
    verdict: str
    exitstatus: int | None
    incomplete: list[str]
    engine: str
    engine_version: str
    image: str
    image_digest: str
    model_revision: str
    gpu: str
    launcher: str
    git_commit: str
    source: str

    @property
    def key(self) -> schema.LaneKey:
        return schema.LaneKey(self.lane, self.gpu, self.model_revision, self.engine)


_RUN_FIELDS = [f for f in Run.__dataclass_fields__]


@dataclass(frozen=True)
class MetricRow:
    run_id: int
    gate: str
    key: str
    metric: str
    value: float
    spread_pct: float | None


class SqlStore:
    """The queries both dialects share. Subclasses connect, translate their errors and provide
    `_transaction(lock)` (a cursor inside one transaction; lock=True takes the writers' lock first)."""

    dialect = "sql"
    id_column = "INTEGER PRIMARY KEY"
    float_type = "DOUBLE PRECISION"

    def __init__(self, location: Location):
        self.location = location

    # -- dialect hooks
    def _transaction(self, lock: bool = False) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _has_table(self, cur: Any, name: str) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sql(self, text: str) -> str:
        return text

    def _explain(self, exc: Exception) -> str | None:
        """One line for a database error of this dialect, or None when it is not one."""
        return None

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __enter__(self) -> "SqlStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """Database errors become one HistoryError line: store, what it was doing, why."""
        try:
            yield
        except HistoryError:
            raise
        except Exception as exc:
            why = self._explain(exc)
            if why is None:
                raise
            line = " ".join(f"history store {self.location.display}: {doing}: {why}".split())
            raise HistoryError(self.location.redactor().text(line)) from None

    # -- schema
    def schema_version(self) -> int:
        with self.errors("reading the schema version"), self._transaction() as cur:
            return self._version(cur)

    def _version(self, cur: Any) -> int:
        if not self._has_table(cur, "glmf_schema"):
            return 0
        cur.execute("SELECT version FROM glmf_schema")
        row = cur.fetchone()
        return int(row[0]) if row else 0

    def _refuse_newer(self, version: int) -> None:
        if version > schema.SCHEMA_VERSION:
            raise HistoryError(f"history store {self.location.display} has schema version {version}; this "
                               f"pytest-glmf knows versions up to {schema.SCHEMA_VERSION}: upgrade pytest-glmf "
                               "or point --glmf-history at another store (nothing was written to it)")

    def migrate(self) -> int:
        """Bring the store to SCHEMA_VERSION (once, under the writers' lock); returns the version."""
        with self.errors("opening"):
            with self._transaction() as cur:
                version = self._version(cur)
            self._refuse_newer(version)
            if version == schema.SCHEMA_VERSION:
                return version
            with self._transaction(lock=True) as cur:
                if not self._has_table(cur, "glmf_schema"):
                    cur.execute("CREATE TABLE glmf_schema (version INTEGER NOT NULL)")
                    cur.execute("INSERT INTO glmf_schema (version) VALUES (0)")
                version = self._version(cur)   # again: another session may have migrated meanwhile
                self._refuse_newer(version)
                for step in sorted(v for v in schema.MIGRATIONS if v > version):
                    for statement in schema.MIGRATIONS[step]:
                        cur.execute(statement.format(id=self.id_column, float=self.float_type))
                    cur.execute(self._sql("UPDATE glmf_schema SET version = ?"), (step,))
                    version = step
            return version

    # -- writing
    def add_run(self, doc: Mapping[str, Any], source: str = "") -> dict[str, Any]:
        """Store (or replace: same session id) one result document; returns its run row."""
        doc = redact_result(dict(doc))   # result files are redacted when written; an import may be old or hand-made
        row = schema.run_row(doc, source)
        metrics = list(schema.metric_rows(doc))
        cols = schema.RUN_COLUMNS
        upsert = (f"INSERT INTO glmf_runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
                  f"ON CONFLICT (session_id) DO UPDATE SET "
                  + ", ".join(f"{c} = excluded.{c}" for c in cols if c != "session_id") + " RETURNING id")
        with self.errors(f"storing run {row['session_id']}"), self._transaction(lock=True) as cur:
            cur.execute(self._sql(upsert), [row[c] for c in cols])
            run_id = cur.fetchone()[0]
            cur.execute(self._sql("DELETE FROM glmf_metrics WHERE run_id = ?"), (run_id,))
            if metrics:
                cur.executemany(self._sql("INSERT INTO glmf_metrics (run_id, gate, key, metric, value, spread_pct) "
                                          "VALUES (?, ?, ?, ?, ?, ?)"), [(run_id, *m) for m in metrics])
        return row

    # -- reading
    def runs(self, *, lane: str | None = None, key: schema.LaneKey | None = None,
             verdicts: Sequence[str] | None = None, limit: int | None = None) -> list[Run]:
        """Stored runs, newest first (by session start), optionally one lane / one lane key."""
        where: list[str] = []
        args: list[Any] = []
        if key is not None:
            where.append("lane = ? AND gpu = ? AND model_revision = ? AND engine = ?")
            args += [key.lane, key.gpu, key.model_revision, key.engine]
        elif lane is not None:
            where.append("lane = ?")
            args.append(lane)
        if verdicts:
            where.append(f"verdict IN ({', '.join('?' for _ in verdicts)})")
            args += list(verdicts)
        sql = (f"SELECT id, {', '.join(_RUN_FIELDS[1:])} FROM glmf_runs"
               + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY started_at DESC, id DESC" + (" LIMIT ?" if limit is not None else ""))
        if limit is not None:
            args.append(int(limit))
        with self.errors("reading runs"), self._transaction() as cur:
            cur.execute(self._sql(sql), args)
            rows = cur.fetchall()
        out = []
        for r in rows:
            values = dict(zip(_RUN_FIELDS, r))
            values["incomplete"] = json.loads(values["incomplete"] or "[]")
            out.append(Run(**values))
        return out

    def metrics(self, run_ids: Iterable[int], gate: str | None = None, metric: str | None = None) -> list[MetricRow]:
        ids = list(run_ids)
        out: list[MetricRow] = []
        for start in range(0, len(ids), 500):   # bound the statement's parameters (SQLite, libpq limits)
            chunk = ids[start:start + 500]
            sql = (f"SELECT run_id, gate, key, metric, value, spread_pct FROM glmf_metrics "
                   f"WHERE run_id IN ({', '.join('?' for _ in chunk)})")
            args: list[Any] = list(chunk)
            for column, value in (("gate", gate), ("metric", metric)):
                if value is not None:
                    sql += f" AND {column} = ?"
                    args.append(value)
            with self.errors("reading metrics"), self._transaction() as cur:
                cur.execute(self._sql(sql + " ORDER BY run_id, gate, key, metric"), args)
                out.extend(MetricRow(*r) for r in cur.fetchall())
        return out

    def document(self, session_id: str) -> dict[str, Any] | None:
        with self.errors(f"reading run {session_id}"), self._transaction() as cur:
            cur.execute(self._sql("SELECT document FROM glmf_runs WHERE session_id = ?"), (session_id,))
            row = cur.fetchone()
        return json.loads(row[0]) if row else None
