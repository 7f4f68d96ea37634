"""What the curve gate adds to the reports beyond its table (`GateReport`, gates/spec.py): the
`prefix` column and the note under the table where rows shared a prompt prefix, the bound of a row
by its users, the HTML page's charts, and the rows of an older `glmf curve --json`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_glmf.gates.curve.api import row_record
from pytest_glmf.gates.spec import GateReport
from pytest_glmf.results import svg
from pytest_glmf.results.baseline import spread_of
from pytest_glmf.results.html_blocks import is_number
from pytest_glmf.results.html_gates import bound_of, row_marks


def with_prefix(entries: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The rows with the column a report derives from them: `prefix` ("shared": its users all sent
    one prompt, which a prefix cache computed once, so its TTFT is not the others'; "own") when any
    row shared one."""
    if not any(isinstance(v, Mapping) and v.get("shared_prefix") for v in entries.values()):
        return dict(entries), ()
    return ({k: {**v, "prefix": "shared" if v.get("shared_prefix") else "own"} if isinstance(v, Mapping) else v
             for k, v in entries.items()}, ("prefix",))


def shared_prefix_note(entries: Mapping[str, Any]) -> str | None:
    """Under the curve table: which rows shared a prompt prefix, and what that does to their TTFT."""
    shared = sorted(v["users"] for v in entries.values() if isinstance(v, dict) and v.get("shared_prefix")
                    and isinstance(v.get("users"), int))
    if not shared:
        return None
    return (f"prefix shared: at {', '.join(map(str, shared))} users every user sent the same prompt, which a prefix "
            "cache computes once: their TTFT is not comparable with the rows of users' own prompts")


def notes(entries: Mapping[str, Any]) -> list[str]:
    note = shared_prefix_note(entries)
    return [note] if note else []


def row_bound(section: Mapping[str, Any], key: str, entry: Mapping[str, Any], metric: str) -> Any:
    """A row's bound is its users' row of the section's `rows`."""
    row = next((r for r in section.get("rows") or [] if r.get("users") == entry.get("users")), None)
    return (row or {}).get(metric)


# ---------------------------------------------------------------------------- the HTML charts


SHARED_PREFIX = "prefix shared (not comparable)"       # the series' name; its points say why
SHARED_WHY = "every user sent the same prompt, which a prefix cache computes once: not comparable with own prompts"


def _by_users(entries: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    rows = [(k, v) for k, v in entries.items() if isinstance(v, Mapping) and is_number(v.get("users"))]
    return sorted(rows, key=lambda kv: kv[1]["users"])


def _mark(entry: Mapping[str, Any]) -> str:
    return "; ".join(label for label, kind, _ in row_marks(entry) if kind in ("bad", "warn"))


def _shared_prefix(entry: Mapping[str, Any]) -> bool:
    memory = entry.get("memory")
    return bool(entry.get("shared_prefix")) or (isinstance(memory, Mapping) and (memory.get("shared_tokens") or 0) > 0)


def curve_charts(entries: Mapping[str, Any], bounds: Mapping[str, Any]) -> list[str]:
    """Per-user tok/s, aggregate tok/s and TTFT against users, as the PNG draws them
    (results/plotting.py): rows whose users shared a prompt prefix hollow, in a series of their own
    that no line joins to the rows of users' own prompts."""
    rows = _by_users(entries)
    out = []
    for metrics, label in ((("per_user_tok_s",), "per-user tok/s"), (("aggregate_tok_s",), "aggregate tok/s"),
                           (("ttft_p50_s", "ttft_p95_s"), "TTFT (s)")):
        series = []
        for metric in metrics:
            color = svg.COLORS[metrics.index(metric)]     # a metric's own and shared-prefix points alike
            own, shared = [], []
            for key, e in rows:
                if is_number(e.get(metric)):
                    lo, hi = svg.spread_bar(e[metric], spread_of(e, metric))
                    if _shared_prefix(e):
                        why = "; ".join(x for x in (SHARED_WHY, _mark(e)) if x)
                        shared.append(svg.Point(e["users"], e[metric], lo, hi, why, key))
                    else:
                        own.append(svg.Point(e["users"], e[metric], lo, hi, _mark(e), key))
            if own:
                series.append(svg.Series(metric, own, color=color))
            if shared:
                series.append(svg.Series(f"{metric}, {SHARED_PREFIX}", shared, color=color, joined=False))
            for side in ("min", "max"):
                bpts = [svg.Point(e["users"], bound_of("curve", bounds, k, e, metric)[side]) for k, e in rows
                        if side in bound_of("curve", bounds, k, e, metric)]
                if bpts:
                    series.append(svg.Series(f"{metric} {side} (thresholds)", bpts, dashed=True,
                                             color="#b3261e"))
        if series:
            out.append(svg.line_chart(svg.Chart(f"{label} against users", label, "concurrent users", series,
                                                marked_legend="hollow: not a measurement of its users")))
    return out


# ---------------------------------------------------------------------------- older files


def legacy_rows(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The rows of what an older `glmf curve --json` wrote (its rows and knee at top level)."""
    if not (isinstance(data.get("rows"), list) and "knee" in data):
        return None
    return {f"users={r['users']}": row_record(dict(r)) for r in data["rows"] if isinstance(r, Mapping) and "users" in r}


REPORT = GateReport(derive=with_prefix, notes=notes, bound=row_bound, charts=curve_charts, legacy=legacy_rows)
