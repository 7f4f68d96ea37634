"""The tool gate's tables: per-turn failures and the summary."""
from __future__ import annotations

from typing import Any

from pytest_glmf.gates.tools.harness import ToolAnswer
from pytest_glmf.gates.verdict import render_table


def failure_table(summary: dict[str, Any]) -> str:
    """One row per bad turn: the turn, what was expected, what came back, what is wrong."""
    rows = []
    for r in summary["results"]:
        if r["ok"]:
            continue
        briefs = [ToolAnswer(**a).brief() for a in r["answers"]]
        got = briefs[0] if len(set(briefs)) == 1 else " / ".join(f"{a['mode']}: {b}" for a, b in zip(r["answers"], briefs))
        rows.append([f"{r['scenario']}#{r['repeat']}", ",".join(r["expect"]) or "(no call)", got[:140],
                     "; ".join(r["problems"])[:300]])
    return render_table(rows, ["turn", "expected", "came back", "problems"])


def render_summary(summary: dict[str, Any]) -> str:
    head = (f"tool turns parsed {summary['parsed']}/{summary['turns']} at concurrency {summary['concurrency']} "
            f"(tool_choice={summary['tool_choice']}{', strict' if summary['strict'] else ''}); "
            f"leaks {summary['leaks']}, wrong calls {summary['wrong_calls']}, empty args {summary['empty_args']}")
    if summary["skipped"]:
        head += f"; skipped {len(summary['skipped'])}: " + ", ".join(summary["skipped"])
    bad = failure_table(summary)
    return head + ("\n" + bad if summary["parsed"] != summary["turns"] else "")
