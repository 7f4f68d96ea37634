"""A number the new run declares not measured (the curve's self-check: None, with the reason in the
entry's `unmeasured`) against a baseline that has it: shown "not measured (reason)", neither a
regression nor a pass, and not counted among the compared metrics. A number the entry lacks without
a reason stays "missing", a regression."""
from __future__ import annotations

import json
import re
import sys
from importlib import resources

import pytest

from pytest_glmf.gates.verdict import evaluated_count
from pytest_glmf.results.baseline import (
    compare_entry,
    compare_results,
    comparison_summary,
    regression_message,
    regression_table,
)
from pytest_glmf.testing.truth_server import TruthServer

WHY = "a zero: ITL p95 is 0.00 ms (several tokens per read), which no relative bound can hold"
BASE = {"users": 8, "per_user_tok_s": 50.0, "ttft_p95_s": 0.76, "itl_p95_s": 0.004, "spread_pct": 2.0}
NOW = {**BASE, "itl_p95_s": None, "unmeasured": {"itl_p95_s": WHY}}


def by_metric(now: dict, base: dict = BASE) -> dict:
    return {c.metric: c for c in compare_entry("curve", "users=8", now, base)}


def test_a_number_not_measured_is_neither_a_regression_nor_compared() -> None:
    c = by_metric(NOW)["itl_p95_s"]
    assert not c.compared and not c.regressed and c.unmeasured == WHY
    assert c.row() == ["curve.itl_p95_s [users=8]", "0.004", "-", f"not measured ({WHY})", "not compared"]
    assert all(o.compared for m, o in by_metric(NOW).items() if m != "itl_p95_s")


def test_a_number_missing_without_a_reason_stays_a_missing_regression() -> None:
    for now in ({**BASE, "itl_p95_s": None}, {k: v for k, v in BASE.items() if k != "itl_p95_s"},
                {**BASE, "itl_p95_s": None, "unmeasured": {"ttft_p95_s": WHY}}):   # another metric's reason
        c = by_metric(now)["itl_p95_s"]
        assert c.compared and c.regressed and c.row()[3] == "missing"


def test_the_summary_counts_only_compared_metrics_and_names_the_unmeasured() -> None:
    doc = {"gates": {"curve": {"users=8": {**NOW, "per_user_tok_s": 40.0}}}}
    comps = compare_results(doc, {"gates": {"curve": {"users=8": BASE}}})
    assert comparison_summary(comps) == "1 regression(s) in 2 compared metrics; 1 not measured (not compared)"
    assert comparison_summary(compare_results({"gates": {"curve": {"users=8": BASE}}},
                                              {"gates": {"curve": {"users=8": BASE}}})) == \
        "0 regression(s) in 3 compared metrics"
    table = regression_table(comps)
    assert max(map(len, table.splitlines())) <= 120          # the long reason goes under the table
    assert "| not measured note 1 | not compared" in table and f"note 1: {WHY}" in table


def test_the_failure_message_lists_the_unmeasured_after_the_regressions_and_counts_only_verdicts() -> None:
    comps = compare_entry("curve", "users=8", {**NOW, "per_user_tok_s": 40.0}, BASE)
    before = evaluated_count()
    message = regression_message(comps, "base.json")
    assert evaluated_count() - before == 2                   # the not-measured one gave no verdict
    assert message is not None
    lines = message.splitlines()
    assert lines[0] == "1 regression(s) against the baseline (baseline: base.json)"
    assert lines[3].startswith("curve.per_user_tok_s [users=8] | 50.0 ")
    assert lines[4].startswith("curve.itl_p95_s [users=8]") and lines[4].endswith("not compared")
    # nothing regressed: no failure, whatever was not measured
    assert regression_message(compare_entry("curve", "users=8", NOW, BASE)) is None


# ---------------------------------------------------------------------------- through the plugin

BOOT_LOG = """\
[2026-09-11 10:00:02 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=8, context_len=131072, available_gpu_mem=10.00 GB
[2026-09-11 10:00:03] The server is fired up and ready to roll!
"""
SUITE = str(resources.files("pytest_glmf.suites").joinpath("test_curve.py"))
THRESHOLDS = """\
schema: 1
lanes:
  truth:
    curve:
      settings: {{max_tokens: 40, runs: 2, lag_p99_max_s: 1.0{client}}}
      baseline: {{rel_pct: 50}}
      rows:
        - {{users: 1}}
"""
# the client may be off by no more than 0.0001 % of a number: with every other chunk written with the
# next one (events sharing a read), ITL p95 cannot be bounded that close (nor measured again)
STRICT = ", client_error_max_pct: 0.0001, client_retries: 0"


def session(pytester: pytest.Pytester, client: str, *extra: str, pair_every: int = 0) -> pytest.RunResult:
    log = pytester.makefile(".log", boot=BOOT_LOG)
    thresholds = pytester.makefile(".yaml", thresholds=THRESHOLDS.format(client=client))
    with TruthServer(ttft_ms=50, itl_ms=4, seats=8, pair_every=pair_every) as ts:
        lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{ts.url}', "
                                                 f"boot_log: {log.name}}}\n")
        return pytester.runpytest_subprocess(
            "--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds", str(thresholds),
            "--glmf-results", str(pytester.path / "results"), "-p", "no:cacheprovider", *extra, SUITE)


def test_a_curve_number_the_self_check_did_not_measure_is_not_a_missing_regression(pytester) -> None:
    """Blessed as usual, run again with a client allowed (almost) no error and events sharing reads:
    ITL p95 is None with the reason. The test passes (it failed: a "missing" regression), and the
    session's baseline table says "not measured (reason)"."""
    base = pytester.path / "base.json"
    # blessed with a client allowed a generous error: every number measured, whatever the machine's load
    session(pytester, ", client_error_max_pct: 50", "--glmf-baseline", str(base),
            "--glmf-update-baseline").assert_outcomes(passed=1)
    blessed = json.loads(base.read_text())["gates"]["curve"]["users=1"]
    assert blessed["ttft_p95_s"] > 0 and blessed["unmeasured"] == {}

    again = session(pytester, STRICT, "--glmf-baseline", str(base), pair_every=2)
    out = again.stdout.str()
    now = json.loads(max((pytester.path / "results").glob("truth-2*.json"), key=lambda p: p.stat().st_mtime)
                     .read_text())["gates"]["curve"]["users=1"]
    assert now["itl_p95_s"] is None and "itl_p95_s" in now["unmeasured"], now["unmeasured"]
    again.assert_outcomes(passed=1)
    assert "| missing" not in out, out[-3000:]
    again.stdout.fnmatch_lines(["Against the baseline: 0 regression(s) in * compared metrics; * not measured (not compared)",
                                "curve.itl_p95_s ?users=1? * | * | - * | not measured note * | not compared",
                                "note *: client timestamps can be off by up to * on ITL p95 *"])

    # the reports of that file say the same: counted apart in every summary, uncoloured in the HTML
    newest = max((pytester.path / "results").glob("truth-2*.json"), key=lambda p: p.stat().st_mtime)
    report = pytester.run(sys.executable, "-m", "pytest_glmf.cli", "report", str(newest), "--baseline", str(base),
                          "--markdown", "r.md", "--html", "r.html")
    assert re.search(r"Against the baseline: 0 regression\(s\) in \d+ compared metrics; \d+ not measured \(not compared\)", report.stdout.str()), report.stdout.str()[-2000:]
    assert " not measured (not compared)" in (pytester.path / "r.md").read_text()
    html = (pytester.path / "r.html").read_text()
    assert " not measured (not compared)" in html
    assert "not measured" in html and 'class="num worse"' not in html     # it was coloured worse, "missing now"
