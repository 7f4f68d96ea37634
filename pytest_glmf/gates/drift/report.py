"""What the drift gate adds to the reports beyond its table (`GateReport`, gates/spec.py): the HTML
page's |dlogp| distribution per candidate, and a comparison's table.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.spec import CompareTable, GateReport, Table
from pytest_glmf.results import svg
from pytest_glmf.results.html_blocks import is_number
from pytest_glmf.results.html_gates import bound_of
from pytest_glmf.text import fmt

DRIFT_QUANTILES = (("median", "median_abs_dlogp"), ("mean", "mean_abs_dlogp"), ("p90", "p90_abs_dlogp"),
                   ("p95", "p95_abs_dlogp"), ("p99", "p99_abs_dlogp"), ("max", "max_abs_dlogp"))


def drift_charts(entries: Mapping[str, Any], bounds: Mapping[str, Any]) -> list[str]:
    out = []
    for key, e in entries.items():
        if not isinstance(e, Mapping):
            continue
        pts = [svg.Point(label, e[m]) for label, m in DRIFT_QUANTILES if is_number(e.get(m))]
        if len(pts) < 2:
            continue
        lines = []
        floors = [(float(e["floor_abs_dlogp"]), f"noise floor {fmt(e['floor_abs_dlogp'])}")
                  ] if is_number(e.get("floor_abs_dlogp")) else []
        for _, m in DRIFT_QUANTILES:
            b = bound_of("drift", bounds, str(key), e, m)
            if "max" in b:
                lines.append((float(b["max"]), f"{m.split('_')[0]} max {fmt(b['max'])}"))
        cats = [p.x for p in pts]
        out.append(svg.line_chart(svg.Chart(f"|dlogp| distribution: {e.get('candidate') or key}",
                                            "|dlogp| (nats)", "over generated tokens",
                                            [svg.Series(str(e.get("candidate") or key), pts)], lines, floors,
                                            categories=[str(c) for c in cats])))
    return out


def compare_table(lanes: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    rows = []
    for name, doc in lanes:
        for key, e in (((doc.get("gates") or {}).get("drift")) or {}).items():
            if isinstance(e, Mapping) and "mean_abs_dlogp" in e:
                rows.append([name, str(e.get("candidate") or key), fmt(e.get("mean_abs_dlogp")),
                             fmt(e.get("argmax_mismatch")), _pair(e.get("ci95")), fmt(e.get("prompts"))])
    return ["lane", "candidate", "mean |dlogp|", "argmax mismatch", "ci95", "prompts"], rows


def _pair(v: Any) -> str:
    return f"[{fmt(v[0])}, {fmt(v[1])}]" if isinstance(v, list) and len(v) == 2 else fmt(v)


REPORT = GateReport(charts=drift_charts, compare=CompareTable("Log-prob drift per candidate", 30, compare_table))
