"""What the acceptance gate adds to the reports beyond its table (`GateReport`, gates/spec.py): a
class's bound by its name, the HTML page's accept rate per class, a comparison's table, and the
classes of an older `glmf accept --json`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.compare.report import lanes_by_key
from pytest_glmf.gates.spec import CompareTable, GateReport, Table
from pytest_glmf.results import svg
from pytest_glmf.results.gatejson import scalars
from pytest_glmf.results.html_blocks import is_number
from pytest_glmf.results.html_gates import bound_of
from pytest_glmf.text import fmt


def class_bound(section: Mapping[str, Any], key: str, entry: Mapping[str, Any], metric: str) -> Any:
    """A class's bound is its entry of the section's `classes`."""
    cls = entry.get("class") or key
    return ((section.get("classes") or {}).get(cls) or {}).get(metric)


def acceptance_charts(entries: Mapping[str, Any], bounds: Mapping[str, Any]) -> list[str]:
    items = [(str(e.get("class") or k), k, e) for k, e in entries.items()
             if isinstance(e, Mapping) and is_number(e.get("accept_rate"))]
    if not items:
        return []
    pts = [svg.Point(name, e["accept_rate"]) for name, _, e in items]   # classes have no order: no line
    mins = [svg.Point(name, bound_of("acceptance", bounds, k, e, "accept_rate")["min"]) for name, k, e in items
            if "min" in bound_of("acceptance", bounds, k, e, "accept_rate")]
    series = [svg.Series("accept rate", pts, joined=False)] + ([svg.Series("min (thresholds)", mins, dashed=True,
                                                                         color="#b3261e", joined=False)]
                                                              if mins else [])
    return [svg.line_chart(svg.Chart("Accept rate per prompt class", "accept rate (fraction)", "prompt class",
                                     series, categories=[n for n, _, _ in items]))]


def compare_table(lanes: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    def cell(e: Mapping[str, Any]) -> str:
        return f"{fmt(e.get('accept_rate'))} ({fmt(e.get('tok_s'))} tok/s)"
    return lanes_by_key(lanes, "acceptance", cell, lambda k, e: str(e["class"]) if e.get("class") else None)


def legacy_classes(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The classes of what an older `glmf accept --json` wrote (its classes and source at top level)."""
    if not (isinstance(data.get("classes"), list) and "source" in data):
        return None
    return {str(r.get("class") or r.get("name") or i): scalars(r) for i, r in enumerate(data["classes"])
            if isinstance(r, Mapping)}


REPORT = GateReport(bound=class_bound, charts=acceptance_charts,
                    compare=CompareTable("Speculative acceptance per prompt class by lane", 10, compare_table),
                    legacy=legacy_classes)
