"""The agents' tables: one row per turn index, then the sessions line (plain data in, text out)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_glmf.gates.agents.spec import SPEC
from pytest_glmf.text import fmt, render_table


def _pct(x: Any) -> str:
    return "-" if x is None else f"{x:.1f} %"


def agents_table(summary: Mapping[str, Any]) -> str:
    """Per turn: TTFT p50/p95, prompt and cached tokens, cache hit, per-user tok/s, errors; a last
    row over every turn; then the sessions and the client's lateness. The metrics' heads are the
    spec's (`Metric.column`)."""
    body = []
    for r in [*summary.get("per_turn", []), {**summary, "turn": "all"}]:
        turn = r["turn"] + 1 if isinstance(r["turn"], int) else r["turn"]
        body.append([str(turn), str(r["turns"]), fmt(r.get("ttft_p50_s")), fmt(r.get("ttft_p95_s")),
                     fmt(r.get("prompt_tokens_p50")), fmt(r.get("cached_tokens_p50")), _pct(r.get("cache_hit_pct")),
                     fmt(r.get("per_user_tok_s")), str(r.get("tool_calls", 0)), str(r.get("errors", 0))])
    table = render_table(body, ["turn", "turns", SPEC.column_label("ttft_p50_s"), SPEC.column_label("ttft_p95_s"),
                                "prompt tok p50", "cached tok p50", "cache hit", SPEC.column_label("per_user_tok_s"),
                                "tool calls", "errors"])
    sessions = (f"sessions: {summary.get('sessions_completed')}/{summary.get('sessions')} completed "
                f"({_pct(summary.get('sessions_completed_pct'))}), {summary.get('turns_completed')} turns answered, "
                f"session time p50 {fmt(summary.get('session_time_p50_s'))} s, max {fmt(summary.get('session_time_max_s'))} s; "
                f"returning turns: cache hit {_pct(summary.get('returning_cache_hit_pct'))}, "
                f"TTFT p95 {fmt(summary.get('returning_ttft_p95_s'))} s; "
                f"send lateness p99 {fmt(summary.get('send_lateness_p99_s'))} s")
    return f"{table}\n{sessions}"
