"""A load row's flags, for a table's last column: seats and KV pool (seats.py), numbers the client
did not measure and runs it measured again (selfcheck.py), token counts, failed requests, an
unflushed prefix cache and the spread. The client's advice names its settings as the reader sets
them: flags in a shell, thresholds names in a test. Pure functions over plain data (a row).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_glmf.load.selfcheck import GATED_ERROR_METRICS, LABELS, advice_text, bound_size


def lane_name(lane: Any) -> str | None:
    """A lane's name, from its config or the name itself (None: no lane)."""
    return lane if isinstance(lane, str) or lane is None else getattr(lane, "name", None)


def describe_flags(row: Mapping[str, Any], names: str = "settings", lane: Any = None) -> list[str]:
    """Human flags for the table's last column. The client's advice names its settings as the
    reader sets them: `names="flags"` in a shell (glmf curve), else their thresholds names
    (under the lane's curve settings when `lane` is given)."""
    flags = list((row.get("seat") or {}).get("notes", [])) + list((row.get("memory") or {}).get("notes", []))
    # a number a gate can bound that the client did not measure: shown as "-", said why here
    unmeasured = {m: why for m, why in (row.get("unmeasured") or {}).items() if m in GATED_ERROR_METRICS}
    if unmeasured:
        worst = max(unmeasured, key=lambda m: bound_size((row.get("client_error") or {}).get(m) or {}))
        pcts = [(row.get("client_error") or {}).get(m, {}).get("bound_pct") for m in unmeasured]
        advice = advice_text(row.get("client_advice"), names, lane_name(lane),
                             need_pct=None if None in pcts else max(pcts))
        labels = ", ".join(LABELS[m] for m in unmeasured)
        flags.append(f"{labels} not measured ({unmeasured[worst]}" + (f"; {advice})" if advice else ")"))
    runs = row.get("per_run", [])
    late = [i for i, r in enumerate(runs, 1) if r["client"]["client_bound"]]
    if late:
        first = runs[late[0] - 1]["client"]
        late_advice = advice_text(first.get("advice"), names, lane_name(lane))
        flags.append(f"client-bound run(s) {','.join(map(str, late))} ({first['notes'][0]}"
                     + (f"; {late_advice})" if late_advice else ")"))
    if row.get("replaced_runs"):
        flags.append(f"{row['replaced_runs']} run(s) measured again for the client ({row['replaced_why'][0]})")
    for i, r in enumerate(runs, 1):
        flags += [f"run {i}: {n}" for n in r["token_count"]["problems"]]
        if r.get("speed_unmeasured"):
            flags.append(f"run {i}: {r['speed_unmeasured']} request(s) without a measurable speed "
                         "(all tokens in one read)")
        if r["errors"]:
            flags.append(f"run {i}: {r['errors']} failed requests" + _why(r, runs[:i - 1]))
    if "flush_endpoint" in row and row["flush_endpoint"] is None:
        # harmless for our numbers (every request starts with a unique line) but worth knowing
        flags.append("prefix cache not flushed (no /flush_cache or /reset_prefix_cache)")
    spread, limit = row.get("spread_pct"), row.get("spread_max_pct")
    if spread is not None and limit is not None and spread > limit:
        flags.append(f"spread {spread:.1f} % > {limit:g} %")
    return flags


def _why(run: Mapping[str, Any], before: list[Mapping[str, Any]]) -> str:
    """Why a run's requests failed: its first distinct error(s) (each record's status and body
    excerpt, redacted: records.py), said once; a later run failing alike says which run said it."""
    examples = list(run.get("error_examples") or [])[:2]
    if not examples:
        return ""
    for k, r in enumerate(before, 1):
        if r.get("errors") and list(r.get("error_examples") or [])[:2] == examples:
            return f" (as run {k})"
    return f" ({'; '.join(examples)})"
