"""The comparison of lanes (`glmf compare ... --html OUT.html`) and the run history (`glmf history
... --html OUT.html`) as self-contained HTML pages, built like the session's page (results/html.py)
from the same data as their terminal and Markdown forms: compare/report.py's tables and crossover
sentences, and the history store's runs and metrics (results/history/queries.py).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from pytest_glmf.compare import report as cmp
from pytest_glmf.gates.curve.report import SHARED_PREFIX, SHARED_WHY
from pytest_glmf.gates.registry import gate_title
from pytest_glmf.results import svg
from pytest_glmf.results.history.queries import key_order
from pytest_glmf.results.html import verdict_of
from pytest_glmf.results.html_blocks import (
    charts,
    definitions,
    metric_doc,
    page,
    section,
    table,
    tag,
    td,
    th,
    unit_of,
)
from pytest_glmf.text import fmt

if TYPE_CHECKING:
    from pytest_glmf.results.history.store import Run, SqlStore

VERDICT_TAG = {"passed": "info", "failed": "bad", "incomplete": "warn", "unknown": "warn"}


# ---------------------------------------------------------------------------- lanes compared


def comparison_page(docs: Sequence[Mapping[str, Any]], metric: str = "per_user_tok_s") -> str:

    curves = cmp.lane_curves(docs)
    names = [c.name for c in curves]
    parts = [f"<h1>pytest-glmf comparison: {escape(', '.join(names))}</h1>",
             f'<p class="sub">{len(docs)} lanes\' result files; the crossover is judged on {escape(metric)}.</p>']
    rows = []
    for c, d in zip(curves, docs):
        prov = d.get("provenance") or {}
        word = verdict_of(d)
        rows.append([td(c.name), f"<td>{tag(word, VERDICT_TAG[word])}</td>", td(str(d.get("session_id", "?"))),
                     td(fmt(prov.get("image"))), td(fmt(prov.get("engine"))), td(fmt(prov.get("engine_version"))),
                     td(fmt(prov.get("model_revision"))), td(" ".join(str(a) for a in (prov.get("argv") or [])[-12:]))])
    parts.append(section("lanes", "Lanes", table([th("lane"), th("verdict"), th("session"), th("image"),
                                                  th("engine"), th("engine version"), th("model revision"),
                                                  th("flags", "last 12")], rows, raw=True)))
    header, body = cmp.curve_table(curves)
    if body:
        parts.append(section("curve", "Concurrency curve by lane",
                             "<p>Each cell: aggregate tok/s · per-user tok/s per user · TTFT p95; [flag]: the row is "
                             "not a measurement of that many users and no comparison uses it.</p>"
                             + table(header, body) + charts(lane_charts(curves, metric))))
    judged = cmp.crossovers(curves, metric)
    if judged:
        lines = [f"<p class=\"crossover\"><b>{escape(c.sentence())}</b></p>" for c in judged]
        excluded = sorted({(lane, u, why) for c in judged for lane, u, why in c.excluded}, key=lambda x: (x[0], x[1]))
        lines.append(definitions(f"excluded: {lane} @ {u} users: {why}" for lane, u, why in excluded))
        parts.append(section("crossover", "Crossover", "".join(lines)))
    for gate, title, header, body in cmp.gate_tables(curves):
        parts.append(section(gate, title, table(header, body)))
    parts.append(section("definitions", "Definitions", definitions(cmp.DEFINITIONS)))
    return page(f"pytest-glmf comparison {' vs '.join(names)}", "\n".join(parts))


def lane_charts(curves: Sequence[Any], metric: str) -> list[str]:
    """Each lane's curve on one chart per quantity (the judged metric, TTFT p95), as the comparison
    reads it: rows that are not a measurement of their users hollow and on no line, rows whose users
    shared a prompt prefix hollow in a series of their own (as the session's page draws them), and
    a row whose number was not measured a break in the line with a cross saying why."""
    out = []
    for key, label in ((metric, metric.replace("_", " ")), ("ttft_p95_s", "TTFT p95 (s)")):
        series = []
        for i, c in enumerate(curves):
            color = svg.COLORS[i % len(svg.COLORS)]
            own, shared, gaps = [], [], []
            for r in c.rows:
                value = r.get(key)
                if value is None:
                    gaps.append((r.users, not_measured(r, key)))
                elif r.values.get("shared_prefix"):     # as the PNG and the tables tell them
                    why = "; ".join(x for x in (SHARED_WHY, r.excluded) if x)
                    shared.append(svg.Point(r.users, value, marked=why, apart=True))
                else:
                    own.append(svg.Point(r.users, value, marked=r.excluded or "", apart=bool(r.excluded)))
            if own or gaps:
                series.append(svg.Series(c.name, own, color=color, gaps=gaps))
            if shared:
                series.append(svg.Series(f"{c.name}, {SHARED_PREFIX}", shared, color=color, joined=False))
        if any(s.points for s in series):
            unit = unit_of("curve", key)
            out.append(svg.line_chart(svg.Chart(f"{label} against users", f"{label}" + (f" ({unit})" if unit and
                                                unit not in label else ""), "concurrent users", series,
                                                marked_legend="hollow: not a measurement of its users, or not "
                                                              "comparable (on no line)")))
    return out


def not_measured(row: Any, metric: str) -> str:
    """Why a row has no number for `metric`: the client's reason (the curve's self-check), else that none was recorded."""
    why = (row.values.get("unmeasured") or {}).get(metric)
    return f"not measured ({why})" if why else "no number recorded"


# ---------------------------------------------------------------------------- the history


def history_page(store: "SqlStore", *, lane: str | None = None, last: int = 20,
                 metrics: Sequence[tuple[str, str]] | None = None, key: str | None = None) -> str:
    """Per lane its last `last` runs (oldest first) and one trend chart per metric recorded
    (`metrics`: only these (gate, metric) pairs; `key`: only this recorded key), images on the x
    axis, failed and incomplete runs hollow."""
    lanes = [lane] if lane else sorted({r.lane for r in store.runs()})
    parts = [f"<h1>pytest-glmf history: {escape(', '.join(lanes) or 'no runs')}</h1>",
             f'<p class="sub">store {escape(store.location.display)}; the last {last} runs per lane, oldest '
             "first.</p>"]
    for name in lanes:
        runs = list(reversed(store.runs(lane=name, limit=last)))
        if runs:
            parts.append(lane_history(name, runs, store, metrics, key))
    if len(parts) == 2:
        parts.append(section("runs", "Runs", "<p>No run stored" + (f" on lane {escape(lane)}" if lane else "")
                             + ".</p>"))
    return page(f"pytest-glmf history {' '.join(lanes)}", "\n".join(parts))


def run_label(i: int, run: "Run") -> str:
    return f"#{i + 1} {run.image or run.engine_version or '-'}"


def lane_history(name: str, runs: list["Run"], store: "SqlStore", metrics: Sequence[tuple[str, str]] | None,
                 key: str | None) -> str:
    labels = [run_label(i, r) for i, r in enumerate(runs)]
    rows = []
    for label, r in zip(labels, runs):
        why = "; ".join(r.incomplete)
        rows.append([td(label), td(r.started_at.replace("+00:00", "Z")), td(r.session_id),
                     f"<td>{tag(r.verdict, VERDICT_TAG.get(r.verdict, 'warn'))}</td>", td(r.image or "-"),
                     td(r.image_digest or "-"), td(r.engine_version or "-"), td(r.model_revision or "-"), td(why)])
    inner = [table([th("run"), th("started"), th("session"), th("verdict"), th("image"), th("image digest"),
                    th("engine version"), th("model revision"), th("incomplete")], rows, raw=True)]
    index = {r.id: i for i, r in enumerate(runs)}
    series: dict[tuple[str, str], dict[str, list[tuple[int, float, float | None]]]] = defaultdict(dict)
    recorded: dict[tuple[str, str], set[int]] = defaultdict(set)    # (gate, key) -> the runs that stored it
    for m in store.metrics(index):
        recorded[(m.gate, m.key)].add(index[m.run_id])
        if (metrics and (m.gate, m.metric) not in metrics) or (key is not None and m.key != key):
            continue
        series[(m.gate, m.metric)].setdefault(m.key, []).append((index[m.run_id], m.value, m.spread_pct))
    figs = []
    for (gate, metric), by_key in sorted(series.items()):
        figs.append(trend_chart(gate, metric, by_key, runs, labels, {k: recorded[(gate, k)] for k in by_key})
                    + trend_table(gate, metric, by_key, labels))
    inner.append(charts(figs) if figs else "<p>No metric stored for these runs.</p>")
    return section(f"lane-{name}", f"Lane {name}: {len(runs)} runs", "".join(inner))


def trend_chart(gate: str, metric: str, by_key: Mapping[str, list[tuple[int, float, float | None]]],
                runs: Sequence["Run"], labels: list[str], recorded: Mapping[str, set[int]] | None = None) -> str:
    """One series per key over the runs (failed and incomplete runs hollow). `recorded`: per key the
    runs that stored any of its numbers; one of them between two of the series' points without
    this metric did not measure it there, and the line breaks at it."""
    unit = unit_of(gate, metric)
    series = []
    for k, points in sorted(by_key.items(), key=lambda kv: key_order(kv[0])):
        pts = []
        for i, value, spread in sorted(points):
            lo, hi = svg.spread_bar(value, spread)
            bad = runs[i].verdict != "passed"
            pts.append(svg.Point(labels[i], value, lo, hi, f"{runs[i].verdict} run" if bad else "",
                                 runs[i].session_id))
        have = [i for i, _, _ in points]
        gaps = [(labels[i], f"{runs[i].session_id}: {gate}.{metric} not measured (the run stored {k}'s other numbers)")
                for i in sorted((recorded or {}).get(k, set()) - set(have)) if min(have) < i < max(have)]
        series.append(svg.Series(k, pts, gaps=gaps))
    title = f"{gate_title(gate)}: {metric}"
    return svg.line_chart(svg.Chart(title, f"{metric}" + (f" ({unit})" if unit else ""), "run (image)", series,
                                    categories=labels, marked_legend="hollow: failed or incomplete run"))


def trend_table(gate: str, metric: str, by_key: Mapping[str, list[tuple[int, float, float | None]]],
                labels: list[str]) -> str:
    rows = []
    for k, points in sorted(by_key.items(), key=lambda kv: key_order(kv[0])):
        values = {i: v for i, v, _ in points}
        rows.append([td(k), *(td(fmt(values.get(i)), "num") for i in range(len(labels)))])
    doc = metric_doc(gate, metric)
    return (table([th(f"{gate}.{metric}", unit_of(gate, metric), doc), *(th(f"#{i + 1}") for i in range(len(labels)))],
                  rows, raw=True))

