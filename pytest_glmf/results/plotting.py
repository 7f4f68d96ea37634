"""The one place that loads matplotlib (an optional extra) and draws the PNGs: the report's curve
figure, the comparison's lanes figure and the history's trend figure.

Each figure is built in two steps: a pure function turns result data into a `Figure` (panels of
series, every axis one quantity, labelled from the gates' metric definitions: `registry.metric_label`)
and `draw` renders any `Figure` with matplotlib. A renderer other than matplotlib (an HTML report)
takes the same `Figure`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_glmf.gates.registry import metric_label


@dataclass
class Series:
    label: str
    x: list[float]
    y: list[float]                         # NaN where a row's number was not measured: the line breaks there
    spread: list[float] | None = None      # half the run-to-run range at each point (error bars)
    style: str = "line"                    # "line" | "dashed" | "bound-min" | "bound-max" | "hollow"
    color: str | None = None


@dataclass
class Panel:
    ylabel: str
    series: list[Series] = field(default_factory=list)
    shaded: list[tuple[float, float, str]] = field(default_factory=list)   # (x from, x to, what the span means)


@dataclass
class Figure:
    title: str
    xlabel: str
    panels: list[Panel]
    xticks: list[tuple[float, str]] | None = None       # positions and their labels (time on the history's x)


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend; RuntimeError saying how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install 'pytest-glmf[plot]'") from None
    return plt


def save_png(fig: Any, out: str | Path) -> Path:
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    pyplot().close(fig)
    return out


def draw(figure: Figure) -> Any:
    """A matplotlib figure of `figure` (the caller saves it: save_png)."""
    plt = pyplot()
    fig, axes = plt.subplots(len(figure.panels), 1, figsize=(9, 2.6 + 2.6 * len(figure.panels)), sharex=True,
                             squeeze=False)
    for ax, panel in zip((a[0] for a in axes), figure.panels):
        for lo, hi, what in panel.shaded:
            ax.axvspan(lo, hi, color="tab:gray", alpha=0.15, label=what)
        for s in panel.series:
            kw: dict[str, Any] = {"label": s.label, "color": s.color}
            if s.style.startswith("bound"):
                ax.plot(s.x, s.y, "v" if s.style == "bound-max" else "^", linestyle=":", color=s.color or "black",
                        label=s.label, markersize=7)
            elif s.spread is not None:
                ax.errorbar(s.x, s.y, yerr=s.spread, fmt="o" + ("--" if s.style == "dashed" else "-"), capsize=3,
                            mfc="none" if s.style == "hollow" else None, **kw)
            else:
                ax.plot(s.x, s.y, "o" + ("--" if s.style == "dashed" else "-" if s.style == "line" else ""),
                        mfc="none" if s.style == "hollow" else None, **kw)
        ax.set_ylabel(panel.ylabel)
        ax.grid(alpha=0.3)
        if any(s.label for s in panel.series) or panel.shaded:
            ax.legend(fontsize=7)
    bottom = axes[-1][0]
    bottom.set_xlabel(figure.xlabel)
    if figure.xticks is not None:
        bottom.set_xticks([t[0] for t in figure.xticks], [t[1] for t in figure.xticks], rotation=30, ha="right",
                          fontsize=7)
    axes[0][0].set_title(figure.title, fontsize=10)
    return fig


# ---------------------------------------------------------------------------- the curve of one run

CURVE_PANELS = [("per_user_tok_s",), ("aggregate_tok_s",), ("ttft_p50_s", "ttft_p95_s")]


def run_title(doc: Mapping[str, Any], what: str) -> str:
    """"Concurrency curve: lane batch, image sglang:new, 2026-12-02 13:34 UTC, failed"."""
    prov = doc.get("provenance") or {}
    lane = (doc.get("lane") or {}).get("name") or prov.get("lane") or "?"
    image = prov.get("image") or (doc.get("lane") or {}).get("image") or "-"
    when = str(prov.get("started_at") or "")
    when = f"{when[:10]} {when[11:16]} UTC" if len(when) >= 16 else (when or "date unknown")
    return f"{what}: lane {lane}, image {image}, {when}, {run_verdict(doc)}"


def run_verdict(doc: Mapping[str, Any]) -> str:
    if doc.get("incomplete"):
        return "incomplete"
    status = doc.get("exitstatus")
    return "passed" if status == 0 else "failed" if isinstance(status, int) else "verdict not recorded"


def _rows(doc: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    entries = ((doc or {}).get("gates") or {}).get("curve") or {}
    rows = [v for v in entries.values() if isinstance(v, Mapping) and isinstance(v.get("users"), (int, float))]
    return sorted(rows, key=lambda r: r["users"])


def _measured(row: Mapping[str, Any], metric: str) -> bool:
    return isinstance(row.get(metric), (int, float)) and not isinstance(row.get(metric), bool)


def _half_range(row: Mapping[str, Any], metric: str) -> float:
    pct = (row.get("spread_by_metric_pct") or {}).get(metric)
    if pct is None and metric.endswith("tok_s"):
        pct = row.get("spread_pct")
    return abs(float(row[metric])) * float(pct) / 200 if isinstance(pct, (int, float)) else 0.0


def curve_figure(doc: Mapping[str, Any], baseline: Mapping[str, Any] | None = None,
                 bounds: Mapping[int, Mapping[str, Mapping[str, float]]] | None = None) -> Figure:
    """The curve of one result document: per-user tok/s, aggregate tok/s and TTFT, each on its own
    axis, with the run-to-run spread as bars, the thresholds' bounds (`bounds[users][metric]` =
    {min, max}) as markers, rows whose users shared a prompt prefix drawn hollow and shaded, and
    the baseline's rows dashed. ValueError when the document has no curve rows."""
    rows = _rows(doc)
    if not rows:
        raise ValueError("the result has no curve rows to plot")
    base = _rows(baseline)
    shared = [r["users"] for r in rows if r.get("shared_prefix")]
    panels = []
    for metrics in CURVE_PANELS:
        quantity = metric_label("curve", metrics[0]) if len(metrics) == 1 else \
            f"TTFT ({metrics[0].split('_')[1]}, {metrics[1].split('_')[1]}) (s)"
        panel = Panel(quantity)
        for metric in metrics:
            color = f"C{CURVE_PANELS.index(metrics) * 2 + metrics.index(metric)}"
            label = metric_label("curve", metric)
            for part, style in ((lambda r: not r.get("shared_prefix"), "line"), (lambda r: r.get("shared_prefix"),
                                                                                  "hollow")):
                # a row whose number was not measured stays in the line as NaN: the line breaks there
                pts = [r for r in rows if part(r) and (style == "line" or _measured(r, metric))]
                if any(_measured(r, metric) for r in pts):
                    panel.series.append(Series(label + (" (prefix shared)" if style == "hollow" else ""),
                                               [r["users"] for r in pts],
                                               [float(r[metric]) if _measured(r, metric) else math.nan for r in pts],
                                               [_half_range(r, metric) if _measured(r, metric) else 0.0 for r in pts],
                                               style, color))
            pts = [r for r in base if isinstance(r.get(metric), (int, float))]
            if pts:
                panel.series.append(Series(f"{label}, baseline", [r["users"] for r in pts],
                                           [float(r[metric]) for r in pts], None, "dashed", color))
            for side in ("min", "max"):
                marks = [(u, b[metric][side]) for u, b in sorted((bounds or {}).items())
                         if isinstance((b.get(metric) or {}).get(side), (int, float))]
                if marks:
                    panel.series.append(Series(f"{label}, bound ({side})", [m[0] for m in marks],
                                               [float(m[1]) for m in marks], None, f"bound-{side}", color))
        if shared:
            panel.shaded.append((min(shared) - 0.5, max(shared) + 0.5,
                                 "prefix shared by all users: a prefix cache computes it once (TTFT not comparable)"
                                 if metrics[0].startswith("ttft") else "_nolegend_"))
        panels.append(panel)
    return Figure(run_title(doc, "Concurrency curve"), "concurrent users", panels)


def curve_bounds(section: Mapping[str, Any] | None) -> dict[int, dict[str, dict[str, float]]]:
    """users -> metric -> {min, max} from a lane's `curve:` thresholds section (its `rows:`)."""
    out: dict[int, dict[str, dict[str, float]]] = {}
    for row in (section or {}).get("rows") or []:
        if isinstance(row, Mapping) and isinstance(row.get("users"), int):
            out[row["users"]] = {k: dict(v) for k, v in row.items() if isinstance(v, Mapping) and k != "settings"}
    return out


def plot_curve(doc: Mapping[str, Any], out: str | Path, baseline: Mapping[str, Any] | None = None,
               bounds: Mapping[int, Mapping[str, Mapping[str, float]]] | None = None) -> Path:
    """PNG of `curve_figure`."""
    return save_png(draw(curve_figure(doc, baseline, bounds)), out)


# ---------------------------------------------------------------------------- a metric over stored runs

def _when(started_at: str) -> str:
    """"2026-12-02T13:34:51+00:00" -> "12-02 13:34" (runs of one day told apart by their time)."""
    s = str(started_at)
    return f"{s[5:10]} {s[11:16]}" if len(s) >= 16 else s


def trend_figure(gate: str, metric: str, trends: Mapping[str, tuple[Sequence[Any], Mapping[str, Sequence[Any]]]]
                 ) -> Figure:
    """A metric per stored run (`queries.trend`'s), one series per lane and key, x the runs in order
    labelled with their start (month-day hour:minute, UTC) and image; runs that failed or are
    incomplete drawn hollow. ValueError when no run recorded it."""
    if not trends:
        raise ValueError(f"no stored run recorded {gate}.{metric}")
    panel = Panel(metric_label(gate, metric))
    ticks: list[tuple[float, str]] = []
    for lane, (runs, columns) in trends.items():
        for k, values in columns.items():
            pts = [(i, v, r.verdict == "passed") for i, (r, v) in enumerate(zip(runs, values)) if v is not None]
            panel.series.append(Series(f"{lane} {k}", [p[0] for p in pts], [p[1] for p in pts], None, "line"))
            bad = [p for p in pts if not p[2]]
            if bad:
                panel.series.append(Series(f"{lane} {k}: failed or incomplete", [p[0] for p in bad],
                                           [p[1] for p in bad], None, "hollow", "black"))
        ticks = [(i, f"{_when(r.started_at)}\n{r.image or '-'}") for i, r in enumerate(runs)]
    lanes = ", ".join(trends)
    first = min(str(r.started_at)[:10] for runs, _ in trends.values() for r in runs)
    last = max(str(r.started_at)[:10] for runs, _ in trends.values() for r in runs)
    span = first if first == last else f"{first} to {last}"
    return Figure(f"{metric_label(gate, metric)} per run: lane {lanes}, {span} (UTC)", "run start (UTC) and image",
                  [panel], ticks)


def plot_trend(gate: str, metric: str, trends: Mapping[str, tuple[Sequence[Any], Mapping[str, Sequence[Any]]]],
               out: str | Path) -> Path:
    """PNG of `trend_figure`."""
    return save_png(draw(trend_figure(gate, metric, trends)), out)
