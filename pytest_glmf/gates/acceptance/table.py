"""The acceptance table: accept rate, length and per-position acceptance per prompt class."""
from __future__ import annotations

from typing import Any

from pytest_glmf.gates.acceptance.probe import NO_DRAFTS, mean_over_classes
from pytest_glmf.gates.acceptance.spec import SPEC
from pytest_glmf.gates.verdict import fmt, render_table

POSITIONS_SHOWN = 4     # the table's width: later positions are in the result file (accept_pos5..)


def _positions(row: dict[str, Any]) -> str:
    rates = row.get("accept_pos")
    if not rates:
        return "-"
    shown = " ".join(f"{r:.2f}" for r in rates[:POSITIONS_SHOWN])
    return shown + (" ..." if len(rates) > POSITIONS_SHOWN else "")


def _cells(row: dict[str, Any]) -> list[str]:
    if row.get("no_drafts"):
        return [fmt(row["tok_s"]), NO_DRAFTS, "", ""]
    return [fmt(row["tok_s"]), fmt(row["accept_rate"]), fmt(row["accept_length"]), _positions(row)]


def render_result(result: dict[str, Any]) -> str:
    """The recipe's table: class | tok/s | accept rate | accept length | per position (+ recipe's
    numbers); the metrics' heads are the spec's (`Metric.column`)."""
    if result.get("speculative") is False:
        return f"no speculative decoding on this server ({result['source']}: no spec fields / zero drafts)"
    rows = [[r.get("label") or r["class"], *_cells(r), fmt((r.get("recipe") or {}).get("accept_rate")),
             str(r["requests"]) + (f" ({r['errors']} err)" if r["errors"] else "")]
            for r in result["classes"]]
    mean = result.get("mean") or mean_over_classes(result["classes"])
    mean_cells = _cells(mean) if mean.get("no_drafts") else [fmt(mean["tok_s"]), fmt(mean["accept_rate"]),
                                                              fmt(mean["accept_length"]), "-"]
    rows.append(["mean over classes", *mean_cells, "0.39", ""])
    head = ["class", *map(SPEC.column_label, ("tok_s", "accept_rate", "accept_length")), "per position",
            "recipe rate", "requests"]
    users = result.get("users") or 1
    load = f"; {users} requests in flight" if users > 1 else ""
    return (render_table(rows, head) + f"\nsource: {result['source']}; prompts: {result['prompt_format']}{load}")
