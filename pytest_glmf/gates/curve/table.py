"""The curve's table and the knee sentence (plain data in, text out). The metrics' column heads
and what they mean are the gate's declaration's (spec.py: `Metric.column`, `doc`, DEFINITIONS)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.curve.spec import SPEC
from pytest_glmf.load import describe_flags
from pytest_glmf.text import fit_table, fmt

# the metrics the recipe's table shows, in its order
TABLE_METRICS = ("aggregate_tok_s", "per_user_tok_s", "per_user_tok_s_p5", "ttft_p50_s", "ttft_p95_s", "spread_pct")


def curve_table(rows: Sequence[Mapping[str, Any]], names: str = "settings", lane: Any = None) -> str:
    """The recipe's table: users, aggregate, per-user, TTFT p50/p95, spread, seats, flags (long
    flags as numbered notes under it: the table fits 120 columns). A number the client did not
    measure is "-", its flag says why; the client's advice names its settings by their flags
    (`names="flags"`, glmf curve) or their thresholds names (under `lane`'s curve settings)."""
    body = []
    for r in rows:
        seats = r.get("seats")
        seat_txt = "-" if seats is None else (f"{seats} (shared)" if r["users"] > seats else str(seats))
        flags = describe_flags(r, names, lane)
        body.append([str(r["users"]), fmt(r.get("aggregate_tok_s")), fmt(r.get("per_user_tok_s")),
                     fmt(r.get("per_user_tok_s_p5")), fmt(r.get("ttft_p50_s")), fmt(r.get("ttft_p95_s")),
                     "-" if r.get("spread_pct") is None else f"{r['spread_pct']:.1f} %", seat_txt,
                     "ok" if r.get("valid") and not flags else "; ".join(flags) or "invalid"])
    return fit_table(["users", *(SPEC.column_label(m) for m in TABLE_METRICS), "seats", "flags"], body)


def knee_sentence(k: Mapping[str, Any]) -> str:
    if k.get("still_climbing") is None:
        return "knee: needs at least two rows"
    a, b = k["between_users"]
    if k["still_climbing"]:
        return f"aggregate still climbing at the last row ({k['last_gain_pct']:+.1f} % from {a} to {b} users)"
    return f"aggregate flat at the last row ({k['last_gain_pct']:+.1f} % from {a} to {b} users; peak at {k['peak_users']})"
