"""Text for people (pytest_glmf/text.py), the helpers not covered by tests/test_widths.py: a text on
one line or cut short, and the reports' Markdown tables. Each has one home here (the failure ledger,
the HTTP error lines, the result file's failure messages, the results and comparison reports use
it; tests/test_layout.py refuses a copy imported from anywhere else)."""
from __future__ import annotations

from pytest_glmf.text import clip, md_table, one_line


def test_clip_cuts_at_the_limit_and_marks_the_cut() -> None:
    assert clip("short", 5) == "short"
    assert clip("a longer text", 8) == "a longe…" and len(clip("a longer text", 8)) == 8
    assert clip("", 3) == ""


def test_one_line_joins_lines_and_runs_of_whitespace_then_clips() -> None:
    table = "curve: 1 threshold(s) missed\nmetric | measured\n-------+---------\nttft   |  2.4\t s"
    assert one_line(table, 400) == "curve: 1 threshold(s) missed metric | measured -------+--------- ttft | 2.4 s"
    assert one_line("  a\n\n b  ", 10) == "a b"
    assert one_line("x " * 300, 400) == ("x " * 200)[:399] + "…"


def test_md_table_has_a_rule_under_its_header_and_escapes_a_pipe_in_a_cell() -> None:
    assert md_table(["metric", "value"], [["per_user_tok_s", "41"], ["flags", "a | b"]]).splitlines() == [
        "| metric | value |", "|---|---|", "| per_user_tok_s | 41 |", "| flags | a \\| b |"]
    assert md_table(["key"], []) == "| key |\n|---|"
