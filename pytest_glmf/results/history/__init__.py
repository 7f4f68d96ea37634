"""Run history: every session's results and provenance in one store (SQLite by default, PostgreSQL
for a team), read back for trends, baselines from the last passing runs, and slow-drift checks.

    schema.py    the tables, their migrations, a result document -> rows
    store.py     locations (file, URL), errors as one line, the SQL both dialects share
    connect.py   open_store: the dialect a location names, connected and migrated
    sqlite.py    the embedded store          postgres.py   the team store (psycopg 3)
    queries.py   runs per lane, metric series, trends, CSV, the last K passing runs
    drift.py     the slow-drift test over a metric's whole sequence
    cli.py       `glmf history`
"""
from pytest_glmf.results.history.connect import open_store as open_store
from pytest_glmf.results.history.store import HistoryError as HistoryError
from pytest_glmf.results.history.store import Location as Location
from pytest_glmf.results.history.store import parse_location as parse_location
