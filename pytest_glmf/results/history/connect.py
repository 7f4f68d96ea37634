"""Opening a store: the dialect a location names, connected and migrated (store.py has the SQL,
sqlite.py and postgres.py the dialects; this module is the one that knows all three)."""
from __future__ import annotations

from pathlib import Path

from pytest_glmf.results.history.postgres import PostgresStore
from pytest_glmf.results.history.sqlite import SqliteStore
from pytest_glmf.results.history.store import Location, SqlStore


def open_store(location: Location, *, create: bool = True) -> SqlStore | None:
    """Connect and migrate. With create=False a SQLite file that does not exist yet is None (a
    reader must not create an empty store as a side effect)."""
    if location.kind == "postgresql":
        store: SqlStore = PostgresStore(location)
    else:
        if not create and not Path(location.target).exists():
            return None

        store = SqliteStore(location)
    try:
        store.migrate()
    except BaseException:
        store.close()
        raise
    return store
