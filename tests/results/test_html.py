"""The HTML report in a real browser: Debian's headless Chromium (tests/results/html_browser.py)
opens each page with the network off and the tests check that no request left the file, no script
or console error happened, every section is there and the numbers are the result file's.

The pages are made from real result files: short sessions of two simulator lanes (`wide`: 128
seats; `tight`: 7 seats, the recipe's round 1) with a bound no run meets, so the verdict has a
failed test and its table; five sessions of one lane make the history, one of them compared with a
baseline, and a two-lane session the comparison. Without Chromium these tests skip, and fail under
CI=true (.ci/run installs it: tests/results/setup-chromium).
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from html_browser import INSTALL, Browser, chromium

from pytest_glmf.cli import main
from pytest_glmf.compare.report import crossovers, lane_curves
from pytest_glmf.gates.registry import GATES
from pytest_glmf.results.baseline import compare_results
from pytest_glmf.results.html_blocks import CSP
from pytest_glmf.text import fmt

pytestmark = pytest.mark.slow

LANES = """\
schema: 1
lanes:
  wide:
    {{launcher: sim, model: /models/GLM-5.3-Flash-NVFP4, spec: none, kv: fp8_e4m3, ctx: 131072, maxbs: 128, mem: 0.90,
     extra: --max-mamba-cache-size 640 --mamba-ssm-dtype bfloat16, time_scale: {scale}, boot_timeout_s: 60}}
  tight:
    {{launcher: sim, model: /models/GLM-5.3-Flash-NVFP4, spec: none, kv: fp8_e4m3, ctx: 131072, maxbs: 16, mem: 0.85,
     extra: --max-mamba-cache-size 38, time_scale: {scale}, boot_timeout_s: 60}}
"""
# aggregate_tok_s >= 100000 at 8 users: missed by every run, so each session has a failed test; at
# 4 users every user sends the same prompt (a shared prefix: drawn apart from the rows of own prompts)
THRESHOLDS = """\
schema: 1
lanes:
  wide:
    boot: {max_running_requests: {min: 8}}
    curve:
      settings: {max_tokens: 32, runs: 2, prompt_tokens: 200, spread_max_pct: 80}
      rows:
        - {users: 1, ttft_p95_s: {max: 5.0}}
        - {users: 4, settings: {shared_prefix: true}}
        - {users: 8, aggregate_tok_s: {min: 100000}}
  tight:
    boot: {max_running_requests: {min: 4}}
    curve:
      settings: {max_tokens: 32, runs: 2, prompt_tokens: 200, spread_max_pct: 80}
      rows:
        - {users: 1, ttft_p95_s: {max: 5.0}}
        - {users: 8, ttft_p95_s: {max: 5.0}, allow_queueing: true}
"""


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if chromium() is None:
        reason = f"no Chromium to load the pages in; install it: {INSTALL} (or run tests/results/setup-chromium)"
        if in_ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    with Browser(width=1100, height=900) as b:
        yield b


def session(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One short pytest-glmf session on the simulator lanes (boot and curve suites; the acceptance
    suite skips on lanes without speculative decoding: a gate that verified nothing)."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--glmf-lanes", str(where / "lanes.yaml"),
            "--glmf-thresholds", str(where / "thresholds.yaml"), "--glmf-results", str(where / "results"),
            "-k", "boot or curve or acceptance", *args]
    return subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Five sessions of lane wide (the 2nd with the ini twin, the 3rd against the 1st as baseline),
    the fifth of them in a two-lane session with lane tight."""
    where = tmp_path_factory.mktemp("html-runs")
    (where / "lanes.yaml").write_text(LANES.format(scale=0.05))
    (where / "thresholds.yaml").write_text(THRESHOLDS)
    results = where / "results"
    out: dict[str, Any] = {"where": where, "results": results, "wide": [], "outputs": []}
    plans = [["--glmf-lane", "wide", "--glmf-html"], ["--glmf-lane", "wide", "-o", "glmf_html=true"],
             ["--glmf-lane", "wide", "--glmf-html", "--glmf-baseline", "BASE"], ["--glmf-lane", "wide"],
             ["--glmf-lane", "wide", "--glmf-lane", "tight", "--glmf-html"]]
    for plan in plans:
        plan = [str(out["wide"][0]) if a == "BASE" else a for a in plan]
        done = session(where, *plan)
        out["outputs"].append(done.stdout)
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]   # the impossible bound fails
        made = json.loads((results / "wide-latest.json").read_text())
        out["wide"].append(results / f"wide-{made['session_id']}.json")
        if "--glmf-html" in plan or "glmf_html=true" in plan:
            assert (results / "wide-latest.html").is_file()
            (results / "wide-latest.html").rename(results / f"wide-{len(out['wide'])}.html")
    out["tight"] = results / f"tight-{json.loads((results / 'tight-latest.json').read_text())['session_id']}.json"
    return out


def doc_of(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def check_offline(load: Any, page: Path) -> None:
    url = page.resolve().as_uri()
    assert load.requests[:1] == [url], load.requests         # the check saw the page itself load
    assert load.outside_requests(url) == []
    assert load.errors() == []


# ---------------------------------------------------------------------------- the session's page


def test_the_session_page_shows_the_verdict_provenance_gates_and_ledger(runs, browser) -> None:
    page = runs["results"] / "wide-1.html"
    doc = doc_of(runs["wide"][0])
    load = browser.load(page)
    check_offline(load, page)
    assert load.sections == ["verdict", "provenance", "gate-boot", "gate-curve", "ledger"]
    assert load.title == "pytest-glmf wide failed"
    text = load.text
    # the verdict: each failed test with its table (the helper's, knob included)
    assert "FAILED" in text and "pytest exit status 1" in text
    failed = doc["failed_tests"]
    assert any(f["test"].endswith("test_curve_row[users=8]") for f in failed)
    for f in failed:
        assert f["test"] in text and f["message"].splitlines()[0] in text
    assert "aggregate_tok_s @ 8 users" in text and ">= 100,000" in text
    # provenance: lane, engine version, model, flags, what the server said
    prov = doc["provenance"]
    for fact in (prov["engine_identity"]["version"], "/models/GLM-5.3-Flash-NVFP4", "--max-mamba-cache-size 640",
                 "the server says", "max_running_requests 128"):
        assert fact in text
    # every curve number of the JSON, in the spec's words (title, definitions, units)
    for entry in doc["gates"]["curve"].values():
        for metric in ("aggregate_tok_s", "per_user_tok_s", "ttft_p95_s", "spread_pct"):
            assert fmt(entry[metric]) in text, (metric, entry[metric])
    assert GATES["curve"].title in text and GATES["curve"].definitions[0] in text
    assert fmt(doc["gates"]["boot"]["facts"]["max_running_requests"]) in text
    # the missed bound is marked in its cell; invalid rows carry their tag
    missed = browser.eval("Array.from(document.querySelectorAll('#gate-curve td.miss')).map(c => c.innerText)")
    agg8 = doc["gates"]["curve"]["users=8"]["aggregate_tok_s"]
    assert any(c.startswith(fmt(agg8)) for c in missed), missed
    for key, entry in doc["gates"]["curve"].items():
        row = browser.eval(f"Array.from(document.querySelectorAll('#gate-curve tbody tr'))"
                           f".find(r => r.cells[0].innerText.startsWith('{key}')).innerText")
        assert ("invalid" in row) == (entry.get("valid") is False), row
    # charts: one quantity per chart, a point per row (the 8-user row's bound drawn too)
    titles = browser.eval("Array.from(document.querySelectorAll('#gate-curve svg > title')).map(t => t.textContent)")
    assert titles == ["per-user tok/s against users", "aggregate tok/s against users", "TTFT (s) against users"]
    # the ledger: this session's lines only
    ledger = browser.eval("Array.from(document.querySelectorAll('#ledger li')).map(li => li.innerText)")
    assert ledger and all("lane wide" in line for line in ledger)
    assert any("test_curve_row[users=8]" in line for line in ledger)
    # under the ledger no header of a table that is not there (issue 40 item 5)
    assert browser.eval("document.querySelector('#ledger').innerText").rstrip().endswith(ledger[-1])
    # memory in one unit: GiB (SGLang's "GB" is GiB), never "GB" beside it
    assert " GiB" in load.text and " GB" not in load.text
    assert f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">" in page.read_text()


def test_the_ini_twin_writes_the_page_and_the_terminal_names_it(runs) -> None:
    assert (runs["results"] / "wide-2.html").is_file()
    assert "glmf: the report as one HTML page: " in runs["outputs"][1]
    assert "HTML page" not in runs["outputs"][3]       # the 4th session asked for none


def test_baseline_deltas_are_coloured_only_beyond_the_allowed_change(runs, browser) -> None:
    page = runs["results"] / "wide-3.html"
    doc, base = doc_of(runs["wide"][2]), doc_of(runs["wide"][0])
    load = browser.load(page)
    check_offline(load, page)
    assert load.sections == ["verdict", "provenance", "gate-boot", "gate-curve", "baseline", "ledger"]
    comps = compare_results(doc, base)
    beyond = [c for c in comps if c.now is not None and abs(c.worse_by) > c.allowed + 1e-12]
    bad = sum(1 for c in comps if c.regressed)
    assert f"{bad} regression(s) in {len(comps)} compared metrics" in load.text
    coloured = browser.eval("document.querySelectorAll('#baseline td.worse, #baseline td.better').length")
    assert coloured == len(beyond)
    assert comps and coloured < len(comps) or not beyond   # noise is left uncoloured


def test_glmf_report_html_on_a_result_file_with_bounds(runs, browser, tmp_path, capsys) -> None:
    out = tmp_path / "r.html"
    result = runs["wide"][3]
    thresholds = runs["where"] / "thresholds.yaml"
    assert main(["report", str(result), "--html", str(out), "--thresholds", str(thresholds),
                 "--baseline", str(runs["wide"][0])]) == 0
    assert f"HTML written to {out}" in capsys.readouterr().out
    load = browser.load(out)
    check_offline(load, out)
    assert "baseline" in load.sections and "≥ 100,000" in load.text


def test_glmf_report_html_errors_name_the_file(runs, tmp_path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: 1\nlanes:\n  wide:\n    curve: {nope: 1}\n")
    assert main(["report", str(runs["wide"][0]), "--html", str(tmp_path / "x.html"), "--thresholds", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"glmf report: --thresholds {bad}: ") and "nope" in err
    assert main(["report", str(runs["wide"][0]), "--html", str(tmp_path / "no" / "x.html")]) == 2
    assert "glmf report: " in capsys.readouterr().err


def test_a_request_leaving_the_file_is_caught(runs, browser, tmp_path) -> None:
    """The check can fail: the same page with one external image asks for it (the CSP and the
    offline browser stop it, and the test sees the attempt)."""
    page = tmp_path / "leaky.html"
    page.write_text((runs["results"] / "wide-1.html").read_text().replace(
        "<body>", '<body><img src="http://127.0.0.1:9/x.png" alt="">', 1))
    load = browser.load(page)
    assert load.outside_requests(page.resolve().as_uri()) == ["http://127.0.0.1:9/x.png"]
    assert load.errors()


def test_the_page_fits_a_phone_and_prints(runs, tmp_path) -> None:
    page = runs["results"] / "wide-1.html"
    if chromium() is None:
        pytest.skip("no Chromium")
    with Browser(width=390, height=800, mobile=True) as phone:
        load = phone.load(page)
        check_offline(load, page)
        # the page itself never scrolls sideways: wide tables and the failures' text scroll in their own box
        assert phone.eval("document.documentElement.scrollWidth") <= phone.eval("window.innerWidth")
        wider = phone.eval("Array.from(document.querySelectorAll('body *')).filter(e => "
                           "e.getBoundingClientRect().right > window.innerWidth && !e.parentElement.closest('.scroll, pre'))"
                           ".map(e => e.tagName + ' ' + (e.innerText || '').slice(0, 60))")
        assert wider == []
        assert phone.eval("getComputedStyle(document.querySelector('.charts')).gridTemplateColumns").count("px") == 1
        assert phone.print_pdf().startswith(b"%PDF")


# ---------------------------------------------------------------------------- comparison and history


def test_glmf_compare_html_two_lanes(runs, browser, tmp_path, capsys) -> None:
    out = tmp_path / "compare.html"
    files = [runs["wide"][4], runs["tight"]]
    assert main(["compare", *map(str, files), "--html", str(out)]) == 0
    assert f"HTML written to {out}" in capsys.readouterr().out
    load = browser.load(out)
    check_offline(load, out)
    assert load.sections == ["lanes", "curve", "crossover", "boot", "definitions"]
    docs = [doc_of(f) for f in files]
    sentence = crossovers(lane_curves(docs))[0].sentence()
    assert sentence in load.text
    assert "wide (128 seats)" in load.text and "tight (7 seats)" in load.text
    excluded = [r.excluded for c in lane_curves(docs) for r in c.rows if r.excluded]
    assert any("8 users on 7 seats" in why for why in excluded)
    for why in excluded:      # each row that is not a measurement of its users is flagged with why
        assert why.split("seat-starved: ")[-1] in load.text
    for d in docs:
        for entry in d["gates"]["curve"].values():
            assert fmt(entry["ttft_p95_s"]) in load.text
    assert "state pool GiB per seat" in load.text and " GB" not in load.text     # memory in one unit
    # the session wrote the same comparison as a page of its own
    assert "glmf: the comparison as one HTML page: " in runs["outputs"][4]
    session_page = next(runs["results"].glob("compare-*.html"))
    check_offline(browser.load(session_page), session_page)


def test_glmf_history_html_five_runs(runs, browser, tmp_path, capsys) -> None:
    out = tmp_path / "history.html"
    store = runs["results"] / "history.sqlite"
    assert main(["history", "list", "--store", str(store), "--lane", "wide", "--html", str(out)]) == 0
    assert f"HTML written to {out}" in capsys.readouterr().out
    load = browser.load(out)
    check_offline(load, out)
    assert load.sections == ["lane-wide"]
    assert "Lane wide: 5 runs" in load.text
    with sqlite3.connect(store) as db:
        stored = db.execute("SELECT DISTINCT gate, metric FROM glmf_metrics m JOIN glmf_runs r ON r.id = m.run_id "
                            "WHERE r.lane = 'wide'").fetchall()
        failed_points = db.execute("SELECT COUNT(*) FROM glmf_metrics m JOIN glmf_runs r ON r.id = m.run_id "
                                   "WHERE r.lane = 'wide' AND r.verdict != 'passed'").fetchone()[0]
        values = [v for (v,) in db.execute("SELECT value FROM glmf_metrics m JOIN glmf_runs r ON r.id = m.run_id "
                                           "WHERE r.lane = 'wide' AND m.metric = 'per_user_tok_s'")]
    assert browser.eval("document.querySelectorAll('#lane-wide svg.chart').length") == len(stored)
    assert browser.eval("document.querySelectorAll('#lane-wide circle.marked').length") == failed_points > 0
    for v in values:
        assert fmt(v) in load.text
    for path in runs["wide"]:
        assert doc_of(path)["session_id"] in load.text
    # images on the x axis (a simulator lane has none: its engine version names the run)
    ticks = browser.eval("Array.from(document.querySelectorAll('#lane-wide svg.chart')[0]"
                         ".querySelectorAll('text.tick > title')).map(t => t.textContent)")
    assert len(ticks) == 5 and ticks[0].startswith("#1 ")
    # one metric's trend
    one = tmp_path / "trend.html"
    assert main(["history", "trend", "curve.per_user_tok_s", "--store", str(store), "--lane", "wide",
                 "--html", str(one)]) == 0
    load = browser.load(one)
    check_offline(load, one)
    assert browser.eval("document.querySelectorAll('svg.chart').length") == 1


# ---------------------------------------------------------------------------- the words


def test_every_gate_declares_its_title_and_definitions_and_the_reports_use_them() -> None:
    from pytest_glmf.results.report import markdown_report, terminal_report

    doc = {"lane": {"name": "x"}, "gates": {name: {"k": {"x": 1}} for name in GATES}}
    terminal, markdown = terminal_report(doc), markdown_report(doc)
    for name, spec in GATES.items():
        assert spec.title and spec.title != name, name
        assert spec.definitions, name
        assert f"\n{spec.title}\n" in terminal and f"### {spec.title}\n" in markdown, name
        assert all(f"- {d}\n" in markdown for d in spec.definitions), name


def test_capacity_drift_and_acceptance_sections(runs, browser, tmp_path) -> None:
    """The gates too slow for this module's sessions (minutes each on the simulator), in the shapes
    their suites record (capacity's `to_record`, drift's `to_record`, acceptance classes),
    added to a real result: each gets its section, table, chart and bounds."""
    doc = doc_of(runs["wide"][0])
    # frontier@32768 as an older file wrote it (ci95, now boundary_ci95): its bar still drawn
    doc["gates"]["capacity"] = {
        "users@2400+384": {"users": 44, "stopped_by": "slo", "boundary_ci95": [44, 47], "probes": 5, "requests": 900,
                           "wall_s": 312.5, "spread_by_metric_pct": {"users": 18.2}},
        "frontier@8192": {"users": 20, "stopped_by": "slo", "boundary_ci95": [20, 22], "kv_bound_users": 24, "seats": 128},
        "frontier@32768": {"users": 6, "stopped_by": "kv", "ci95": [6, 6], "kv_bound_users": 6, "seats": 128}}
    doc["gates"]["drift"] = {"nvfp4": {"candidate": "nvfp4", "mean_abs_dlogp": 0.136, "median_abs_dlogp": 0.022,
                                       "p90_abs_dlogp": 0.31, "p95_abs_dlogp": 0.65, "p99_abs_dlogp": 1.9,
                                       "max_abs_dlogp": 4.2, "argmax_mismatch": 0.156, "ci95": [0.12, 0.15],
                                       "floor_abs_dlogp": 0.004, "excess_abs_dlogp": 0.132, "prompts": 40,
                                       "tokens": 5120, "self_check_mode": "exact"}}
    # a vLLM boot log's maximum concurrency, as its parser records it (gates/boot/vllm.py)
    doc["gates"]["boot"]["facts"]["max_concurrency"] = {"tokens_per_request": 4096, "factor": 151.98}
    doc["gates"]["acceptance"] = {"prose": {"class": "prose", "accept_rate": 0.29, "accept_length": 2.1, "tok_s": 175},
                                  "math": {"class": "math", "accept_rate": 0.61, "accept_length": 3.4, "tok_s": 291}}
    result = tmp_path / "wide.json"
    result.write_text(json.dumps(doc))
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(THRESHOLDS.replace("  tight:\n", "    capacity: {users: {min: 46}}\n"
                                             "    drift: {mean_abs_dlogp: {max: 0.15}, p95_abs_dlogp: {max: 0.7}}\n"
                                             "    acceptance: {classes: {prose: {accept_rate: {min: 0.3}}}}\n"
                                             "  tight:\n", 1))
    out = tmp_path / "r.html"
    assert main(["report", str(result), "--html", str(out), "--thresholds", str(thresholds)]) == 0
    load = browser.load(out)
    check_offline(load, out)
    assert load.sections == ["verdict", "provenance", "gate-boot", "gate-curve", "gate-capacity", "gate-drift",
                             "gate-acceptance", "ledger"]
    for gate in ("capacity", "drift", "acceptance"):
        assert GATES[gate].title in load.text and GATES[gate].definitions[0] in load.text
    titles = browser.eval("Array.from(document.querySelectorAll('svg > title')).map(t => t.textContent)")
    assert {"Capacity frontier: users against context per user", "|dlogp| distribution: nvfp4",
            "Accept rate per prompt class"} <= set(titles)
    missed = browser.eval("Array.from(document.querySelectorAll('td.miss')).map(c => c.closest('section').id + ' ' "
                          "+ c.innerText.split('\\n')[0])")
    # 44 users < 46 and prose 0.29 < 0.3 miss; the drift numbers meet their bounds
    assert "gate-capacity 44" in missed and "gate-acceptance 0.29" in missed
    assert not any(m.startswith("gate-drift") for m in missed)
    assert "noise floor 0.004" in browser.eval("document.querySelector('#gate-drift svg').textContent")
    # the noise floor is named so in the legend, drawn apart from the two bounds (mean and p95 max)
    legend = browser.eval("document.querySelector('#gate-drift p.legend').innerText")
    assert "noise floor" in legend and "bound (thresholds)" in legend
    assert browser.eval("document.querySelectorAll('#gate-drift svg line.bound').length") == 2
    assert browser.eval("document.querySelectorAll('#gate-drift svg line.floor').length") == 1
    # a fact that is a mapping reads as words, as the terminal's boot table says it
    facts = browser.table_cells("gate-boot")
    assert facts["max concurrency"]["value"] == "151.98x at 4,096 tokens per request"
    boot = browser.eval("document.querySelector('#gate-boot').innerText")
    assert "tokens_per_request" not in boot and "{" not in boot


# ---------------------------------------------------------------------------- what the page must not hide (issue 40)


def verdict_text(browser: Browser) -> str:
    return browser.eval("document.querySelector('#verdict .verdict').innerText")


def test_the_page_leads_with_the_gates_that_verified_nothing_and_why(runs, browser, tmp_path) -> None:
    """The terminal says "NOT verified: acceptance: N skipped: ..."; the page says the same beside
    the verdict, ahead of everything else, and a passed session reads "PASSED, but 1 gate verified
    nothing" (issue 40 item 3: the demo's page said only PASSED)."""
    doc = doc_of(runs["wide"][0])
    why = doc["verified"]["acceptance"]["why_not"]
    assert doc["verified"]["acceptance"]["checks"] == 0 and "skipped" in why
    assert f"glmf: NOT verified: acceptance: {why}" in runs["outputs"][0].replace("\n    ", " ")
    page = runs["results"] / "wide-1.html"
    load = browser.load(page)
    check_offline(load, page)
    text = verdict_text(browser)
    assert text.startswith("FAILED") and "1 gate verified nothing:\nacceptance: " + why in text
    assert "verified: boot (" in text and "curve (" in text
    # passed: the words say what was not verified, in the verdict's own box
    doc.update(exitstatus=0, failed_tests=[])
    result = tmp_path / "passed.json"
    result.write_text(json.dumps(doc))
    out = tmp_path / "passed.html"
    assert main(["report", str(result), "--html", str(out)]) == 0
    load = browser.load(out)
    check_offline(load, out)
    text = verdict_text(browser)
    assert text.startswith("PASSED\npytest exit status 0\nPASSED, but 1 gate verified nothing:\nacceptance: " + why)
    assert load.text.index("verified nothing") < load.text.index("Lane and provenance")
    # every gate verified something: no such words
    doc["verified"] = {g: d for g, d in doc["verified"].items() if d["checks"]}
    result.write_text(json.dumps(doc))
    assert main(["report", str(result), "--html", str(out)]) == 0
    browser.load(out)
    assert "verified nothing" not in verdict_text(browser)


def test_an_incomplete_result_says_so_beside_the_verdict(runs, browser, tmp_path) -> None:
    """A result whose `incomplete` names why (a session's list, or a gate command's --json after
    Ctrl-C) is marked INCOMPLETE in the verdict's box with each reason."""
    doc = doc_of(runs["wide"][0])
    for value, reasons in ((["the server exited (code -9)", "interrupted (Ctrl-C / SIGINT) before the end"],
                            ["the server exited (code -9)", "interrupted (Ctrl-C / SIGINT) before the end"]),
                           ("interrupted (Ctrl-C / SIGINT) before the end",
                            ["interrupted (Ctrl-C / SIGINT) before the end"])):
        doc["incomplete"] = value
        result = tmp_path / "cut.json"
        result.write_text(json.dumps(doc))
        out = tmp_path / "cut.html"
        assert main(["report", str(result), "--html", str(out)]) == 1   # rendered, but a partial result
        load = browser.load(out)
        check_offline(load, out)
        assert load.title == "pytest-glmf wide incomplete"
        text = verdict_text(browser)
        assert text.startswith("INCOMPLETE\n") and "INCOMPLETE: the run did not reach its end" in text
        shown = browser.eval("Array.from(document.querySelectorAll('#verdict .incomplete-banner li'))"
                             ".map(li => li.innerText)")
        assert shown == reasons


def test_shared_prefix_rows_are_drawn_hollow_and_apart_as_in_the_png(runs, browser) -> None:
    """The 4-user row's users all sent one prompt: in every curve chart its points are hollow, in a
    series of their own named in the legend, and no line joins them to the 1- and 8-user rows (the
    PNG draws them hollow, "not comparable"; the page drew one solid line through them)."""
    from pytest_glmf.results.columns import table_notes
    from pytest_glmf.results.plotting import curve_figure

    doc = doc_of(runs["wide"][0])
    assert [e["users"] for e in doc["gates"]["curve"].values() if e.get("shared_prefix")] == [4]
    hollow_png = {s.label for p in curve_figure(doc).panels for s in p.series if s.style == "hollow"}
    assert hollow_png and all("prefix shared" in label for label in hollow_png)
    browser.load(runs["results"] / "wide-1.html")
    charts = browser.eval("""Array.from(document.querySelectorAll('#gate-curve svg.chart')).map(svg => ({
        lines: Array.from(svg.querySelectorAll('polyline')).map(l => l.getAttribute('points').split(' ').length),
        hollow: Array.from(svg.querySelectorAll('circle.marked')).map(c => c.querySelector('title').textContent)
            .filter(t => t.includes('prefix shared')),
        points: Array.from(svg.querySelectorAll('circle.pt')).filter(c => !c.querySelector('title').textContent
            .includes('(thresholds)')).length,
        legend: svg.nextElementSibling.innerText}))""")
    assert len(charts) == 3
    for chart, metrics in zip(charts, (["per_user_tok_s"], ["aggregate_tok_s"], ["ttft_p50_s", "ttft_p95_s"])):
        assert chart["lines"] == [2] * len(metrics)       # 1 and 8 users: the 4-user point is on no line
        assert chart["points"] == 3 * len(metrics)
        assert sorted(t.split(" @ ")[0] for t in chart["hollow"]) == sorted(
            f"{m}, prefix shared (not comparable)" for m in metrics)
        assert all(" @ 4: " in t and "a prefix cache computes once" in t for t in chart["hollow"])
        assert all(f"{m}, prefix shared (not comparable)" in chart["legend"] for m in metrics)
    # under the table, the terminal's sentence
    (note,) = table_notes("curve", doc["gates"]["curve"])
    assert note in browser.eval("document.querySelector('#gate-curve').innerText")


def test_the_columns_say_what_the_terminal_table_says(runs, browser) -> None:
    """`prefix` own/shared and `flags` ok (or the flag) as the terminal's table has them; the page
    showed "-" and nothing."""
    from pytest_glmf.results.columns import gate_table, with_derived
    from pytest_glmf.results.report import terminal_report

    doc = doc_of(runs["wide"][0])
    entries = doc["gates"]["curve"]
    header, body = gate_table("curve", entries)
    assert "prefix" in header and "flags" in header
    terminal = {(row[0] if header[0] == "key" else f"users={row[0]}"): dict(zip(header, row)) for row in body}
    browser.load(runs["results"] / "wide-1.html")
    page = browser.table_cells("gate-curve")
    assert set(page) == set(entries)
    for key, entry in with_derived("curve", entries).items():
        assert page[key]["prefix"] == terminal[key]["prefix"] == entry["prefix"]
        assert page[key]["flags"] == terminal[key]["flags"] == entry["flags"]
    assert {page[k]["prefix"] for k in page} == {"own", "shared"} and "ok" in {page[k]["flags"] for k in page}
    assert "| shared |" in terminal_report(doc)


def test_a_table_too_wide_for_the_page_is_split_each_part_led_by_its_key() -> None:
    """As the terminal's fit_table: 30 numeric columns become tables of at most TABLE_CHARS, each
    starting with the key column, every column once."""
    from pytest_glmf.results.html_blocks import TABLE_CHARS, column_groups, table, td, th

    heads = [th("key"), *(th(f"metric_number_{j}", "tok/s") for j in range(30))]
    body = [[td(f"users={u}"), *(td(f"{123456.7 * u:,.1f}", "num", "≥ 100,000") for _ in range(30))] for u in (1, 8)]
    groups = column_groups(heads, body)
    assert len(groups) > 2 and all(g[0] == 0 for g in groups)
    assert sorted(j for g in groups for j in g[1:]) == list(range(1, 31))
    assert all(sum(len("1,975,307.2") + 2 for _ in g[1:]) <= TABLE_CHARS for g in groups)
    html = table(heads, body, raw=True)
    assert html.count("<table>") == len(groups) and html.count("users=8") == len(groups)
    assert column_groups(heads[:5], [r[:5] for r in body]) == [[0, 1, 2, 3, 4]]     # one that fits: one


def test_no_table_scrolls_sideways_on_the_page_or_on_paper(runs, browser, tmp_path) -> None:
    """Every column shows at 1,100 px and on an A4 page: a wide table wraps its heads at the
    underscores and its words, and is split when still too wide, rather than hiding its last
    columns behind a scrollbar (lost in print and screenshots)."""
    from pytest_glmf.results.columns import gate_table

    doc = doc_of(runs["wide"][0])
    wide = dict(next(iter(doc["gates"]["curve"].values())))
    wide.update({f"extra_metric_number_{i}": 12345.678 + i for i in range(8)})
    doc["gates"]["curve"]["users=99"] = {**wide, "users": 99, "tokens_per_user": 4574}     # beside 25,160
    result = tmp_path / "wide.json"
    result.write_text(json.dumps(doc))
    out = tmp_path / "wide.html"
    assert main(["report", str(result), "--html", str(out)]) == 0
    compare = tmp_path / "compare.html"
    assert main(["compare", str(runs["wide"][4]), str(runs["tight"]), "--html", str(compare)]) == 0
    history = tmp_path / "history.html"
    assert main(["history", "list", "--store", str(runs["results"] / "history.sqlite"), "--lane", "wide",
                 "--html", str(history)]) == 0
    try:
        for page in (runs["results"] / "wide-1.html", runs["results"] / "wide-3.html", out, compare, history):
            for paper in (False, True):
                browser.emulate_screen()
                check_offline(browser.load(page), page)
                if paper:
                    browser.emulate_print(718)
                assert browser.sideways() == [], (page.name, "print" if paper else "screen")
        # every column of the terminal's table is there
        browser.emulate_screen()
        browser.load(out)
        header, _ = gate_table("curve", doc["gates"]["curve"])
        row = browser.table_cells("gate-curve")["users=99"]
        assert set(row) == {"key", *header[1:]} and {"aggregate_tok_s", "flags", "prefix"} <= set(row)
        assert row["tokens_per_user"] == "4,574"          # the column's one number format
        heads = browser.eval("Array.from(document.querySelectorAll('#gate-curve th')).map(t => t.innerHTML)")
        assert any("per_<wbr>user_<wbr>tok_<wbr>s" in h for h in heads)
    finally:
        browser.emulate_screen()
