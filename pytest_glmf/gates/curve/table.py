"""The curve's table, its definitions and the knee sentence (plain data in, text out)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.curve.checks import describe_flags
from pytest_glmf.gates.verdict import fit_table, fmt

DEFINITIONS = {
    "ttft_s": "first chunk with content, reasoning or a tool call minus request send; queueing included",
    "per_user_tok_s": "(completion_tokens - 1) / (last token - first token) per request; median over users",
    "per_user_tok_s_p5": "5th percentile of the per-request speeds",
    "aggregate_tok_s": "all completion tokens / (last token anywhere - first send)",
    "itl_s": "gaps between successive content chunks",
    "spread_pct": "(max - min) / median over measured runs, larger of aggregate and per-user",
    "completion_tokens": "usage.completion_tokens; checked against chunks and /metrics (0.5 %)",
}


def curve_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The recipe's table: users, aggregate, per-user, TTFT p50/p95, spread, seats, flags (long
    flags as numbered notes under it: the table fits 120 columns)."""
    body = []
    for r in rows:
        seats = r.get("seats")
        seat_txt = "-" if seats is None else (f"{seats} (shared)" if r["users"] > seats else str(seats))
        flags = describe_flags(r)
        body.append([str(r["users"]), fmt(r.get("aggregate_tok_s")), fmt(r.get("per_user_tok_s")),
                     fmt(r.get("per_user_tok_s_p5")), fmt(r.get("ttft_p50_s")), fmt(r.get("ttft_p95_s")),
                     "-" if r.get("spread_pct") is None else f"{r['spread_pct']:.1f} %", seat_txt,
                     "ok" if r.get("valid") and not flags else "; ".join(flags) or "invalid"])
    return fit_table(["users", "aggregate tok/s", "per-user tok/s", "p5 tok/s", "TTFT p50 s", "TTFT p95 s", "spread",
                      "seats", "flags"], body)


def knee_sentence(k: Mapping[str, Any]) -> str:
    if k.get("still_climbing") is None:
        return "knee: needs at least two rows"
    a, b = k["between_users"]
    if k["still_climbing"]:
        return f"aggregate still climbing at the last row ({k['last_gain_pct']:+.1f} % from {a} to {b} users)"
    return f"aggregate flat at the last row ({k['last_gain_pct']:+.1f} % from {a} to {b} users; peak at {k['peak_users']})"
