"""Reading the history: runs per lane, a metric's trend, CSV, the last K passing runs as a baseline,
and the series the slow-drift test reads. Plain functions over a store (store.py); rendering
returns text, the caller prints."""
from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from pytest_glmf.gates.registry import GATES, metric_directions
from pytest_glmf.results import plotting
from pytest_glmf.results.baseline import median_baseline
from pytest_glmf.results.history.schema import COMPLETE, PASSED, LaneKey, run_row
from pytest_glmf.results.history.store import Run, SqlStore
from pytest_glmf.text import fmt, render_table

MetricId = tuple[str, str, str]   # (gate, key, metric)


def run_summary(run: Run) -> dict[str, Any]:
    """What a report says about one run that made a baseline."""
    return {"session_id": run.session_id, "started_at": run.started_at, "image": run.image or None,
            "engine_version": run.engine_version or None, "verdict": run.verdict}


def history_baseline(store: SqlStore, key: LaneKey, k: int) -> dict[str, Any] | None:
    """The baseline of `--glmf-baseline history:K`: the median of the last K passing runs on the same
    lane, GPU, model revision and engine, their spread as the allowed noise (baseline.median_baseline).
    None when no passing run is stored yet. Fewer than K runs are used, and the label says so."""
    runs = store.runs(key=key, verdicts=[PASSED], limit=k)
    if not runs:
        return None
    values: dict[MetricId, list[tuple[float, float | None]]] = defaultdict(list)
    for m in store.metrics(r.id for r in runs):
        values[(m.gate, m.key, m.metric)].append((m.value, m.spread_pct))
    oldest_first = list(reversed(runs))
    few = f" (only {len(runs)} stored, {k} asked)" if len(runs) < k else ""
    label = (f"history: median of the last {len(runs)} passing run(s){few} on {key.describe()}: "
             + ", ".join(r.session_id for r in oldest_first))
    prov = {"lane": key.lane, "engine": key.engine, "model_revision": key.model_revision or None}
    return median_baseline(values, label, [run_summary(r) for r in oldest_first], prov)


def metric_series(store: SqlStore, key: LaneKey, last: int) -> dict[MetricId, list[tuple[str, float]]]:
    """(session id, value) per metric over the last `last` complete runs on the lane key, oldest
    first: what the slow-drift test reads (passing and failing runs alike: a run failed by the drift
    it shows is still part of the sequence; killed or interrupted runs are not)."""
    runs = list(reversed(store.runs(key=key, verdicts=list(COMPLETE), limit=last)))
    sessions = {r.id: r.session_id for r in runs}
    order = {r.id: i for i, r in enumerate(runs)}
    out: dict[MetricId, list[tuple[int, str, float]]] = defaultdict(list)
    for m in store.metrics(sessions):
        out[(m.gate, m.key, m.metric)].append((order[m.run_id], sessions[m.run_id], m.value))
    return {k: [(s, v) for _, s, v in sorted(rows)] for k, rows in out.items()}


def runs_beside(store: SqlStore, doc: dict[str, Any], k: int) -> list[tuple[Run, dict[MetricId, float]]]:
    """The last K stored runs on the same lane key as a result document (itself left out), oldest
    first, each with its metrics: what `glmf report --history K` shows beside that run."""

    row = run_row(doc)
    key = LaneKey(row["lane"], row["gpu"], row["model_revision"], row["engine"])
    runs = [r for r in store.runs(key=key, limit=k + 1) if r.session_id != row["session_id"]][:k]
    values: dict[int, dict[MetricId, float]] = defaultdict(dict)
    for m in store.metrics(r.id for r in runs):
        values[m.run_id][(m.gate, m.key, m.metric)] = m.value
    return [(r, values[r.id]) for r in reversed(runs)]


# ---------------------------------------------------------------------------- glmf history


def runs_table(runs: Sequence[Run]) -> str:
    """One table per lane, newest first: when, which session, image, engine, weights, GPU, verdict."""
    by_lane: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_lane[r.lane].append(r)
    parts = []
    for lane in sorted(by_lane):
        rows = [[r.started_at.replace("+00:00", "Z"), r.session_id, r.image or "-",
                 f"{r.engine or '-'} {r.engine_version}".strip(), r.model_revision or "-", r.gpu or "-",
                 r.verdict + (f": {r.incomplete[0]}" if r.incomplete else "")] for r in by_lane[lane]]
        parts.append(f"lane {lane} ({len(rows)} run(s), newest first)\n"
                     + render_table(rows, ["started", "session", "image", "engine", "model revision", "gpu",
                                           "verdict"]))
    return "\n\n".join(parts)


def parse_metric(name: str) -> tuple[str, str]:
    """`curve.per_user_tok_s` -> ("curve", "per_user_tok_s"); raises ValueError naming known metrics."""

    gate, _, metric = name.partition(".")
    if metric not in metric_directions(gate):
        known = ", ".join(f"{g}.{m}" for g in GATES for m in metric_directions(g))
        raise ValueError(f"unknown metric {name!r}; known: {known}")
    return gate, metric


def trend(store: SqlStore, gate: str, metric: str, *, lane: str | None = None, key: str | None = None,
          last: int = 20) -> dict[str, tuple[list[Run], dict[str, list[float | None]]]]:
    """Per lane: its last `last` runs (oldest first) and, per recorded key, the metric's value in
    each run (None where that run did not record it)."""
    out = {}
    lanes = [lane] if lane else sorted({r.lane for r in store.runs()})
    for name in lanes:
        runs = list(reversed(store.runs(lane=name, limit=last)))
        index = {r.id: i for i, r in enumerate(runs)}
        columns: dict[str, list[float | None]] = {}
        for m in store.metrics(index, gate=gate, metric=metric):
            if key is None or m.key == key:
                columns.setdefault(m.key, [None] * len(runs))[index[m.run_id]] = m.value
        if columns:
            out[name] = (runs, dict(sorted(columns.items(), key=lambda kv: key_order(kv[0]))))
    return out


def key_order(key: str) -> tuple[float, str]:
    """users=8 before users=16 (numeric keys in numeric order), others alphabetically."""
    _, _, value = key.partition("=")
    try:
        return float(value), key
    except ValueError:
        return float("inf"), key


def trend_table(gate: str, metric: str, trends: dict[str, tuple[list[Run], dict[str, list[float | None]]]]) -> str:
    parts = []
    for lane, (runs, columns) in trends.items():
        rows = [[r.started_at.replace("+00:00", "Z"), r.session_id, r.image or "-", r.verdict,
                 *(fmt(columns[k][i]) for k in columns)] for i, r in enumerate(runs)]
        parts.append(f"{gate}.{metric} on lane {lane} (oldest first)\n"
                     + render_table(rows, ["started", "session", "image", "verdict", *columns]))
    return "\n\n".join(parts)


def plot_trend(gate: str, metric: str, trends: dict[str, tuple[list[Run], dict[str, list[float | None]]]],
               out: str | Path) -> Path:
    """PNG: the metric per run, one line per lane and key (results/plotting.py: x labels the runs'
    start times and images; failed and incomplete runs hollow)."""

    return plotting.plot_trend(gate, metric, trends, out)


CSV_COLUMNS = ["session_id", "lane", "started_at", "verdict", "image", "image_digest", "engine", "engine_version",
               "model_revision", "gpu", "launcher", "git_commit", "gate", "key", "metric", "value", "spread_pct"]


def write_csv(store: SqlStore, out: IO[str], *, lane: str | None = None) -> int:
    """One row per (run, gate, key, metric), oldest run first (the long form spreadsheets and
    pandas pivot well); returns the number of rows."""
    runs = list(reversed(store.runs(lane=lane)))
    by_id = {r.id: r for r in runs}
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    n = 0
    order = {r.id: i for i, r in enumerate(runs)}
    metrics = sorted(store.metrics(by_id), key=lambda m: (order[m.run_id], m.gate, key_order(m.key), m.metric))
    for m in metrics:
        r = by_id[m.run_id]
        writer.writerow([r.session_id, r.lane, r.started_at, r.verdict, r.image, r.image_digest, r.engine,
                         r.engine_version, r.model_revision, r.gpu, r.launcher, r.git_commit, m.gate, m.key,
                         m.metric, repr(m.value), "" if m.spread_pct is None else repr(m.spread_pct)])
        n += 1
    return n
