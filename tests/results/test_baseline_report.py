"""Baseline comparisons (direction, tolerance, spread) and report rendering (table, markdown, PNG)."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from pytest_glmf.results import report
from pytest_glmf.results.baseline import (
    BaselineError,
    compare_entry,
    compare_results,
    load_baseline,
    machine_differences,
)


def doc(rows: dict, prov: dict | None = None, schema: int = 1) -> dict:
    return {"schema": schema, "lane": {"name": "batch"}, "provenance": prov or {"gpu_name": "GB300"},
            "gates": {"curve": rows}}


ROW48 = {"users": 48, "seats": 128, "aggregate_tok_s": 2214.0, "per_user_tok_s": 50.0,
         "ttft_p50_s": 0.69, "ttft_p95_s": 0.76, "spread_pct": 2.0, "runs": 3}


def test_throughput_drop_beyond_tolerance_is_a_regression():
    now = {**ROW48, "per_user_tok_s": 45.0, "spread_pct": 1.0}   # -10 %
    comps = {c.metric: c for c in compare_entry("curve", "48", now, ROW48, {"rel_pct": 5})}
    c = comps["per_user_tok_s"]
    # allowed % = max(5, 2, 1) = 5 -> 2.5 tok/s; worse by 5.0
    assert c.allowed == pytest.approx(2.5) and c.worse_by == pytest.approx(5.0)
    assert c.regressed
    assert not comps["aggregate_tok_s"].regressed


def test_direction_latency_up_is_worse_down_is_better():
    slower = {**ROW48, "ttft_p95_s": 0.90}
    faster = {**ROW48, "ttft_p95_s": 0.50}
    assert {c.metric for c in compare_entry("curve", "48", slower, ROW48) if c.regressed} == {"ttft_p95_s"}
    assert not [c for c in compare_entry("curve", "48", faster, ROW48) if c.regressed]


def test_difference_inside_the_recorded_spread_is_not_a_regression():
    base = {**ROW48, "spread_pct": 8.0}
    now = {**ROW48, "per_user_tok_s": 46.5, "spread_pct": 1.0}    # -7 %, inside the 8 % spread
    c = next(c for c in compare_entry("curve", "48", now, base, {"rel_pct": 5}) if c.metric == "per_user_tok_s")
    assert c.allowed_pct == 8.0 and not c.regressed


def test_absolute_tolerance_and_per_metric_override():
    base = {"mean_abs_dlogp": 0.01}
    now = {"mean_abs_dlogp": 0.014}   # +40 % but only +0.004 absolute
    tol = {"rel_pct": 5, "metrics": {"mean_abs_dlogp": {"abs": 0.005}}}
    (c,) = compare_entry("drift", "nvidia", now, base, tol)
    assert c.allowed == pytest.approx(0.005) and not c.regressed
    (c,) = compare_entry("drift", "nvidia", now, base, {"rel_pct": 5})
    assert c.regressed


def test_a_metric_missing_now_is_a_regression_and_unknown_fields_are_ignored():
    comps = compare_results(doc({"48": {"users": 48, "note": "x"}}), doc({"48": ROW48}))
    assert comps and all(c.regressed for c in comps)
    assert "note" not in {c.metric for c in comps}


def test_load_baseline_refuses_other_schema_and_names_the_file(tmp_path: Path):
    p = tmp_path / "old.json"
    p.write_text(json.dumps(doc({}, schema=0)))
    with pytest.raises(BaselineError, match=r"old\.json: result schema 0, this plugin reads schema 1"):
        load_baseline(p, 1)
    with pytest.raises(BaselineError, match="baseline file not found"):
        load_baseline(tmp_path / "nope.json", 1)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(BaselineError, match="not a readable JSON"):
        load_baseline(tmp_path / "bad.json", 1)


def test_machine_differences_are_named():
    a = doc({}, {"gpu_name": "GB300", "model_revision": "abc"})
    b = doc({}, {"gpu_name": "H100", "model_revision": "abc"})
    assert machine_differences(a, b) == ["gpu_name: baseline 'H100', now 'GB300'"]


def test_terminal_and_markdown_reports_show_rows_regressions_and_definitions():
    base = doc({"48": ROW48})
    now = doc({"48": {**ROW48, "per_user_tok_s": 40.0}, "1": {**ROW48, "users": 1, "per_user_tok_s": 142.0}},
              {"gpu_name": "H100"})
    text = report.terminal_report(now, base)
    assert "Concurrency curve" in text and "per_user_tok_s" in text
    assert "gpu_name: baseline 'GB300', now 'H100'" in text
    assert "curve.per_user_tok_s [48] | 50" in text and "-20.0 %" in text
    md = report.markdown_report(now, base)
    assert "### Against the baseline: 1 regression(s)" in md
    assert "| key | users | seats |" in md
    assert "TTFT: request sent -> first chunk" in md


def test_plot_writes_a_real_png(tmp_path: Path):
    rows = {str(u): {**ROW48, "users": u, "per_user_tok_s": 142.0 / (1 + u / 40)} for u in (1, 8, 48, 128)}
    out = report.plot_curve(doc(rows), tmp_path / "curve.png", baseline=doc({"48": ROW48}))
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (990, 1144) and len(data) > 20_000      # three panels, 9 in wide


def test_plot_without_curve_rows_says_so(tmp_path: Path):
    with pytest.raises(ValueError, match="no curve rows"):
        report.plot_curve(doc({}), tmp_path / "x.png")


def test_report_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    res = tmp_path / "r.json"
    res.write_text(json.dumps(doc({"48": ROW48})))
    md, png = tmp_path / "r.md", tmp_path / "r.png"
    assert report.cli([str(res), "--markdown", str(md), "--plot", str(png)]) == 0
    assert md.read_text().startswith("## pytest-glmf results: lane batch")
    assert png.stat().st_size > 10_000
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc({}, schema=7)))
    assert report.cli([str(res), "--baseline", str(old)]) == 2
    assert "result schema 7" in capsys.readouterr().err
