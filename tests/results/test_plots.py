"""The pictures, read back through matplotlib's objects: one quantity per axis (no twin axes),
labels and units from the gates' metric definitions, spread bars and bound markers, rows that
shared a prompt prefix drawn apart and said so, a title with lane, image, date and verdict; the
history trend's x labels tell runs of one day apart by their time."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_glmf.cli import main
from pytest_glmf.results import plotting
from pytest_glmf.results.plotting import curve_bounds, curve_figure, draw, trend_figure

pytest.importorskip("matplotlib")


def row(users: int, per_user: float, ttft: float, shared: bool = False) -> dict[str, Any]:
    return {"users": users, "per_user_tok_s": per_user, "aggregate_tok_s": per_user * users, "ttft_p50_s": ttft * 0.8,
            "ttft_p95_s": ttft, "spread_pct": 4.0, "spread_by_metric_pct": {"ttft_p95_s": 10.0},
            "shared_prefix": shared}


DOC = {"lane": {"name": "batch"}, "exitstatus": 1, "incomplete": [],
       "provenance": {"image": "sglang:new", "started_at": "2026-12-02T13:34:51+00:00"},
       "gates": {"curve": {f"users={r['users']}": r for r in (row(8, 90, 0.3), row(48, 50, 0.76),
                                                                row(96, 40, 0.31, shared=True))}}}


def test_the_curve_one_quantity_per_axis_with_spread_bounds_prefix_and_title(tmp_path: Path) -> None:
    bounds = curve_bounds({"rows": [{"users": 48, "per_user_tok_s": {"min": 45}, "ttft_p95_s": {"max": 0.9},
                                     "settings": {"runs": 3}}]})
    fig = draw(curve_figure(DOC, bounds=bounds))
    axes = fig.get_axes()
    assert len(axes) == 3                                        # no twin axis: three panels, three axes
    assert [a.get_ylabel() for a in axes] == ["per-user decode rate (tok/s)", "aggregate output (tok/s)",
                                              "TTFT (p50, p95) (s)"]
    assert axes[-1].get_xlabel() == "concurrent users"
    assert axes[0].get_title() == "Concurrency curve: lane batch, image sglang:new, 2026-12-02 13:34 UTC, failed"
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert "per-user decode rate (tok/s), bound (min)" in labels
    assert "per-user decode rate (tok/s) (prefix shared)" in labels
    bound = next(line for line in axes[0].get_lines() if line.get_label() == "per-user decode rate (tok/s), bound (min)")
    assert list(bound.get_xdata()) == [48] and list(bound.get_ydata()) == [45]
    ttft = [t.get_text() for t in axes[2].get_legend().get_texts()]
    assert "prefix shared by all users: a prefix cache computes it once (TTFT not comparable)" in ttft
    assert "TTFT p95 (s), bound (max)" in ttft
    # spread bars: TTFT p95 at 48 users +- 10 % / 2 of 0.76
    bars = [c for c in axes[2].containers if c.get_label() == "TTFT p95 (s)"][0]
    segment = bars.lines[2][0].get_segments()[1]
    assert segment[0][1] == pytest.approx(0.76 - 0.038) and segment[1][1] == pytest.approx(0.76 + 0.038)
    # the shared-prefix row is not on the line of the others (TTFT "falls" at 96 because of it)
    assert list(bars.lines[0].get_xdata()) == [8, 48]
    plotting.pyplot().close(fig)


def test_glmf_report_plot_with_the_thresholds_bounds(tmp_path: Path, capsys) -> None:
    result = tmp_path / "batch.json"
    result.write_text(json.dumps(DOC))
    thresholds = tmp_path / "th.yaml"
    thresholds.write_text("schema: 1\nlanes:\n  batch:\n    curve:\n      rows:\n"
                          "        - {users: 48, per_user_tok_s: {min: 45}}\n")
    assert main(["report", str(result), "--plot", str(tmp_path / "c.png"), "--thresholds", str(thresholds)]) == 0
    assert (tmp_path / "c.png").stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "prefix shared: at 96 users every user sent the same prompt" in out


def test_the_history_trend_labels_runs_by_time_and_image() -> None:
    runs = [SimpleNamespace(started_at=f"2026-12-02T{h}:00+00:00", verdict=v, image=i)
            for h, v, i in (("09:05", "passed", "sglang:a"), ("11:40", "failed", "sglang:b"))]
    fig = draw(trend_figure("curve", "ttft_p95_s", {"batch": (runs, {"users=48": [0.76, 0.9]})}))
    ax = fig.get_axes()[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["12-02 09:05\nsglang:a", "12-02 11:40\nsglang:b"]
    assert ax.get_ylabel() == "TTFT p95 (s)"
    assert ax.get_title() == "TTFT p95 (s) per run: lane batch, 2026-12-02 (UTC)"
    assert "batch users=48: failed or incomplete" in [t.get_text() for t in ax.get_legend().get_texts()]
    plotting.pyplot().close(fig)
