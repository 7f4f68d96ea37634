"""The acceptance table: accept rate and length per prompt class."""
from __future__ import annotations

from typing import Any

from pytest_glmf.gates.acceptance.probe import mean_over_classes
from pytest_glmf.gates.acceptance.spec import SPEC
from pytest_glmf.gates.verdict import fmt, render_table


def render_result(result: dict[str, Any]) -> str:
    """The recipe's table: class | tok/s | accept rate | accept length (+ recipe's numbers); the
    metrics' heads are the spec's (`Metric.column`)."""
    if result.get("speculative") is False:
        return f"no speculative decoding on this server ({result['source']}: no spec fields / zero drafts)"
    rows = [[r.get("label") or r["class"], fmt(r["tok_s"]), fmt(r["accept_rate"]), fmt(r["accept_length"]),
             fmt((r.get("recipe") or {}).get("accept_rate")), str(r["requests"]) + (f" ({r['errors']} err)" if r["errors"] else "")]
            for r in result["classes"]]
    mean = result.get("mean") or mean_over_classes(result["classes"])
    rows.append(["mean over classes", fmt(mean["tok_s"]), fmt(mean["accept_rate"]), fmt(mean["accept_length"]), "0.39", ""])
    head = ["class", *map(SPEC.column_label, ("tok_s", "accept_rate", "accept_length")), "recipe rate", "requests"]
    return render_table(rows, head) + f"\nsource: {result['source']}; prompts: {result['prompt_format']}"
