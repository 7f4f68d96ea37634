"""Rendering only: several lanes' result documents -> the recipe's comparison tables (terminal and
Markdown), the crossover sentences, and one PNG with each lane's curve.

The curve table has the recipe's shape: users as rows, lanes as columns, each cell
`aggregate · per-user/user · p95 TTFT`, and a flag where the row is not a measurement of that many
users ("[16 users on 7 seats]"); the lanes' seats head their columns. Then acceptance per prompt
class, capacity and frontier, drift per candidate, and the boot facts side by side.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from pytest_glmf.compare.judge import Crossover, judge
from pytest_glmf.compare.lanecurve import LaneCurve, LaneRow, from_document, lane_name, workload_difference
from pytest_glmf.gates.registry import metric_label
from pytest_glmf.results.plotting import pyplot, run_verdict, save_png
from pytest_glmf.text import fit_table, fmt, md_table, wrap

BOOT_ROWS = [("seats (max_running_requests)", "max_running_requests"),
             ("requested seats", "requested_max_running_requests"), ("why capped", "cap_reason"),
             ("max_mamba_cache_size", "max_mamba_cache_size"), ("state slots per request", "state_slots_per_request"),
             ("KV pool tokens", "kv_tokens"), ("KV cache GiB", "kv_cache_memory_gib"), ("context", "context_len")]

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


def _by_key(curves: Sequence[LaneCurve], gate: str, cell: Callable[[Mapping[str, Any]], str],
            key_of: Callable[[str, Mapping[str, Any]], str | None]) -> tuple[list[str], list[list[str]]]:
    table: dict[str, dict[str, str]] = {}
    for c in curves:
        for key, entry in (((c.doc.get("gates") or {}).get(gate)) or {}).items():
            if isinstance(entry, Mapping) and (k := key_of(key, entry)) is not None:
                table.setdefault(k, {})[c.name] = cell(entry)
    return ["", *(c.name for c in curves)], [[k, *(v.get(c.name, "-") for c in curves)] for k, v in table.items()]


def acceptance_table(curves: Sequence[LaneCurve]) -> tuple[list[str], list[list[str]]]:
    def cell(e: Mapping[str, Any]) -> str:
        return f"{fmt(e.get('accept_rate'))} ({fmt(e.get('tok_s'))} tok/s)"
    return _by_key(curves, "acceptance", cell, lambda k, e: str(e["class"]) if e.get("class") else None)


def capacity_table(curves: Sequence[LaneCurve]) -> tuple[list[str], list[list[str]]]:
    def cell(e: Mapping[str, Any]) -> str:
        users = fmt(e.get("users")) if "users" in e else fmt(e.get("rate_per_s")) + "/s"
        return f"{users} (stopped by {e.get('stopped_by') or '-'})"
    return _by_key(curves, "capacity", cell, lambda k, e: k)


def drift_table(curves: Sequence[LaneCurve]) -> tuple[list[str], list[list[str]]]:
    rows = []
    for c in curves:
        for key, e in (((c.doc.get("gates") or {}).get("drift")) or {}).items():
            if isinstance(e, Mapping) and "mean_abs_dlogp" in e:
                rows.append([c.name, str(e.get("candidate") or key), fmt(e.get("mean_abs_dlogp")),
                             fmt(e.get("argmax_mismatch")), _pair(e.get("ci95")), fmt(e.get("prompts"))])
    return ["lane", "candidate", "mean |dlogp|", "argmax mismatch", "ci95", "prompts"], rows


def _pair(v: Any) -> str:
    return f"[{fmt(v[0])}, {fmt(v[1])}]" if isinstance(v, list) and len(v) == 2 else fmt(v)


def boot_table(curves: Sequence[LaneCurve]) -> tuple[list[str], list[list[str]]]:
    # why capped: the cap line's reason, not the engine's advice after it (the boot gate prints that)
    facts = [{**f, "cap_reason": str(f["cap_reason"]).split("): ")[0] + ")" if f.get("cap_reason") else None}
             for f in (_boot(c.doc) for c in curves)]
    rows = [[label, *(fmt(f.get(key)) for f in facts)] for label, key in BOOT_ROWS
            if any(f.get(key) is not None for f in facts)]
    pools = [((c.doc.get("gates") or {}).get("boot") or {}).get("state_pool") or {} for c in curves]
    if any(p.get("gb_per_seat") is not None for p in pools):
        rows.append(["state pool GiB", *(fmt(p.get("total_gb")) for p in pools)])
        rows.append(["state pool GiB per seat", *(fmt(p.get("gb_per_seat")) for p in pools)])
    origins = [str((c.doc.get("lane") or {}).get("origin") or "") for c in curves]
    if any(origins):
        rows.insert(0, ["derived from", *(o or "-" for o in origins)])
    return ["", *(c.name for c in curves)], rows


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
    for title, make in (("Speculative acceptance per prompt class by lane", acceptance_table),
                        ("Capacity and frontier by lane", capacity_table),
                        ("Log-prob drift per candidate", drift_table), ("Boot facts side by side", boot_table)):
        header, body = make(curves)
        if body:
            out.append((title, header, body))
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


def comparison_report(docs: Sequence[Mapping[str, Any]], metric: str = "per_user_tok_s") -> str:
    """The terminal comparison of several lanes' result documents."""
    parts = [wrap(_headline(docs))]
    for title, header, body in _sections(docs, metric):
        text = "\n".join(map(wrap, body.splitlines())) if isinstance(body, str) else fit_table(header, body)
        parts.append(f"{title}\n{text}")
    return "\n\n".join(parts)


def comparison_markdown(docs: Sequence[Mapping[str, Any]], metric: str = "per_user_tok_s") -> str:
    """The same comparison as Markdown, for a PR comment."""

    out = [f"## {_headline(docs)}"]
    for title, header, body in _sections(docs, metric):
        if isinstance(body, str):
            out.append(f"### {title}\n\n" + "\n".join(f"- {line}" for line in body.splitlines()))
        else:
            out.append(f"### {title}\n\n{md_table(header or [''] * len(body[0]), body)}")
    out.append("\n".join(f"- {d}" for d in DEFINITIONS))
    return "\n\n".join(out) + "\n"


def plot_lanes(docs: Sequence[Mapping[str, Any]], out: str | Path, metric: str = "per_user_tok_s") -> Path:
    """PNG: each lane's per-user tok/s (solid; excluded rows hollow) and TTFT p95 against users."""

    curves = [c for c in lane_curves(docs) if c.rows]
    if not curves:
        raise ValueError("none of the results has curve rows to plot")
    plt = pyplot()
    fig, (ax_tok, ax_ttft) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for i, c in enumerate(curves):
        color = f"C{i}"
        for ax, key in ((ax_tok, metric), (ax_ttft, "ttft_p95_s")):
            pts = [(r.users, r.get(key), r.excluded) for r in c.rows if r.get(key) is not None]
            # no line joins rows of users' own prompts to rows that shared one (TTFT would "fall" there)
            for shared in (False, True):
                part = [p for p, r in zip(pts, c.rows) if bool(r.values.get("shared_prefix")) == shared]
                ax.plot([p[0] for p in part], [p[1] for p in part], "--" if shared else "-", color=color, alpha=0.6)
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
    return save_png(fig, out)
