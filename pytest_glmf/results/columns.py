"""Which numbers of a gate's recorded entries a report shows, in which order, and how a value that
is not a number reads: one home for the terminal and Markdown report (results/report.py) and the
HTML page (results/html_gates.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_glmf.gates.registry import GATES
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


def with_derived(gate: str, entries: Mapping[str, Any]) -> dict[str, Any]:
    """The entries with the columns a report derives from them: a curve row's `prefix` ("shared":
    its users all sent one prompt, which a prefix cache computed once, so its TTFT is not the
    others'; "own") when any row shared one. The HTML page's cells read the same (html_gates.py)."""
    if gate != "curve" or not any(isinstance(v, Mapping) and v.get("shared_prefix") for v in entries.values()):
        return dict(entries)
    return {k: {**v, "prefix": "shared" if v.get("shared_prefix") else "own"} if isinstance(v, Mapping) else v
            for k, v in entries.items()}


def shared_prefix_note(entries: Mapping[str, Any]) -> str | None:
    """Under the curve table: which rows shared a prompt prefix, and what that does to their TTFT."""
    shared = sorted(v["users"] for v in entries.values() if isinstance(v, dict) and v.get("shared_prefix")
                    and isinstance(v.get("users"), int))
    if not shared:
        return None
    return (f"prefix shared: at {', '.join(map(str, shared))} users every user sent the same prompt, which a prefix "
            "cache computes once: their TTFT is not comparable with the rows of users' own prompts")


def gate_table(gate: str, entries: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows for one gate's recorded entries (one row per key)."""
    rows = [(k, v) for k, v in entries.items() if isinstance(v, dict)]
    preferred = preferred_columns(gate)
    cols = [c for c in preferred if any(c in v for _, v in rows)]
    for _, v in rows:
        for c, x in v.items():
            if c not in cols and not isinstance(x, (dict, list)) and len(cols) < 12:
                cols.append(c)
    if gate == "curve" and any(v.get("shared_prefix") for _, v in rows):
        rows = list(with_derived(gate, dict(rows)).items())
        cols.insert(1, "prefix")
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
