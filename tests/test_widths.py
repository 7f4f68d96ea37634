"""What glmf prints fits 120 columns (issue 33 item 12: 140 of the demo's 280 lines were wider, the
widest 494): progress folds its prose with four-space continuations, never a table row nor an error
line; failure tables put long notes under the table (tests/plugin/test_plugin_sim_e2e.py reads the
round-1 boot failure whole)."""
from __future__ import annotations

import pytest

from pytest_glmf.gates.template.table import render_summary
from pytest_glmf.gates.verdict import Check, failure_message
from pytest_glmf.results.columns import gate_table
from pytest_glmf.text import fit_table, fold

PROSE = ("capacity: 2,432 prompt tokens + 384 completion tokens per user, p5 per-user tok/s >= 50, TTFT p95 <= 1 s; "
         "at most 128 users (the seats, max_running_requests 128); first probe 23")
ROW = ("23    | pass (last pass) | 61.3     | 100 %       | 64.2           | 0.62       | 0.41       | 1,476.0         "
       "| 1.2 %  | 0.226  | 2    | 46       | 31     | ttft_p95_s 1.3 > 1 (a long flag that makes the row wide)")
ERROR = ("glmf capacity: ConnectError: [Errno 111] Connect call failed ('127.0.0.1', 30000) while probing 48 users: the "
         "server stopped answering")


def test_fold_folds_prose_four_spaces_deeper_and_keeps_rows_and_errors_whole():
    folded = fold("  " + PROSE).splitlines()
    assert len(folded) == 2 and max(map(len, folded)) <= 120
    assert folded[0].startswith("  capacity: ") and folded[1].startswith("      ") and folded[1][6] != " "
    assert " ".join(x.strip() for x in folded) == PROSE
    assert fold(ROW) == ROW and fold("------+-" + "-" * 130) == "------+-" + "-" * 130
    assert fold(ERROR) == ERROR and fold("  ValueError: " + PROSE) == "  ValueError: " + PROSE
    assert fold("short line") == "short line"


def test_a_failure_table_keeps_its_long_note_under_it():
    check = Check("max_running_requests", 7, {"min": 16}, source="thresholds.yaml: lanes.round1.boot",
                  hint="max_running_requests capped to 7 by the mamba state cache " + "(details) " * 30)
    lines = failure_message([check], "boot facts").splitlines()
    assert lines[3] == "max_running_requests | 7        | >= 16    | note 1"
    assert lines[4].startswith("note 1: -56.2 %; max_running_requests capped to 7") and max(map(len, lines)) <= 120
    assert all(line.startswith("    ") for line in lines[5:])


def test_a_failure_table_moves_its_note_before_its_metrics_name():
    """A long metric label (drift's paired gap names its interval) stays in the table when moving
    the note is enough; the longest cell would have been the label."""
    check = Check("mean_abs_dlogp gap mine - good", 0.806, {"max": 0},
                  where="lower end of the paired 95% CI [0.806, 1.048]; wins 4:0",
                  hint="mine is significantly further from the oracle than good", source="test_user.py:17")
    lines = failure_message([check]).splitlines()
    assert lines[3].startswith("mean_abs_dlogp gap mine - good lower end of the paired 95% CI [0.806, 1.048]; wins 4:0")
    assert lines[3].endswith("| note 1") and lines[4].startswith("note 1: +0.806; mine is significantly further")
    assert max(map(len, lines)) <= 120


TEST_LIVE = f"""
from pytest_glmf.plugin.progress import live_progress

def test_says(request):
    say = live_progress(request.config)
    for line in ({PROSE!r}, {ROW!r}, {ERROR!r}):
        say(line)
"""


def test_live_progress_through_pytest_folds_prose_and_keeps_a_table_row_and_an_error_whole(pytester, unfold):
    pytester.makepyfile(test_live=TEST_LIVE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1)
    out = result.stdout.lines
    start = out.index("  " + PROSE[:PROSE.rindex(" ", 0, 118)])
    assert out[start + 1] == "      " + PROSE[PROSE.rindex(" ", 0, 118) + 1:]
    assert out[start + 2:start + 4] == ["  " + ROW, "  " + ERROR]      # whole, wider than 120
    assert "  " + PROSE in unfold(result.stdout.str()).splitlines()


def test_the_unfold_fixture_joins_only_what_fold_folded(unfold):
    text = "\n".join([fold(PROSE), "    an indented line after a short one", fold("  " + PROSE)])
    assert unfold(text).splitlines() == [PROSE, "    an indented line after a short one", "  " + PROSE]
    with pytest.raises(AssertionError):
        assert unfold(text) == text


def test_the_template_summary_folds_at_120_columns():
    """The demo's template line was 127 columns (printed by the suite's test, captured output)."""
    text = render_summary({"matched": 7, "conversations": 7, "served_ids": "tokenize", "failed_requests": 0,
                           "reference_source": "the simulator's own template", "differences": [], "errors": []})
    assert text.splitlines() == ["template: 7/7 conversations render to the reference's prompt ids (served via "
                                 "tokenize; reference: the simulator's own",
                                 "    template)"]


def test_a_table_of_short_cells_too_many_for_120_columns_is_split_each_part_led_by_its_key():
    """The demo's end-of-session capacity table: 13 columns of short numbers was 134 wide (nothing
    long to move under it); now two tables, each starting with the key, every value kept once."""
    header = ["key", *(f"column_{k}" for k in range(1, 16))]
    body = [[f"frontier@{n}", *(f"{n * k:,}" for k in range(1, 16))] for n in (2400, 8192, 32768, 57344, 131072)]
    text = fit_table(header, body)
    tables = text.split("\n\n")
    assert len(tables) >= 2 and max(map(len, text.splitlines())) <= 120
    for t in tables:
        assert all(ln.split(" | ")[0].strip() in ("key", "", *(r[0] for r in body)) for ln in t.splitlines()
                   if "-+-" not in ln)
    rows = [ln.split(" | ") for ln in text.splitlines() if ln.split(" | ")[0].strip() in {r[0] for r in body}]
    assert sorted(c.strip() for r in rows for c in r[1:]) == sorted(c for r in body for c in r[1:])
    assert fit_table(header[:4], [r[:4] for r in body]).count("\n\n") == 0      # a table that fits: one


def test_the_report_drops_a_column_no_entry_has_a_value_in():
    header, body = gate_table("capacity", {"frontier@2400": {"users": 44, "undecided": "", "seats": 128},
                                           "frontier@8192": {"users": 21, "undecided": None, "seats": 128}})
    assert header == ["key", "users", "seats"] and body == [["frontier@2400", "44", "128"], ["frontier@8192", "21", "128"]]


def test_a_note_marker_cannot_be_read_as_an_interval():
    """A footnote "[2]" beside an interval "[4, 6]" read as one (issue 40 item 5): the cell says
    "note 2", its line under the table "note 2: ..."; a cell's own interval stays as it was."""
    header = ["users", "boundary 95 % CI", "flags"]
    body = [["8", "[4, 6]", "ok"], ["16", "[12, 14]", "16 clients sharing 7 seats " + "(the seat cap) " * 8],
            ["24", "[20, 22]", "KV-starved: the pool holds 20 users of this size " + "(details) " * 8]]
    lines = fit_table(header, body).splitlines()
    assert max(map(len, lines)) <= 120
    assert lines[2] == "8     | [4, 6]           | ok"
    assert lines[3].endswith("| note 1") and lines[4].endswith("| note 2") and "[1]" not in "\n".join(lines)
    assert lines[5].startswith("note 1: 16 clients sharing 7 seats") and lines[7].startswith("note 2: KV-starved")
    # a short value keeps its place ahead of its long flag
    text = fit_table(["users", "aggregate"], [["16", "503 [" + "16 users on 7 seats " * 7 + "]"]])
    assert "16    | 503 note 1" in text and "\nnote 1: 16 users on 7 seats" in text


def test_one_column_one_number_format():
    """A column of 4574 and 40,256 (issue 40 item 5): where one number has thousands separators,
    the column's others get them; other columns and the key stay as written."""
    header = ["key", "kv_tokens", "users", "when"]
    body = [["frontier@2400", "4574", "44", "2026-12-05"], ["frontier@32768", "40,256", "6", "2026-12-05"],
            ["frontier@8192", "12345.5 (est.)", "1000", "2026-12-05"]]
    lines = fit_table(header, body).splitlines()
    assert [ln.split(" | ")[1].strip() for ln in lines[2:]] == ["4,574", "40,256", "12,345.5 (est.)"]
    assert [ln.split(" | ")[2].strip() for ln in lines[2:]] == ["44", "6", "1000"]       # no separator in it
    assert [ln.split(" | ")[3].strip() for ln in lines[2:]] == ["2026-12-05"] * 3
