"""The tool gate's tables: per-turn failures and the summary."""
from __future__ import annotations

from typing import Any

from pytest_glmf.gates.tools.harness import ToolAnswer
from pytest_glmf.text import render_table


def failure_table(summary: dict[str, Any]) -> str:
    """One row per bad turn: the turn, what was expected, what came back, what is wrong. Turns
    whose requests failed the same way are one row (every request of a run answered with the
    same error page is one line, not one per turn)."""
    rows: list[list[Any]] = []
    same_error: dict[str, list[Any]] = {}
    for r in summary["results"]:
        if r["ok"]:
            continue
        turn = f"{r['scenario']}#{r['repeat']}"
        errors = {a["error"] for a in r["answers"] if a.get("error")}
        if len(errors) == 1 and all(a.get("error") for a in r["answers"]):
            (error,) = errors
            if error in same_error:
                same_error[error][1] += 1
                continue
            same_error[error] = row = [turn, 0, ",".join(r["expect"]) or "(no call)", f"error: {error}"[:140],
                                       "; ".join(r["problems"])[:300]]
            rows.append(row)
            continue
        briefs = [ToolAnswer(**a).brief() for a in r["answers"]]
        got = briefs[0] if len(set(briefs)) == 1 else " / ".join(f"{a['mode']}: {b}" for a, b in zip(r["answers"], briefs))
        rows.append([turn, 0, ",".join(r["expect"]) or "(no call)", got[:140], "; ".join(r["problems"])[:300]])
    return render_table([[f"{turn} (+{more} more)" if more else turn, *rest] for turn, more, *rest in rows],
                        ["turn", "expected", "came back", "problems"])


def render_summary(summary: dict[str, Any]) -> str:
    head = (f"tool turns parsed {summary['parsed']}/{summary['turns']} at concurrency {summary['concurrency']} "
            f"(tool_choice={summary['tool_choice']}{', strict' if summary['strict'] else ''}); "
            f"leaks {summary['leaks']}, wrong calls {summary['wrong_calls']}, empty args {summary['empty_args']}")
    if summary.get("failed_requests"):
        head += f", failed requests {summary['failed_requests']}"
    if summary.get("cut_calls"):
        head += f", calls cut by max_tokens {summary['cut_calls']}"
    if summary.get("text_answers"):
        head += f", text answers {summary['text_answers']}"
    if summary["skipped"]:
        head += f"; skipped {len(summary['skipped'])}: " + ", ".join(summary["skipped"])
    bad = failure_table(summary)
    return head + ("\n" + bad if summary["parsed"] != summary["turns"] else "")
