"""The store itself, on both dialects (SQLite file; the real PostgreSQL server): schema and
migrations, storing and reading runs, concurrent writers, and every fault as one clear line."""
from __future__ import annotations

import json
import multiprocessing
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.results.history import open_store, schema
from pytest_glmf.results.history.schema import LaneKey
from pytest_glmf.results.history.store import HistoryError, Location, mask_url, parse_location


def test_a_new_store_gets_the_schema_and_reopening_changes_nothing(location: Location) -> None:
    with open_store(location) as store:
        assert store.schema_version() == schema.SCHEMA_VERSION
    with open_store(location) as store:
        assert store.migrate() == schema.SCHEMA_VERSION
        assert store.runs() == []


def test_a_run_is_stored_with_its_provenance_verdict_and_metrics_and_replaced_on_reimport(location, make_doc) -> None:
    doc = make_doc(1, {"per_user_tok_s": 48.5})
    with open_store(location) as store:
        row = store.add_run(doc, source="/r/batch-1.json")
        assert row["verdict"] == "passed"
        (run,) = store.runs()
        assert (run.lane, run.gpu, run.model_revision, run.engine, run.image, run.engine_version) == \
            ("batch", "NVIDIA GB300 x1", "rev1", "sglang", "sglang:nightly", "0.5.1")
        assert run.started_at == "2026-11-02T02:00:00+00:00" and run.source == "/r/batch-1.json"
        got = {(m.gate, m.key, m.metric): (m.value, m.spread_pct) for m in store.metrics([run.id])}
        assert got == {("curve", "users=48", "per_user_tok_s"): (48.5, 1.0),
                       ("curve", "users=48", "ttft_p95_s"): (0.76, 1.0),
                       ("curve", "users=48", "spread_pct"): (1.0, 1.0)}
        assert store.document(doc["session_id"]) == doc   # the whole file, nothing lost
        # the same session again (a re-import, a finished checkpoint): one run, the new numbers
        store.add_run({**doc, "gates": {"curve": {"users=48": {"per_user_tok_s": 40.0}}}, "exitstatus": 1})
        (again,) = store.runs()
        assert again.verdict == "failed"
        assert [(m.metric, m.value) for m in store.metrics([again.id])] == [("per_user_tok_s", 40.0)]


@pytest.mark.parametrize(("changes", "verdict"), [
    ({"exitstatus": 0}, "passed"), ({"exitstatus": 1}, "failed"), ({"exitstatus": 3}, "error"),
    ({"incomplete": ["the server exited before the end of the session"], "exitstatus": 1}, "incomplete"),
    ({"exitstatus": None}, "unknown")])
def test_verdicts(changes, verdict, make_doc) -> None:
    assert schema.run_row({**make_doc(1), **changes})["verdict"] == verdict


def test_a_run_without_provenance_time_is_placed_by_its_session_id(make_doc) -> None:
    doc = make_doc(1, session_id="20261203-040506-beef")
    del doc["provenance"]["started_at"]
    assert schema.run_row(doc)["started_at"] == "2026-12-03T04:05:06+00:00"


def test_runs_filter_by_lane_key_and_verdict_newest_first(location, make_doc) -> None:
    with open_store(location) as store:
        for i in range(4):
            store.add_run(make_doc(i, exitstatus=0 if i != 2 else 1))
        store.add_run(make_doc(10, gpu_name="NVIDIA H100"))
        store.add_run(make_doc(11, model_revision="rev2"))
        store.add_run(make_doc(12, engine="vllm"))
        store.add_run(make_doc(13, lane="daily"))
        key = LaneKey("batch", "NVIDIA GB300 x1", "rev1", "sglang")
        assert [r.session_id[-4:] for r in store.runs(key=key)] == ["0003", "0002", "0001", "0000"]
        assert [r.session_id[-4:] for r in store.runs(key=key, verdicts=["passed"], limit=2)] == ["0003", "0001"]
        assert len(store.runs(lane="batch")) == 7 and len(store.runs()) == 8


def test_secrets_are_never_stored(tmp_path, make_doc, monkeypatch) -> None:
    """A result file is redacted when written; an old or hand-made one is redacted again on the way in."""
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue123")
    doc = make_doc(1)
    doc["lane"]["env"] = {"HF_TOKEN": "hf_supersecretvalue123"}
    doc["provenance"]["argv"] = ["--api-key", "sk-anothersecret", "--note", "hf_supersecretvalue123"]
    loc = parse_location(str(tmp_path / "h.sqlite"), tmp_path, tmp_path)
    with open_store(loc) as store:
        store.add_run(doc)
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("h.sqlite*"))
    assert b"hf_supersecretvalue123" not in raw and b"sk-anothersecret" not in raw and b"***" in raw


# ---------------------------------------------------------------------------- concurrent writers


def _add_runs(value: str, docs: list[dict], start: multiprocessing.synchronize.Event) -> None:
    loc = parse_location(value, Path("/"), Path("/"))
    start.wait()
    store = open_store(loc)          # opening (and migrating a new store) races too
    for doc in docs:
        store.add_run(doc)
    store.close()


def test_writers_in_separate_processes_all_land_on_a_new_store(location, make_doc) -> None:
    """Six processes open the same new store at once (migration race) and each stores 15 runs."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_add_runs, args=(location.target, [make_doc(w * 1000 + i) for i in range(15)], start))
             for w in range(6)]
    for p in procs:
        p.start()
    time.sleep(0.5)
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 6
    with open_store(location) as store:
        runs = store.runs()
        assert len(runs) == 90 and len({r.session_id for r in runs}) == 90
        assert len(store.metrics(r.id for r in runs)) == 90 * 3
        assert store.schema_version() == schema.SCHEMA_VERSION


# ---------------------------------------------------------------------------- faults


def test_a_newer_schema_is_refused_and_left_untouched(location, make_doc) -> None:
    with open_store(location) as store:
        with store._transaction(lock=True) as cur:
            cur.execute(store._sql("UPDATE glmf_schema SET version = ?"), (schema.SCHEMA_VERSION + 1,))
    with pytest.raises(HistoryError) as err:
        open_store(location)
    assert str(err.value) == (f"history store {location.display} has schema version {schema.SCHEMA_VERSION + 1}; "
                              f"this pytest-glmf knows versions up to {schema.SCHEMA_VERSION}: upgrade pytest-glmf or "
                              "point --glmf-history at another store (nothing was written to it)")


def test_a_later_migration_is_applied_once_to_an_existing_store(location, make_doc, monkeypatch) -> None:
    with open_store(location) as store:
        store.add_run(make_doc(1))
    step = schema.SCHEMA_VERSION + 1
    monkeypatch.setitem(schema.MIGRATIONS, step, ["ALTER TABLE glmf_runs ADD COLUMN note TEXT"])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", step)
    with open_store(location) as store:
        assert store.schema_version() == step
        assert len(store.runs()) == 1     # the data survived
    with open_store(location) as store:   # not applied twice (ALTER would fail: duplicate column)
        assert store.schema_version() == step


def test_a_file_that_is_not_a_database_is_one_line_and_is_not_touched(tmp_path) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"this is not a database, just junk " * 200)
    before = path.read_bytes()
    with pytest.raises(HistoryError) as err:
        open_store(parse_location(str(path), tmp_path, tmp_path))
    assert str(err.value) == (f"history store {path}: opening: not a readable SQLite database (file is not a "
                              "database): move the file away (the next session starts a new store) and re-import "
                              "the result files with `glmf history import DIR`")
    assert path.read_bytes() == before


def test_a_locked_file_waits_then_is_one_line(tmp_path, make_doc) -> None:
    path = tmp_path / "history.sqlite"
    loc = parse_location(f"sqlite:///{path}?timeout=0.5", Path("/"), tmp_path)
    open_store(loc).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")            # another process in the middle of a long write
    t0 = time.monotonic()
    with pytest.raises(HistoryError) as err, open_store(loc) as store:
        store.add_run(make_doc(1))
    waited = time.monotonic() - t0
    holder.execute("ROLLBACK")
    assert 0.4 < waited < 5
    assert str(err.value) == (f"history store {path}: storing run {make_doc(1)['session_id']}: the file stayed "
                              "locked by another process for more than 0.5 s (database is locked)")


def test_a_writer_waits_for_another_one_shorter_than_the_timeout(tmp_path, make_doc) -> None:
    path = tmp_path / "history.sqlite"
    loc = parse_location(str(path), tmp_path, tmp_path)
    open_store(loc).close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    threading.Timer(0.5, lambda: holder.execute("COMMIT")).start()
    with open_store(loc) as store:
        store.add_run(make_doc(1))
        assert len(store.runs()) == 1


class _LockedAtOnce(sqlite3.Connection):
    """What SQLite does when two sessions create one store at once (seen in CI: "database is locked"
    0.002 s after opening, with a 30 s timeout): the WAL switch and BEGIN answer "locked" without
    waiting, `left` more times."""
    left = 0

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if "journal_mode" in sql and _LockedAtOnce.left > 0:
            _LockedAtOnce.left -= 1
            raise sqlite3.OperationalError("database is locked")
        return super().execute(sql, *args)

    def cursor(self, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        conn = self

        class Cursor(sqlite3.Cursor):
            def execute(self, sql: str, *a: Any) -> sqlite3.Cursor:  # type: ignore[override]
                if sql.startswith("BEGIN") and _LockedAtOnce.left > 0:
                    _LockedAtOnce.left -= 1
                    raise sqlite3.OperationalError("database is locked")
                return super().execute(sql, *a)
        return Cursor(conn)


@pytest.fixture
def locked_at_once(monkeypatch: pytest.MonkeyPatch) -> type[_LockedAtOnce]:
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **kw: connect(*a, factory=_LockedAtOnce, **kw))
    return _LockedAtOnce


def test_a_lock_answered_at_once_is_waited_out_like_any_other(tmp_path, make_doc, locked_at_once) -> None:
    loc = parse_location(f"sqlite:///{tmp_path / 'history.sqlite'}?timeout=5", Path("/"), tmp_path)
    locked_at_once.left = 6                      # opening's WAL switch, then the BEGINs of migrate and add_run
    t0 = time.monotonic()
    with open_store(loc) as store:
        store.add_run(make_doc(1))
        assert [r.session_id for r in store.runs()] == [make_doc(1)["session_id"]]
    assert locked_at_once.left == 0 and time.monotonic() - t0 < 4


def test_a_lock_answered_at_once_still_fails_after_the_timeout_with_the_time_it_waited(tmp_path,
                                                                                        locked_at_once) -> None:
    path = tmp_path / "history.sqlite"
    loc = parse_location(f"sqlite:///{path}?timeout=0.5", Path("/"), tmp_path)
    locked_at_once.left = 10**6
    t0 = time.monotonic()
    with pytest.raises(HistoryError) as err:
        open_store(loc)
    assert 0.5 <= time.monotonic() - t0 < 5
    assert str(err.value) == (f"history store {path}: opening: the file stayed locked by another process for more "
                              "than 0.5 s (database is locked)")


def test_a_missing_file_is_not_created_by_a_reader(tmp_path) -> None:
    loc = parse_location(str(tmp_path / "none.sqlite"), tmp_path, tmp_path)
    assert open_store(loc, create=False) is None and not (tmp_path / "none.sqlite").exists()


def test_location_forms_and_their_errors(tmp_path) -> None:
    assert parse_location(None, tmp_path, tmp_path / "r") == Location("sqlite", str(tmp_path / "r" / "history.sqlite"))
    assert parse_location("off", tmp_path, tmp_path) is None
    assert parse_location("h.db", tmp_path, tmp_path).target == str(tmp_path / "h.db")
    assert parse_location(str(tmp_path), tmp_path, tmp_path).target == str(tmp_path / "history.sqlite")
    assert parse_location("sqlite:////x/h.db?timeout=2", tmp_path, tmp_path) == Location("sqlite", "/x/h.db", 2.0)
    pg = parse_location("postgresql://ci:s3cr3t-pw@db:5432/glmf", tmp_path, tmp_path)
    assert pg.kind == "postgresql" and pg.display == "postgresql://ci:***@db:5432/glmf"
    assert mask_url("postgresql://db/glmf?user=ci&password=s3cr3t") == "postgresql://db/glmf?user=ci&password=***"
    with pytest.raises(ValueError, match=r"^'mysql' is not a store this plugin knows; expected a SQLite file path, "
                                         r"sqlite:///PATH\[\?timeout=S\], postgresql://USER@HOST:PORT/DB, or off$"):
        parse_location("mysql://db/x", tmp_path, tmp_path)
    with pytest.raises(ValueError, match="unknown parameter 'mode'"):
        parse_location("sqlite:///h.db?mode=ro", tmp_path, tmp_path)


# ---------------------------------------------------------------------------- PostgreSQL faults (real server)


@pytest.mark.postgres
def test_postgres_wrong_password_is_one_line_without_the_password(pg_server_url) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(pg_server_url)
    wrong = pg_server_url.replace(f":{parts.password}@", ":not-the-Pa55word@")
    with pytest.raises(HistoryError) as err:
        open_store(parse_location(wrong, Path("/"), Path("/")))
    line = str(err.value)
    assert "\n" not in line and "not-the-Pa55word" not in line and str(parts.password) not in line
    assert line.startswith(f"history store postgresql://{parts.username}:***@{parts.hostname}:{parts.port}/")
    assert f'password authentication failed for user "{parts.username}"' in line


@pytest.mark.postgres
def test_postgres_unreachable_is_one_line_quickly(pg_server_url) -> None:
    import socket

    with socket.socket() as s:      # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(HistoryError) as err:
        open_store(parse_location(f"postgresql://glmf:pw12345@127.0.0.1:{port}/glmf", Path("/"), Path("/")))
    assert time.monotonic() - t0 < 10
    assert str(err.value).startswith(f"history store postgresql://glmf:***@127.0.0.1:{port}/glmf: connecting: "
                                     "connection failed:")
    assert "Connection refused" in str(err.value) and "pw12345" not in str(err.value)


@pytest.mark.postgres
def test_postgres_schema_is_the_same_tables(pg_url, make_doc) -> None:
    loc = parse_location(pg_url, Path("/"), Path("/"))
    with open_store(loc) as store:
        store.add_run(make_doc(1))
        with store._transaction() as cur:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                        "ORDER BY table_name")
            assert [r[0] for r in cur.fetchall()] == ["glmf_metrics", "glmf_runs", "glmf_schema"]
            cur.execute("SELECT document FROM glmf_runs")
            assert json.loads(cur.fetchone()[0])["session_id"] == make_doc(1)["session_id"]


def test_postgres_without_psycopg_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)      # as if the extra were not installed
    with pytest.raises(HistoryError) as err:
        open_store(parse_location("postgresql://ci:pw1234@db:5432/glmf", Path("/"), Path("/")))
    assert str(err.value) == ("history store postgresql://ci:***@db:5432/glmf: a PostgreSQL store needs psycopg 3: "
                              "pip install 'pytest-glmf[postgres]'")
