"""What the capacity gate adds to the reports beyond its table (`GateReport`, gates/spec.py): what
`glmf capacity` printed (the terminal report), the users bound held by the headline search only,
the HTML page's frontier chart, a comparison's table, and the searches of an older `glmf capacity --json`.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.compare.report import lanes_by_key
from pytest_glmf.gates.capacity.table import recorded_report
from pytest_glmf.gates.spec import CompareTable, GateReport, Table
from pytest_glmf.results import svg
from pytest_glmf.results.html_blocks import is_number
from pytest_glmf.text import fmt


def search_bound(section: Mapping[str, Any], key: str, entry: Mapping[str, Any], metric: str) -> Any:
    """The users bound is the headline search's, not each frontier point's."""
    return None if not key.startswith("users@") and metric == "users" else section.get(metric)


def capacity_charts(entries: Mapping[str, Any], bounds: Mapping[str, Any]) -> list[str]:
    points, kv = [], []
    for key, e in entries.items():
        m = re.fullmatch(r"frontier@(\d+)", str(key))
        if not (m and isinstance(e, Mapping) and is_number(e.get("users"))):
            continue
        # the boundary's interval (named so since issue 33; older result files call it ci95)
        found = e.get("boundary_ci95", e.get("ci95"))
        ci: list[Any] = found if isinstance(found, list) and len(found) == 2 else [None, None]
        points.append(svg.Point(int(m.group(1)), e["users"], ci[0], ci[1], note=f"stopped by {e.get('stopped_by')}"))
        if is_number(e.get("kv_bound_users")):
            kv.append(svg.Point(int(m.group(1)), e["kv_bound_users"]))
    if not points:
        return []
    series = [svg.Series("users that met the service level", points)]
    if kv:
        series.append(svg.Series("users the KV pool holds", kv, dashed=True))
    return [svg.line_chart(svg.Chart("Capacity frontier: users against context per user", "concurrent users",
                                     "context per user (tokens)", series, bars_legend="bars: the boundary's 95 % interval"))]


def compare_table(lanes: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    def cell(e: Mapping[str, Any]) -> str:
        users = fmt(e.get("users")) if "users" in e else fmt(e.get("rate_per_s")) + "/s"
        return f"{users} (stopped by {e.get('stopped_by') or '-'})"
    return lanes_by_key(lanes, "capacity", cell, lambda k, e: k)


# ---------------------------------------------------------------------------- older files


def legacy_searches(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The suite's keys from an older `glmf capacity --json`: `users@PROMPT+OUTPUT`, `frontier@CONTEXT`
    per frontier point, `rate`."""
    if not ("slo" in data and any(k in data for k in ("capacity", "frontier", "rate"))):
        return None
    out: dict[str, Any] = {}
    if isinstance(data.get("capacity"), Mapping):
        w = data["capacity"].get("workload") or {}
        out[f"users@{w.get('prompt_tokens') or 'file'}+{w.get('max_tokens')}"] = _entry(data["capacity"])
    for p in (data.get("frontier") or {}).get("points") or []:
        if isinstance(p, Mapping):
            out[f"frontier@{(p.get('workload') or {}).get('prompt_tokens')}"] = _entry(p)
    if isinstance(data.get("rate"), Mapping):
        out["rate"] = _entry(data["rate"])
    return out


def _entry(p: Mapping[str, Any]) -> dict[str, Any]:
    """A search's output (`CapacityResult.to_dict`) with the entry's counts (`to_record`)."""
    search = p.get("search") or {}
    entry = {k: v for k, v in p.items() if k != "schema"}
    if isinstance(search.get("probes"), list):
        entry["probes"] = len(search["probes"])
    cost = {**(search.get("cost") or {}), **search}
    for k in ("requests", "wall_s"):
        if k in cost:
            entry[k] = cost[k]
    return entry


REPORT = GateReport(recorded=recorded_report, bound=search_bound,
                    charts=capacity_charts, compare=CompareTable("Capacity and frontier by lane", 20, compare_table),
                    legacy=legacy_searches)
