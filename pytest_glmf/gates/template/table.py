"""The template gate's tables: one row per conversation that did not render as the reference."""
from __future__ import annotations

from typing import Any

from pytest_glmf.text import render_table, wrap


def _position(d: dict[str, Any]) -> str:
    def side(name: str, tid: int | None, n: int) -> str:
        return f"{name} ends ({n} ids)" if tid is None else f"{name} id {tid} ({n} ids)"
    return (f"token {d['position']}: {side('reference', d['reference_id'], d['reference_len'])}, "
            f"{side('served', d['served_id'], d['served_len'])}")


def difference_table(summary: dict[str, Any]) -> str:
    """conversation | first differing token | reference text around it | served text around it;
    a conversation the server would not render is a row with its error."""
    rows = []
    for cid, d in summary["differences"].items():
        rows.append([cid, _position(d), f"reference: {d['reference_text']}", f"served: {d['served_text']}"])
    for cid, error in summary["errors"].items():
        rows.append([cid, "not rendered", error[:200], ""])
    for change in summary.get("default_changes") or []:
        rows.append([f"default {change['setting']}", f"changed: set with {change['knob']}",
                     f"reference: {change['reference']} ({change['reference_from']})",
                     f"served: {change['served']} ({change['served_from']})"])
    return render_table(rows, ["conversation", "first difference", "reference (⟦token⟧ differs)", "served"])


def render_summary(summary: dict[str, Any]) -> str:
    head = (f"template: {summary['matched']}/{summary['conversations']} conversations render to the reference's "
            f"prompt ids (served via {summary['served_ids']}; reference: {summary['reference_source']})")
    if summary["failed_requests"]:
        head += f"; {summary['failed_requests']} not rendered"
    head = wrap(head)          # 120 columns, continued four spaces in
    if not summary["differences"] and not summary["errors"] and not summary.get("default_changes"):
        return head
    return head + "\n" + difference_table(summary)
