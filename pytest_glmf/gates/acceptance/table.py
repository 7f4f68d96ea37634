"""The acceptance table: accept rate, length and per-position acceptance per prompt class."""
from __future__ import annotations

from typing import Any

from pytest_glmf.gates.acceptance.probe import NO_DRAFTS, mean_over_classes
from pytest_glmf.gates.acceptance.spec import SPEC
from pytest_glmf.text import fmt, render_table

POSITIONS_SHOWN = 4     # the table's width: later positions are in the result file (accept_pos5..)


def _positions(row: dict[str, Any]) -> str:
    # a class row has the list; the mean over classes has its accept_posK keys only
    rates = row.get("accept_pos") or [row[k] for k in (f"accept_pos{i}" for i in range(1, 9)) if row.get(k) is not None]
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
    rows.append(["mean over classes", *_cells(mean), "0.39", ""])
    head = ["class", *map(SPEC.column_label, ("tok_s", "accept_rate", "accept_length")), "per position",
            "recipe rate", "requests"]
    users = result.get("users") or 1
    load = f"; {users} requests in flight" if users > 1 else ""
    return (render_table(rows, head) + f"\nsource: {result['source']}; prompts: {result['prompt_format']}{load}")
