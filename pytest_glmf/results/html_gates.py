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

from collections.abc import Mapping
from html import escape
from typing import Any

from pytest_glmf.gates.registry import GATES, gate_title, report_hooks
from pytest_glmf.gates.spec import Comps
from pytest_glmf.results.baseline import compare_results
from pytest_glmf.results.columns import cell, gate_table, table_notes, with_derived
from pytest_glmf.results.html_blocks import (
    charts,
    definitions,
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


def baseline_cells(doc: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[tuple[str, str, str], tuple[str, str]]:
    """Per compared number: "worse" / "better" where the change exceeds the allowed change, else
    "" (within noise or tolerance), and the change as text."""

    out = {}
    for c in compare_results(doc, baseline):
        if not c.compared:      # the new run declared it not measured: no verdict, no colour
            out[(c.gate, c.key, c.metric)] = ("", f"not measured now ({c.unmeasured}): not compared")
            continue
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
    """The thresholds bound ({min, max}) on this entry's metric, {} when none: where the gate keys
    its bounds otherwise (`GateReport.bound`: a curve row by its users, an acceptance class by its
    name), its way, else the section's own bound."""
    if not section_:
        return {}
    bound = report_hooks(gate).bound
    return _bound(bound(section_, key, entry, metric) if bound is not None else section_.get(metric))


def _bound(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) and value and set(value) <= {"min", "max"} else {}


def bound_text(bound: Mapping[str, Any]) -> str:
    return " ".join(f"{'≥' if k == 'min' else '≤'} {fmt(v)}" for k, v in sorted(bound.items(), reverse=True))


def misses(value: Any, bound: Mapping[str, Any]) -> bool:
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
                miss = misses(value, bound)
                note = " ".join(x for x in (bound_text(bound), change) if x)
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


# ---------------------------------------------------------------------------- the section


def gate_section(gate: str, entries: Mapping[str, Any], bounds: Mapping[str, Any], comps: Comps) -> str:
    """The gate's table, the marks' why, its notes, its charts and its definitions; or the body the
    gate writes itself (`GateReport.html_body`: the boot facts)."""
    entries = {k: v for k, v in (entries or {}).items() if isinstance(v, Mapping)}
    hooks = report_hooks(gate)
    body = hooks.html_body(entries, bounds, comps) if hooks.html_body is not None else None
    if body is None:
        figs = hooks.charts(entries, bounds) if hooks.charts is not None else []
        units = {str(e.get("units")) for e in entries.values() if e.get("units") and e.get("units") != "measured"}
        scale = (f"<p class=\"sub\">Numbers in {escape(', '.join(sorted(units)))} (the simulator's time scale "
                 "undone).</p>") if units else ""
        notes = "".join(f"<p>{escape(note)}</p>" for note in table_notes(gate, entries))
        body = scale + entry_table(gate, entries, bounds, comps) + _notes(entries) + notes + charts(figs)
    spec = GATES.get(gate)
    return section(f"gate-{gate}", gate_title(gate), body + definitions(spec.definitions if spec else ()))
