"""Fixtures for the history store's tests: result documents with known numbers, and stores of both
dialects. The PostgreSQL ones run against a REAL server (`.ci/postgres up` exports
GLMF_TEST_POSTGRES_URL); without one they skip with the reason, and in CI (`CI=true`) they fail
with it, so a broken database setup can never turn that stage silently green."""
from __future__ import annotations

import datetime as _dt
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from pytest_glmf.results.history.store import Location, parse_location

T0 = _dt.datetime(2026, 11, 1, 2, 0, tzinfo=_dt.UTC)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def result_doc(i: int, values: dict[str, float] | None = None, *, lane: str = "batch", exitstatus: int | None = 0,
               incomplete: list[str] | None = None, gpu_name: str | None = "NVIDIA GB300", gpu_count: int = 1,
               model_revision: str = "rev1",
               engine: str = "sglang", image: str = "sglang:nightly", key: str = "users=48",
               spread_pct: float = 1.0, session_id: str | None = None) -> dict[str, Any]:
    """The i-th nightly run's result file: `values` are curve metrics at `key` (default: 50 tok/s per
    user, TTFT p95 0.76 s, as in the recipe)."""
    when = T0 + _dt.timedelta(days=i)
    sid = session_id or f"{when:%Y%m%d-%H%M%S}-{i:04x}"
    prov = {"lane": lane, "engine": engine, "launcher": "docker", "image": image, "engine_version": f"0.5.{i}",
            "model_revision": model_revision, "started_at": when.isoformat(timespec="seconds"),
            "plugin_version": "0.1.0", "git_commit": "abc"}
    if gpu_name:
        prov.update(gpu_name=gpu_name, gpu_count=gpu_count, gpu_driver="580")
    entry = {"users": 48, "per_user_tok_s": 50.0, "ttft_p95_s": 0.76, **(values or {}), "spread_pct": spread_pct}
    return {"schema": 1, "session_id": sid, "lane": {"name": lane, "engine": engine}, "provenance": prov,
            "gates": {"curve": {key: entry}}, "incomplete": incomplete or [], "exitstatus": exitstatus}


@pytest.fixture
def make_doc() -> Callable[..., dict[str, Any]]:
    return result_doc


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The real PostgreSQL server's URL (a role that may create databases)."""
    url = os.environ.get("GLMF_TEST_POSTGRES_URL")
    reason = None
    if not url:
        reason = "no PostgreSQL server configured (GLMF_TEST_POSTGRES_URL unset)"
    else:
        try:
            import psycopg

            psycopg.connect(url, connect_timeout=5).close()
        except Exception as exc:  # ImportError, OperationalError: either way the stage cannot run
            reason = f"PostgreSQL at GLMF_TEST_POSTGRES_URL unusable: {' '.join(str(exc).split())}"
    if reason:
        reason += "; start one with: eval \"$(.ci/postgres up)\""
        if in_ci():
            pytest.fail(f"CI=true and the PostgreSQL tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    assert url is not None
    return url


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    """A fresh database on the real server for one test, dropped afterwards."""
    import psycopg

    name = "glmf_t" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(pg_server_url)
    yield urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    """A new, empty store of each dialect."""
    if request.param == "postgres":
        value = request.getfixturevalue("pg_url")
    else:
        value = str(tmp_path / "history.sqlite")
    loc = parse_location(value, tmp_path, tmp_path)
    assert loc is not None
    return loc
