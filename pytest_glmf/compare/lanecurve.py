"""One lane's curve as the comparison reads it: its rows by users, each one either a measurement of
that many users or excluded with the reason (pure functions over result-file data).

A row is not a measurement of N users when the server had fewer seats than N (the recipe's wrong
verdict: "my C16 and C32 rows were sixteen and thirty-two clients sharing seven seats"), when the
workload did not fit its KV pool, or when the curve gate marked it invalid (client-bound runs,
token-count mismatches, failed requests).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LaneRow:
    users: int
    values: Mapping[str, Any]          # the curve row as recorded (recipe units)
    excluded: str | None = None        # why the row is not a measurement of `users` users

    def get(self, metric: str) -> float | None:
        v = self.values.get(metric)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass
class LaneCurve:
    """A lane's name, its curve rows (sorted by users) and the result document they came from."""

    name: str
    rows: list[LaneRow]
    doc: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def row(self, users: int) -> LaneRow | None:
        return next((r for r in self.rows if r.users == users), None)


def exclusion(row: Mapping[str, Any]) -> str | None:
    """Why a recorded curve row is not a measurement of its users, or None."""
    users = int(row["users"])
    seat = row.get("seat") or {}
    seats = row.get("seats", seat.get("seats"))
    if seat.get("shared") or (isinstance(seats, int) and users > seats):   # queued, even when a gate allowed it
        # why the seats are capped is a boot fact (the comparison's boot table shows it beside the seats)
        return f"seat-starved: {users} users on {seats} seats" if isinstance(seats, int) else \
            f"seat-starved: {users} users sharing seats"
    mem = row.get("memory") or {}
    if mem.get("fits") is False:
        return (f"KV-starved: {users} users x {mem.get('need_per_user')} tokens do not fit the KV pool "
                f"({mem.get('tokens_per_user')} per user)")
    if row.get("valid") is False:
        # the first flag, without its detail (the lane's own curve table, `glmf report`, has it all)
        flags = row.get("flags")
        first = flags.split("; ")[0].split(" (")[0] if isinstance(flags, str) and flags and flags != "ok" else ""
        return "invalid: " + (first or "see the lane's curve table (glmf report)")
    return None


# What a curve row sent (runner.py records each): rows that differ in any of these measured different
# workloads, and comparing their numbers says nothing about the lanes. Prompt lengths are measured
# (the server's token count, p50), so they may differ by PROMPT_TOLERANCE_PCT before they count.
WORKLOAD_KEYS = {"max_tokens": "max_tokens", "prompt_tokens_p50": "prompt tokens (p50)",
                 "shared_prefix": "shared_prefix", "rate_per_s": "rate_per_s", "arrival": "arrival",
                 "path": "endpoint"}
PROMPT_TOLERANCE_PCT = 5.0


def workload_difference(rows: Sequence[LaneRow | None], names: Sequence[str]) -> str | None:
    """Which settings differ between rows of one users value (each lane's, None where it has none),
    "max_tokens 384 (a) vs 128 (b)"; None when they sent the same (a setting a row did not record
    is not compared)."""
    present = [(n, r) for n, r in zip(names, rows) if r is not None]
    diffs = []
    for key, label in WORKLOAD_KEYS.items():
        seen = [(n, r.values[key]) for n, r in present if r.values.get(key) is not None]
        if len(seen) < 2:
            continue
        values = [v for _, v in seen]
        if key == "prompt_tokens_p50":
            lo, hi = min(values), max(values)
            if hi - lo <= PROMPT_TOLERANCE_PCT / 100 * hi:
                continue
        elif len({json.dumps(v) for v in values}) == 1:
            continue
        diffs.append(f"{label} " + " vs ".join(f"{_setting(v)} ({n})" for n, v in seen))
    return "; ".join(diffs) or None


def _setting(v: Any) -> str:
    return f"{v:,.0f}" if isinstance(v, float) and v >= 100 else str(v)


def lane_name(doc: Mapping[str, Any], default: str = "?") -> str:
    return str((doc.get("lane") or {}).get("name") or (doc.get("provenance") or {}).get("lane") or default)


def from_document(doc: Mapping[str, Any], name: str | None = None) -> LaneCurve:
    """The lane curve of a result document (`gates.curve` rows; later keys win per users value)."""
    by_users: dict[int, Mapping[str, Any]] = {}
    for entry in ((doc.get("gates") or {}).get("curve") or {}).values():
        if isinstance(entry, Mapping) and isinstance(entry.get("users"), int):
            by_users[entry["users"]] = entry
    rows = [LaneRow(u, r, exclusion(r)) for u, r in sorted(by_users.items())]
    return LaneCurve(name or lane_name(doc), rows, doc)


def from_rows(name: str, rows: Sequence[Mapping[str, Any]]) -> LaneCurve:
    return from_document({"lane": {"name": name}, "gates": {"curve": {str(i): r for i, r in enumerate(rows)}}})
