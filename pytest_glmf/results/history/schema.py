"""The history store's one schema, its migrations, and how a result file becomes rows.

A run is one session's result file (results/recorder.py): one `glmf_runs` row (who, where, what
verdict, and the whole document, so nothing of the JSON is lost) and one `glmf_metrics` row per
(gate, key, metric) the gates declare (gates/registry.py), with the run-to-run spread recorded beside it.

Migrations are numbered steps applied in order, once, under the store's write lock (SQLite's
BEGIN IMMEDIATE, PostgreSQL's advisory lock), so two sessions opening a new store at once do not
both create it. `glmf_schema.version` says which steps a store has; a store newer than this code
is refused, never written (an older plugin must not corrupt what a newer one wrote).
"""
from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_glmf.results.baseline import numeric_metrics, spread_of

# Each step: version -> statements. `{id}` is the dialect's auto-increment key column, `{float}` its
# double type. Columns that identify a lane (lane, gpu, model_revision, engine) are '' rather than
# NULL when unknown, so "same lane" is plain equality in both dialects.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE glmf_runs (
            id {id},
            session_id TEXT NOT NULL UNIQUE,
            lane TEXT NOT NULL,
            started_at TEXT NOT NULL,
            verdict TEXT NOT NULL,
            exitstatus INTEGER,
            incomplete TEXT NOT NULL,
            engine TEXT NOT NULL,
            engine_version TEXT NOT NULL,
            image TEXT NOT NULL,
            image_digest TEXT NOT NULL,
            model_revision TEXT NOT NULL,
            gpu TEXT NOT NULL,
            launcher TEXT NOT NULL,
            git_commit TEXT NOT NULL,
            plugin_version TEXT NOT NULL,
            result_schema INTEGER,
            source TEXT NOT NULL,
            stored_at TEXT NOT NULL,
            document TEXT NOT NULL
        )""",
        "CREATE INDEX glmf_runs_lane ON glmf_runs (lane, gpu, model_revision, engine, started_at)",
        """CREATE TABLE glmf_metrics (
            run_id BIGINT NOT NULL REFERENCES glmf_runs (id) ON DELETE CASCADE,
            gate TEXT NOT NULL,
            key TEXT NOT NULL,
            metric TEXT NOT NULL,
            value {float} NOT NULL,
            spread_pct {float},
            PRIMARY KEY (run_id, gate, key, metric)
        )""",
    ],
}
SCHEMA_VERSION = max(MIGRATIONS)

RUN_COLUMNS = ("session_id", "lane", "started_at", "verdict", "exitstatus", "incomplete", "engine",
               "engine_version", "image", "image_digest", "model_revision", "gpu", "launcher",
               "git_commit", "plugin_version", "result_schema", "source", "stored_at", "document")

# verdict of a run: passed / failed (exit 1) / error (another pytest exit status) / incomplete
# (killed, interrupted, the server died, a boot failed) / unknown (a file written before result
# files carried their exit status). Only "passed" runs make a history baseline.
PASSED, FAILED, ERROR, INCOMPLETE, UNKNOWN = "passed", "failed", "error", "incomplete", "unknown"
COMPLETE = (PASSED, FAILED, ERROR)

_SESSION_TIME = re.compile(r"^(\d{8}-\d{6})")


@dataclass(frozen=True)
class LaneKey:
    """What makes two runs comparable: the same lane on the same GPU with the same weights and the
    same engine (the image and the engine's version are what a nightly gate changes)."""

    lane: str
    gpu: str = ""
    model_revision: str = ""
    engine: str = ""

    @classmethod
    def from_provenance(cls, provenance: Mapping[str, Any], lane: str | None = None) -> "LaneKey":
        return cls(lane=lane or _text(provenance.get("lane")) or "?", gpu=gpu_label(provenance),
                   model_revision=_text(provenance.get("model_revision")), engine=_text(provenance.get("engine")))

    def describe(self) -> str:
        return (f"lane {self.lane}, gpu {self.gpu or '-'}, model revision {self.model_revision or '-'}, "
                f"engine {self.engine or '-'}")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def gpu_label(provenance: Mapping[str, Any]) -> str:
    name = _text(provenance.get("gpu_name"))
    count = provenance.get("gpu_count")
    return f"{name} x{count}" if name and count else name


def started_at(doc: Mapping[str, Any]) -> str:
    """ISO-8601 UTC start of the session (sortable as text): the provenance's, else the session id's
    (`YYYYmmdd-HHMMSS-xxxx`, UTC; a session whose server never booted has no provenance time)."""
    value = (doc.get("provenance") or {}).get("started_at")
    if isinstance(value, str) and value:
        return value
    m = _SESSION_TIME.match(str(doc.get("session_id") or ""))
    if m:
        when = _dt.datetime.strptime(m.group(1), "%Y%m%d-%H%M%S").replace(tzinfo=_dt.UTC)
        return when.isoformat(timespec="seconds")
    return "1970-01-01T00:00:00+00:00"


def run_verdict(doc: Mapping[str, Any]) -> str:
    if doc.get("incomplete"):
        return INCOMPLETE
    status = doc.get("exitstatus")
    if not isinstance(status, int) or isinstance(status, bool):
        return UNKNOWN
    return PASSED if status == 0 else FAILED if status == 1 else ERROR


class NotAResultFile(ValueError):
    pass


def run_row(doc: Mapping[str, Any], source: str = "") -> dict[str, Any]:
    """The glmf_runs row of a result document (raises NotAResultFile for anything else)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("gates"), Mapping) or not doc.get("session_id"):
        raise NotAResultFile("not a pytest-glmf result file (needs 'session_id' and 'gates')")
    prov = doc.get("provenance") or {}
    lane = _text((doc.get("lane") or {}).get("name")) or _text(prov.get("lane")) or "?"
    key = LaneKey.from_provenance({**prov, "engine": prov.get("engine") or (doc.get("lane") or {}).get("engine")},
                                  lane)
    status = doc.get("exitstatus")
    return {
        "session_id": str(doc["session_id"]), "lane": key.lane, "started_at": started_at(doc),
        "verdict": run_verdict(doc), "exitstatus": status if isinstance(status, int) else None,
        "incomplete": json.dumps(list(doc.get("incomplete") or [])), "engine": key.engine,
        "engine_version": _text(prov.get("engine_version")), "image": _text(prov.get("image")),
        "image_digest": _text(prov.get("image_digest")), "model_revision": key.model_revision, "gpu": key.gpu,
        "launcher": _text(prov.get("launcher")), "git_commit": _text(prov.get("git_commit")),
        "plugin_version": _text(prov.get("plugin_version")),
        "result_schema": doc.get("schema") if isinstance(doc.get("schema"), int) else None,
        "source": source,
        "stored_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "document": json.dumps(doc, default=str, allow_nan=True),
    }


def metric_rows(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, str, float, float | None]]:
    """(gate, key, metric, value, spread_pct) for every known metric the document recorded."""
    for gate, entries in (doc.get("gates") or {}).items():
        if not isinstance(entries, Mapping):
            continue
        for key, entry in entries.items():
            if not isinstance(entry, Mapping):
                continue
            for metric, value in numeric_metrics(gate, entry).items():
                yield gate, str(key), metric, value, spread_of(entry, metric)
