"""Which numbers of a gate's recorded entries a report shows, in which order, and how a value that
is not a number reads: one home for the terminal and Markdown report (results/report.py) and the
HTML page (results/html_gates.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_glmf.gates.registry import GATES, report_hooks
from pytest_glmf.text import fmt


def preferred_columns(gate: str) -> list[str]:
    """The columns a gate shows first, in its order (its spec's `report_columns`); other scalar
    fields follow in the order recorded."""
    spec = GATES.get(gate)
    return list(spec.report_columns) if spec is not None else []


def cell(value: Any) -> str:
    if isinstance(value, list):
        if value and all(isinstance(v, (int, float)) for v in value) and len(value) == 2:
            return f"[{fmt(value[0])}, {fmt(value[1])}]"
        if value and all(isinstance(v, dict) for v in value):
            return "; ".join(" ".join(f"{fmt(v)}" for v in d.values()) for d in value)
        return str(len(value)) if len(value) > 4 else ", ".join(fmt(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items() if not isinstance(v, (dict, list)))
    return fmt(value)


def derived(gate: str, entries: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The entries with the columns the gate's report derives from them (`GateReport.derive`: a
    curve row's `prefix`, own or shared), and those columns; the entries as they are, and none,
    where it derives nothing. The HTML page's cells read the same (html_gates.py)."""
    derive = report_hooks(gate).derive
    return derive(entries) if derive is not None else (dict(entries), ())


def with_derived(gate: str, entries: Mapping[str, Any]) -> dict[str, Any]:
    return derived(gate, entries)[0]


def table_notes(gate: str, entries: Mapping[str, Any]) -> list[str]:
    """What the gate says under its table (`GateReport.notes`: curve's rows that shared a prompt prefix)."""
    notes = report_hooks(gate).notes
    return notes(entries) if notes is not None else []


def gate_table(gate: str, entries: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows for one gate's recorded entries (one row per key)."""
    rows = [(k, v) for k, v in entries.items() if isinstance(v, dict)]
    preferred = preferred_columns(gate)
    cols = [c for c in preferred if any(c in v for _, v in rows)]
    for _, v in rows:
        for c, x in v.items():
            if c not in cols and not isinstance(x, (dict, list)) and len(cols) < 12:
                cols.append(c)
    shown, extra = derived(gate, dict(rows))
    if extra:
        rows = list(shown.items())
        cols[1:1] = extra
    header = ["key", *cols]
    body = [[str(k), *(cell(v.get(c)) for c in cols)] for k, v in rows]
    # an entry with no value in any column (the boot gate's state_pool beside the facts) says nothing here
    body = [row for row in body if any(value != "-" for value in row[1:])]
    # nor a column with no value in any entry (capacity's `undecided` when every search decided)
    keep = [0, *(j for j in range(1, len(header)) if any(row[j] not in ("-", "") for row in body))]
    if body and len(keep) < len(header):
        header, body = [header[j] for j in keep], [[row[j] for j in keep] for row in body]
    if cols and all(str(k) == f"{cols[0]}={v.get(cols[0])}" for k, v in rows):   # "users=48" beside users 48
        header, body = header[1:], [r[1:] for r in body]
    return header, body
