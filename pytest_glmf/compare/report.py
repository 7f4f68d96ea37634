"""Rendering only: several lanes' result documents -> the recipe's comparison tables (terminal and
Markdown), the crossover sentences, and one PNG with each lane's curve.

The curve table has the recipe's shape: users as rows, lanes as columns, each cell
`aggregate · per-user/user · p95 TTFT`, and a flag where the row is not a measurement of that many
users ("[16 users on 7 seats]"); the lanes' seats head their columns. Then each gate's own table
(`GateReport.compare`, declared in its folder: acceptance per prompt class, capacity and frontier,
drift per candidate, the boot facts side by side).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from pytest_glmf.compare.judge import Crossover, judge
from pytest_glmf.compare.lanecurve import LaneCurve, LaneRow, from_document, lane_name, workload_difference
from pytest_glmf.gates.registry import GATES, metric_label, report_hooks
from pytest_glmf.gates.spec import Table
from pytest_glmf.results.plotting import pyplot, run_verdict, save_png
from pytest_glmf.results.report import incomplete_line
from pytest_glmf.text import fit_table, fmt, md_table, wrap

DEFINITIONS = [
    "cell: aggregate tok/s · per-user tok/s per user · TTFT p95, in recipe units; [flag]: the row is not a "
    "measurement of that many users (seat-starved, KV-starved or invalid) and no comparison uses it.",
    "crossover: from users values valid on both lanes; a lane wins where it leads by more than the margin, the two "
    "rows' half run-to-run ranges summed (at least 1 % of the larger value); else within noise.",
    "bytes per seat: the state pool's size from the boot log divided by its seats (slots / slots per request).",
]


def _short(reason: str) -> str:
    return reason.split(": ", 1)[1] if reason.startswith("seat-starved: ") else reason


def _tok_s(v: float | None) -> str:
    """The recipe's way: 1,180 and 743 tok/s whole, below 100 one decimal."""
    return fmt(v) if v is None or abs(v) < 100 else f"{v:,.0f}"


def _cell(row: LaneRow | None) -> str:
    if row is None:
        return "-"
    per_user, agg, ttft = row.get("per_user_tok_s"), row.get("aggregate_tok_s"), row.get("ttft_p95_s")
    parts = [_tok_s(agg), f"{_tok_s(per_user)}/user"] + ([f"p95 {fmt(ttft)} s"] if ttft is not None else [])
    text = " · ".join(parts)
    return text + (f" [{_short(row.excluded)}]" if row.excluded else "")


def _seats(curve: LaneCurve) -> Any:
    facts = _boot(curve.doc)
    if facts.get("max_running_requests") is not None:
        return facts["max_running_requests"]
    return next((r.values.get("seats") for r in curve.rows if r.values.get("seats") is not None), None)


def _boot(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((doc.get("gates") or {}).get("boot") or {}).get("facts") or {}


def curve_table(curves: Sequence[LaneCurve]) -> tuple[list[str], list[list[str]]]:
    header = ["users", *(f"{c.name} ({fmt(_seats(c))} seats)" for c in curves)]
    users = sorted({r.users for c in curves for r in c.rows})
    return header, [[_users_cell(u, curves), *(_cell(c.row(u)) for c in curves)] for u in users]


def _users_cell(users: int, curves: Sequence[LaneCurve]) -> str:
    diff = workload_difference([c.row(users) for c in curves], [c.name for c in curves])
    return f"{users} [workloads differ: {diff}]" if diff else str(users)


def workload_warning(curves: Sequence[LaneCurve]) -> str | None:
    """One line when some users value's rows sent different workloads (no comparison uses them)."""
    users = [u for u in sorted({r.users for c in curves for r in c.rows})
             if workload_difference([c.row(u) for c in curves], [c.name for c in curves])]
    if not users:
        return None
    return (f"WARNING: the lanes ran different workloads at {', '.join(map(str, users))} users (see the notes "
            "under the curve table); those rows are not compared")


def lanes_by_key(lanes: Sequence[tuple[str, Mapping[str, Any]]], gate: str, cell: Callable[[Mapping[str, Any]], str],
                 key_of: Callable[[str, Mapping[str, Any]], str | None]) -> Table:
    """A table of the gate's entries across lanes: a row per key (`key_of`; None: not shown), a
    column per lane, each cell the entry as `cell` says it, "-" where the lane has none."""
    table: dict[str, dict[str, str]] = {}
    for name, doc in lanes:
        for key, entry in (((doc.get("gates") or {}).get(gate)) or {}).items():
            if isinstance(entry, Mapping) and (k := key_of(key, entry)) is not None:
                table.setdefault(k, {})[name] = cell(entry)
    names = [name for name, _ in lanes]
    return ["", *names], [[k, *(v.get(name, "-") for name in names)] for k, v in table.items()]


def gate_tables(curves: Sequence[LaneCurve]) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(gate, title, header, rows) of each gate's table in the comparison (`GateReport.compare`,
    declared in the gate's folder), in their declared order; a table without rows is left out."""
    lanes = [(c.name, c.doc) for c in curves]
    declared = [(hooks.compare, gate) for gate in GATES if (hooks := report_hooks(gate)).compare is not None]
    out = []
    for table, gate in sorted(declared, key=lambda d: d[0].rank):
        header, body = table.table(lanes)
        if body:
            out.append((gate, table.title, header, body))
    return out


def crossovers(curves: Sequence[LaneCurve], metric: str = "per_user_tok_s") -> list[Crossover]:
    """Every pair of lanes with curve rows, in the order given."""
    with_rows = [c for c in curves if c.rows]
    return [judge(a, b, metric) for a, b in combinations(with_rows, 2)]


def _sections(docs: Sequence[Mapping[str, Any]], metric: str) -> list[tuple[str, list[str], list[list[str]] | str]]:
    curves = lane_curves(docs)
    out: list[tuple[str, list[str], list[list[str]] | str]] = []
    if warning := workload_warning(curves):
        out.append(("Workloads", [], warning))
    header, body = curve_table(curves)
    if body:
        out.append(("Concurrency curve by lane", header, body))
    judged = crossovers(curves, metric)
    if judged:
        lines = [c.sentence() for c in judged]
        excluded = sorted({(lane, u, why) for c in judged for lane, u, why in c.excluded}, key=lambda x: (x[0], x[1]))
        lines += [f"excluded: {lane} @ {u} users: {why}" for lane, u, why in excluded]
        out.append(("Crossover", [], "\n".join(lines)))
    out += [(title, header, body) for _, title, header, body in gate_tables(curves)]
    return out


def lane_curves(docs: Sequence[Mapping[str, Any]]) -> list[LaneCurve]:
    """One LaneCurve per document; a lane name given twice gets its session id appended."""
    names = [lane_name(d) for d in docs]
    return [from_document(d, n if names.count(n) == 1 else f"{n}@{d.get('session_id', i)}")
            for i, (d, n) in enumerate(zip(docs, names))]


def _headline(docs: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for d in docs:
        prov = d.get("provenance") or {}
        bits = [str(x) for x in (prov.get("engine"), prov.get("engine_version"), prov.get("image")) if x]
        incomplete = " INCOMPLETE" if d.get("incomplete") else ""
        parts.append(f"{lane_name(d)} (session {d.get('session_id', '?')}{', ' + ' '.join(bits) if bits else ''})"
                     f"{incomplete}")
    return "pytest-glmf comparison: " + "; ".join(parts)


def incomplete_lines(docs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why each incomplete lane stopped before the end, as `glmf report` says it ("INCOMPLETE LANE: why")."""
    return [line for d in docs if (line := incomplete_line(d, lane_name(d)))]


def comparison_report(docs: Sequence[Mapping[str, Any]], metric: str = "per_user_tok_s") -> str:
    """The terminal comparison of several lanes' result documents; the incomplete lanes' reasons
    under the headline."""
    parts = ["\n".join(map(wrap, [_headline(docs), *incomplete_lines(docs)]))]
    for title, header, body in _sections(docs, metric):
        text = "\n".join(map(wrap, body.splitlines())) if isinstance(body, str) else fit_table(header, body)
        parts.append(f"{title}\n{text}")
    return "\n\n".join(parts)


def comparison_markdown(docs: Sequence[Mapping[str, Any]], metric: str = "per_user_tok_s") -> str:
    """The same comparison as Markdown, for a PR comment."""

    out = [f"## {_headline(docs)}", *(f"**{line}**" for line in incomplete_lines(docs))]
    for title, header, body in _sections(docs, metric):
        if isinstance(body, str):
            out.append(f"### {title}\n\n" + "\n".join(f"- {line}" for line in body.splitlines()))
        else:
            out.append(f"### {title}\n\n{md_table(header or [''] * len(body[0]), body)}")
    out.append("\n".join(f"- {d}" for d in DEFINITIONS))
    return "\n\n".join(out) + "\n"


def plot_lanes(docs: Sequence[Mapping[str, Any]], out: str | Path, metric: str = "per_user_tok_s") -> Path:
    """PNG: each lane's per-user tok/s (solid; excluded rows hollow) and TTFT p95 against users."""
    return save_png(lanes_figure(docs, metric), out)


def lanes_figure(docs: Sequence[Mapping[str, Any]], metric: str = "per_user_tok_s") -> Any:
    """The figure of `plot_lanes`. A lane's line joins only rows that compare: it breaks (NaN) at a
    row excluded from the comparison (seat/KV-starved, invalid) and at a number not measured, as the
    HTML pages' charts do; rows whose users shared one prompt have a dashed line of their own."""
    curves = [c for c in lane_curves(docs) if c.rows]
    if not curves:
        raise ValueError("none of the results has curve rows to plot")
    plt = pyplot()
    fig, (ax_tok, ax_ttft) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for i, c in enumerate(curves):
        color = f"C{i}"
        for ax, key in ((ax_tok, metric), (ax_ttft, "ttft_p95_s")):
            pts = [(r.users, r.get(key), r.excluded) for r in c.rows if r.get(key) is not None]
            # no line joins rows of users' own prompts to rows that shared one (TTFT would "fall" there),
            # nor runs through a row that is not a measurement or a number not measured (NaN breaks it)
            for shared in (False, True):
                part = [r for r in c.rows if bool(r.values.get("shared_prefix")) == shared]
                ys = [float("nan") if r.get(key) is None or r.excluded else r.get(key) for r in part]
                ax.plot([r.users for r in part], ys, "--" if shared else "-", color=color, alpha=0.6)
            good = [p for p in pts if not p[2]]
            bad = [p for p in pts if p[2]]
            ax.plot([p[0] for p in good], [p[1] for p in good], "o", color=color,
                    label=c.name if ax is ax_tok else None)
            if bad:
                ax.plot([p[0] for p in bad], [p[1] for p in bad], "o", mfc="none", color=color,
                        label=f"{c.name}: not a measurement (seats/KV/invalid)" if ax is ax_tok else None)
    shared_users = sorted({r.users for c in curves for r in c.rows if r.values.get("shared_prefix")})
    if shared_users:
        for ax in (ax_tok, ax_ttft):
            ax.axvspan(min(shared_users) - 0.5, max(shared_users) + 0.5, color="tab:gray", alpha=0.15,
                       label="prefix shared by all users: a prefix cache computes it once (TTFT not comparable)"
                       if ax is ax_ttft else "_nolegend_")
        ax_ttft.legend(fontsize=8)

    ax_tok.set_ylabel(metric_label("curve", metric))
    ax_ttft.set_ylabel(metric_label("curve", "ttft_p95_s"))
    ax_ttft.set_xlabel("concurrent users")
    ax_tok.set_title("Lanes compared: " + "; ".join(
        f"{c.name} (image {(c.doc.get('provenance') or {}).get('image') or '-'}, "
        f"{str((c.doc.get('provenance') or {}).get('started_at') or '')[:16].replace('T', ' ') or 'date unknown'}, "
        f"{run_verdict(c.doc)})" for c in curves), fontsize=9, wrap=True)
    ax_tok.legend(fontsize=8)
    for ax in (ax_tok, ax_ttft):
        ax.grid(alpha=0.3)
    return fig
