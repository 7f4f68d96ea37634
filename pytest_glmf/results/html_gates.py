"""One HTML section per gate of a result document (results/html.py builds the page).

Every section is the gate's table (the columns results/columns.py picks for the terminal and the
Markdown; headers with the unit and meaning from the gate's spec), the gate's charts, and its
definitions. A cell is marked where it misses its bound (the lane's thresholds, when known) and
coloured against the baseline only where the change exceeds what is allowed (the tolerance or the
run-to-run spread of either run: results/baseline.py). Rows that are not a measurement of what
they name are marked with why: curve rows the client bound (invalid), rows sharing seats or a
prompt prefix (shared-prefix), noisy rows.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape
from typing import Any

from pytest_glmf.gates.registry import GATES
from pytest_glmf.results import svg
from pytest_glmf.results.baseline import compare_results, spread_of
from pytest_glmf.results.columns import cell, gate_table, shared_prefix_note, with_derived
from pytest_glmf.results.html_blocks import (
    charts,
    definitions,
    gate_title,
    is_number,
    metric_doc,
    section,
    table,
    tag,
    td,
    th,
    unit_of,
)
from pytest_glmf.text import fmt, same_number_format

Comps = Mapping[tuple[str, str, str], tuple[str, str]]   # (gate, key, metric) -> (css class, change text)


def baseline_cells(doc: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[tuple[str, str, str], tuple[str, str]]:
    """Per compared number: "worse" / "better" where the change exceeds the allowed change, else
    "" (within noise or tolerance), and the change as text."""

    out = {}
    for c in compare_results(doc, baseline):
        if c.now is None:
            out[(c.gate, c.key, c.metric)] = ("worse", "missing now")
            continue
        beyond = c.worse_by is not None and abs(c.worse_by) > c.allowed + 1e-12
        cls = ("worse" if c.worse_by > 0 else "better") if beyond and c.worse_by is not None else ""
        pct = c.change_pct
        text = f"{c.change:+.4g}" + (f" ({pct:+.1f} %)" if pct is not None else "") + " vs baseline"
        out[(c.gate, c.key, c.metric)] = (cls, text)
    return out


# ---------------------------------------------------------------------------- bounds


def bound_of(gate: str, section_: Mapping[str, Any], key: str, entry: Mapping[str, Any], metric: str) -> dict[str, Any]:
    """The thresholds bound ({min, max}) on this entry's metric, {} when none: a curve row by its
    users, an acceptance class by its name, else the section's own bound."""
    if not section_:
        return {}
    if gate == "curve":
        row = next((r for r in section_.get("rows") or [] if r.get("users") == entry.get("users")), None)
        return _bound((row or {}).get(metric))
    if gate == "acceptance":
        cls = entry.get("class") or key
        return _bound(((section_.get("classes") or {}).get(cls) or {}).get(metric))
    if gate == "capacity" and not key.startswith("users@") and metric == "users":
        return {}   # the users bound is the headline search's, not each frontier point's
    return _bound(section_.get(metric))


def _bound(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) and value and set(value) <= {"min", "max"} else {}


def _bound_text(bound: Mapping[str, Any]) -> str:
    return " ".join(f"{'≥' if k == 'min' else '≤'} {fmt(v)}" for k, v in sorted(bound.items(), reverse=True))


def _misses(value: Any, bound: Mapping[str, Any]) -> bool:
    if not is_number(value):
        return False
    return ("min" in bound and value < bound["min"]) or ("max" in bound and value > bound["max"])


# ---------------------------------------------------------------------------- the table


def row_marks(entry: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(label, kind, why) of what makes a row not a plain measurement of its users."""
    marks = []
    if entry.get("valid") is False:
        why = str(entry.get("flags") or "the client's self-check marked its runs")
        marks.append(("invalid", "bad", why))
    elif entry.get("client_bound"):
        marks.append(("client-bound", "bad", str(entry.get("flags") or "")))
    seat: Mapping[str, Any] = entry["seat"] if isinstance(entry.get("seat"), Mapping) else {}
    if seat.get("shared"):
        marks.append((f"{fmt(entry.get('users'))} users on {fmt(seat.get('seats'))} seats", "warn",
                      "more users than seats: the row measures queueing, not that many users"))
    memory: Mapping[str, Any] = entry["memory"] if isinstance(entry.get("memory"), Mapping) else {}
    if (memory.get("shared_tokens") or 0) > 0:
        marks.append(("shared prefix", "info", f"every user sends the same {fmt(memory['shared_tokens'])}-token "
                                              "prompt prefix (the prefix cache stores it once)"))
    if memory.get("fits") is False:
        marks.append(("KV-starved", "warn", "; ".join(map(str, memory.get("notes") or [])) or "the KV pool holds "
                      "fewer users of this size"))
    if entry.get("noisy"):
        marks.append(("noisy", "warn", f"run-to-run spread {fmt(entry.get('spread_pct'))} % over "
                                       f"{fmt(entry.get('spread_max_pct'))} %"))
    return marks


def entry_table(gate: str, entries: Mapping[str, Any], bounds: Mapping[str, Any], comps: Comps) -> str:
    """The gate's table with the terminal's columns and values (results/columns.py: a curve row's
    `prefix` own or shared, its `flags` "ok" or what they say), each row's marks beside its key."""
    entries = with_derived(gate, entries)
    header, _ = gate_table(gate, entries)
    cols = header[1:]
    ths = [th("key")]
    for c in cols:
        unit = unit_of(gate, c)
        ths.append(th(c, unit, metric_doc(gate, c)))
    rows, classes = [], []
    # one number format per column, as the terminal's (pytest_glmf.text.same_number_format): 4,574 beside 40,256
    shown = {c: same_number_format([[fmt(e.get(c))] for e in entries.values() if isinstance(e, Mapping)])
             for c in cols}
    for i, (key, entry) in enumerate((k, e) for k, e in entries.items() if isinstance(e, Mapping)):
        marks = row_marks(entry)
        key_cell = (f"<td>{escape(str(key))}"
                    + "".join(f' <span title="{escape(why)}">{tag(label, kind)}</span>' for label, kind, why in marks)
                    + "</td>")
        cells = [key_cell]
        for c in cols:
            value = entry.get(c)
            if is_number(value):
                bound = bound_of(gate, bounds, str(key), entry, c)
                cls, change = comps.get((gate, str(key), c), ("", ""))
                miss = _misses(value, bound)
                note = " ".join(x for x in (_bound_text(bound), change) if x)
                cells.append(td(shown[c][i][0], " ".join(x for x in ("num", "miss" if miss else cls) if x), note,
                                "misses its bound" if miss else change))
            else:
                cells.append(td(cell(value) if value is not None else "-"))
        rows.append(cells)
        classes.append("marked" if any(kind == "bad" for _, kind, _ in marks) else "")
    return table(ths, rows, row_classes=classes, raw=True)


def _notes(entries: Mapping[str, Any]) -> str:
    """The why of each marked row, spelled out once under the table."""
    lines = []
    for key, entry in entries.items():
        if isinstance(entry, Mapping):
            for label, kind, why in row_marks(entry):
                if why and kind in ("bad", "warn"):
                    lines.append(f"{key}: {label}: {why}")
    return definitions(lines)


# ---------------------------------------------------------------------------- the charts


def _by_users(entries: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    rows = [(k, v) for k, v in entries.items() if isinstance(v, Mapping) and is_number(v.get("users"))]
    return sorted(rows, key=lambda kv: kv[1]["users"])


def _spread(entry: Mapping[str, Any], metric: str) -> float | None:

    return spread_of(entry, metric)


def _mark(entry: Mapping[str, Any]) -> str:
    return "; ".join(label for label, kind, _ in row_marks(entry) if kind in ("bad", "warn"))


SHARED_PREFIX = "prefix shared (not comparable)"       # the series' name; its points say why
SHARED_WHY = "every user sent the same prompt, which a prefix cache computes once: not comparable with own prompts"


def _shared_prefix(entry: Mapping[str, Any]) -> bool:
    memory = entry.get("memory")
    return bool(entry.get("shared_prefix")) or (isinstance(memory, Mapping) and (memory.get("shared_tokens") or 0) > 0)


def curve_charts(entries: Mapping[str, Any], bounds: Mapping[str, Any]) -> list[str]:
    """Per-user tok/s, aggregate tok/s and TTFT against users, as the PNG draws them
    (results/plotting.py): rows whose users shared a prompt prefix hollow, in a series of their own
    that no line joins to the rows of users' own prompts."""
    rows = _by_users(entries)
    out = []
    for metrics, label in ((("per_user_tok_s",), "per-user tok/s"), (("aggregate_tok_s",), "aggregate tok/s"),
                           (("ttft_p50_s", "ttft_p95_s"), "TTFT (s)")):
        series = []
        for metric in metrics:
            color = svg.COLORS[metrics.index(metric)]     # a metric's own and shared-prefix points alike
            own, shared = [], []
            for key, e in rows:
                if is_number(e.get(metric)):
                    lo, hi = svg.spread_bar(e[metric], _spread(e, metric))
                    if _shared_prefix(e):
                        why = "; ".join(x for x in (SHARED_WHY, _mark(e)) if x)
                        shared.append(svg.Point(e["users"], e[metric], lo, hi, why, key))
                    else:
                        own.append(svg.Point(e["users"], e[metric], lo, hi, _mark(e), key))
            if own:
                series.append(svg.Series(metric, own, color=color))
            if shared:
                series.append(svg.Series(f"{metric}, {SHARED_PREFIX}", shared, color=color, joined=False))
            for side in ("min", "max"):
                bpts = [svg.Point(e["users"], bound_of("curve", bounds, k, e, metric)[side]) for k, e in rows
                        if side in bound_of("curve", bounds, k, e, metric)]
                if bpts:
                    series.append(svg.Series(f"{metric} {side} (thresholds)", bpts, dashed=True,
                                             color="#b3261e"))
        if series:
            out.append(svg.line_chart(svg.Chart(f"{label} against users", label, "concurrent users", series,
                                                marked_legend="hollow: not a measurement of its users")))
    return out


def capacity_charts(entries: Mapping[str, Any]) -> list[str]:
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


# ---------------------------------------------------------------------------- the section


def gate_section(gate: str, entries: Mapping[str, Any], bounds: Mapping[str, Any], comps: Comps) -> str:
    entries = {k: v for k, v in (entries or {}).items() if isinstance(v, Mapping)}
    if gate == "boot" and isinstance(entries.get("facts"), Mapping):
        body = boot_body(entries, bounds, comps)
    else:
        figs: list[str] = []
        if gate == "curve":
            figs = curve_charts(entries, bounds)
        elif gate == "capacity":
            figs = capacity_charts(entries)
        elif gate == "drift":
            figs = drift_charts(entries, bounds)
        elif gate == "acceptance":
            figs = acceptance_charts(entries, bounds)
        units = {str(e.get("units")) for e in entries.values() if e.get("units") and e.get("units") != "measured"}
        scale = (f"<p class=\"sub\">Numbers in {escape(', '.join(sorted(units)))} (the simulator's time scale "
                 "undone).</p>") if units else ""
        shared = shared_prefix_note(entries) if gate == "curve" else None
        body = (scale + entry_table(gate, entries, bounds, comps) + _notes(entries)
                + (f"<p>{escape(shared)}</p>" if shared else "") + charts(figs))
    spec = GATES.get(gate)
    return section(f"gate-{gate}", gate_title(gate), body + definitions(spec.definitions if spec else ()))


BOOT_FACTS = [("seats (max_running_requests)", "max_running_requests"),
              ("requested seats", "requested_max_running_requests"), ("why capped", "cap_reason"),
              ("max_mamba_cache_size", "max_mamba_cache_size"), ("state slots per request", "state_slots_per_request"),
              ("KV pool tokens", "kv_tokens"), ("KV cache GiB", "kv_cache_memory_gib"), ("context", "context_len"),
              ("KV pool layout", "kv_pool_layout"), ("max concurrency", "max_concurrency"), ("ready", "ready")]


def concurrency_words(value: Any, seats: Any) -> str:
    """vLLM's maximum concurrency ({tokens_per_request, factor}) in words, as the terminal's boot
    table says it: "151.98x at 4,096 tokens per request"."""
    if not (isinstance(value, Mapping) and is_number(value.get("factor")) and is_number(value.get("tokens_per_request"))):
        return cell(value)
    short = (f" (fewer full-length requests than the {seats:,} seats)"
             if is_number(seats) and value["factor"] < seats else "")
    return f"{value['factor']:g}x at {value['tokens_per_request']:,} tokens per request{short}"


def boot_body(entries: Mapping[str, Any], bounds: Mapping[str, Any], comps: Comps) -> str:
    facts = entries["facts"]
    rows = []
    for label, key in BOOT_FACTS:
        value = facts.get(key)
        if value is None:
            continue
        bound = bound_of("boot", bounds, "facts", facts, key)
        cls, change = comps.get(("boot", "facts", key), ("", ""))
        miss = _misses(value, bound)
        source = (facts.get("sources") or {}).get(key)
        said = f"({source})" if source and source != "boot log" else ""
        note = " ".join(x for x in (said, _bound_text(bound), change) if x)
        shown = concurrency_words(value, facts.get("max_running_requests")) if key == "max_concurrency" else fmt(value)
        rows.append([td(label, tip=metric_doc("boot", key)),
                     td(shown, ("num " + ("miss" if miss else cls)).strip() if is_number(value) else "", note)])
    # sizes in GiB, as the terminal's boot table (SGLang prints "GB" for GiB; vLLM prints GiB)
    for pool in facts.get("kv_pools") or []:
        if isinstance(pool, Mapping):
            size = f", {fmt(pool.get('size_gb'))} GiB" if pool.get("size_gb") is not None else ""
            rows.append([td("KV pool"), td(f"{fmt(pool.get('tokens'))} tokens, {pool.get('dtype')}{size}")])
    pool = entries.get("state_pool")
    if isinstance(pool, Mapping) and pool.get("gb_per_seat") is not None:
        rows.append([td("state pool GiB"), td(fmt(pool.get("total_gb")), "num")])
        rows.append([td("state pool GiB per seat"), td(fmt(pool.get("gb_per_seat")), "num")])
    for problem in facts.get("problems") or []:
        rows.append([td("problem"), td(str(problem), "miss")])
    want = bounds.get("kv_pool_dtypes") if bounds else None
    if want:
        rows.append([td("KV pool dtypes wanted"), td(", ".join(map(str, want)))])
    return table([th("fact"), th("value")], rows, raw=True)
