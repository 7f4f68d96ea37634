"""Rendering only: result documents -> terminal tables, Markdown for a PR comment, a PNG curve.

Receives plain data (a result file as written by results/recorder.py, optionally a baseline of the same
schema) and never measures. `glmf report RESULT [--baseline B] [--markdown OUT] [--plot OUT.png]`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_glmf.config.thresholds import load_thresholds
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.engine.serverconfig import ServerConfig
from pytest_glmf.engine.surface import surface_changes
from pytest_glmf.gates.registry import GATES, gate_title, report_hooks
from pytest_glmf.results.baseline import (
    BaselineError,
    baseline_label,
    compare_results,
    comparison_summary,
    load_baseline,
    machine_differences,
    numeric_metrics,
    regression_table,
)
from pytest_glmf.results.columns import cell as _cell
from pytest_glmf.results.columns import gate_table, table_notes
from pytest_glmf.results.cost import cost_lines
from pytest_glmf.results.gatejson import NotAGateOutput, as_result_document
from pytest_glmf.results.history import HistoryError, open_store, parse_location, queries
from pytest_glmf.results.history.schema import NotAResultFile
from pytest_glmf.results.html import write_report_page
from pytest_glmf.results.plotting import curve_bounds
from pytest_glmf.results.plotting import plot_curve as draw_curve
from pytest_glmf.text import fit_table, fmt, md_table, render_table, wrap

# Each gate's title and what its numbers mean come from its declaration (gates/<gate>/spec.py), the one
# home of those words; the Markdown prints the definitions under the tables so a reader need not guess.


def terminal_report(doc: Mapping[str, Any], baseline: Mapping[str, Any] | None = None) -> str:
    """The tables of a result document; an incomplete one says so first, with why."""
    lead = incomplete_line(doc)
    parts = ["\n".join(map(wrap, ((lead + "\n" if lead else "") + _headline(doc, incomplete=False)).splitlines()))]
    for gate, entries in (doc.get("gates") or {}).items():
        header, body = gate_table(gate, entries or {})
        if body:
            notes = "".join(f"\n{wrap(note)}" for note in table_notes(gate, entries or {}))
            parts.append(f"{gate_title(gate)}\n{fit_table(header, body)}" + notes)
        recorded = report_hooks(gate).recorded
        if recorded is not None and (said := recorded(entries or {})):   # what `glmf capacity` printed
            parts.append("\n".join(map(wrap, said.splitlines())))
    if lines := cost_lines(doc.get("cost")):
        parts.append("\n".join(map(wrap, lines)))
    if baseline is not None:
        parts.extend(_baseline_section(doc, baseline))
    return "\n\n".join(parts)


def incomplete_line(doc: Mapping[str, Any], lane: str = "") -> str:
    """'INCOMPLETE: why' when the session or command stopped before the end (its `incomplete`), else '';
    'INCOMPLETE LANE: why' naming the lane (a comparison of several)."""
    why = doc.get("incomplete") or []
    return (f"INCOMPLETE{' ' + lane if lane else ''}: " + "; ".join(map(str, why))) if why else ""


def _headline(doc: Mapping[str, Any], incomplete: bool = True) -> str:
    prov = doc.get("provenance") or {}
    lane = (doc.get("lane") or {}).get("name") or prov.get("lane") or "?"
    bits = [f"lane {lane}"]
    for k in ("launcher", "image", "image_digest", "engine", "engine_version", "model_revision", "gpu_name"):
        if prov.get(k):
            bits.append(f"{k} {prov[k]}")
    state = ("\n" + incomplete_line(doc)) if incomplete and doc.get("incomplete") else ""
    says = ""
    if isinstance(prov.get("server_config"), Mapping):   # engine/serverconfig.py, read at launch

        told = ServerConfig.from_dict(prov["server_config"])
        says = f"\nthe server says: {told.summary()}" if told.told else ""
    return "pytest-glmf results: " + ", ".join(bits) + says + state


def surface_lines(doc: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """What changed in the engine since the baseline (engine/surface.py), one line each."""

    return surface_changes((doc.get("provenance") or {}).get("served_surface"),
                           (baseline.get("provenance") or {}).get("served_surface"))


def _baseline_section(doc: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    out = []
    if isinstance(baseline.get("made_of"), Mapping):   # a baseline made of stored runs: say which
        out.append(f"Baseline: {baseline_label(baseline)}")
    if changed := surface_lines(doc, baseline):
        out.append("The engine's served surface changed since the baseline (not a failure by itself):\n  "
                   + "\n  ".join(changed))
    diffs = machine_differences(doc, baseline)
    if diffs:
        out.append("WARNING: the baseline comes from a different setup; changes may not be regressions:\n  "
                   + "\n  ".join(diffs))
    comps = compare_results(doc, baseline)
    if comps:
        bad = [c for c in comps if c.regressed]
        out.append(f"Against the baseline: {comparison_summary(comps)}\n"
                   + regression_table(bad or comps))
    return out


def history_table(doc: Mapping[str, Any], earlier: list[tuple[Any, dict[tuple[str, str, str], float]]]) -> str:
    """This run's numbers beside the last K runs on its lane (oldest first), one row per metric,
    then which run each column is. `earlier` is `queries.runs_beside(...)`."""

    if not earlier:
        return "History: no earlier run stored on this lane, GPU, model revision and engine"
    rows = []
    for gate, entries in (doc.get("gates") or {}).items():
        for key, entry in (entries or {}).items():
            for metric, now in (numeric_metrics(gate, entry) if isinstance(entry, Mapping) else {}).items():
                rows.append([f"{gate}.{metric} [{key}]", *(fmt(v.get((gate, str(key), metric))) for _, v in earlier),
                             fmt(now)])
    header = ["metric", *(f"#{i + 1}" for i in range(len(earlier))), "this run"]
    legend = [f"  #{i + 1}: {r.session_id} {r.started_at.replace('+00:00', 'Z')} {r.verdict} image {r.image or '-'}"
              for i, (r, _) in enumerate(earlier)]
    return (f"History: this run beside the last {len(earlier)} on its lane (oldest first)\n"
            + render_table(rows, header) + "\n" + "\n".join(legend))


def markdown_report(doc: Mapping[str, Any], baseline: Mapping[str, Any] | None = None) -> str:
    out = [f"## {_headline(doc)}"]
    prov = doc.get("provenance") or {}
    if prov:
        rows = [[k, _cell(v)] for k, v in prov.items() if not isinstance(v, dict)]
        out.append("<details><summary>Provenance</summary>\n\n" + md_table(["key", "value"], rows)
                   + "\n\n</details>")
    if baseline is not None:
        if isinstance(baseline.get("made_of"), Mapping):
            out.append(f"Baseline: {baseline_label(baseline)}")
        if changed := surface_lines(doc, baseline):
            out.append("> **The engine's served surface changed since the baseline** (not a failure by itself):\n"
                       + "\n".join(f"> - {c}" for c in changed))
        diffs = machine_differences(doc, baseline)
        if diffs:
            out.append("> **Warning:** the baseline comes from a different setup:\n"
                       + "\n".join(f"> - {d}" for d in diffs))
        comps = compare_results(doc, baseline)
        bad = [c for c in comps if c.regressed]
        if comps:
            out.append(f"### Against the baseline: {comparison_summary(comps)}\n\n"
                       + md_table(["metric", "baseline", "now", "change", "allowed"],
                                   [c.row() for c in (bad or comps)]))
    for gate, entries in (doc.get("gates") or {}).items():
        header, body = gate_table(gate, entries or {})
        if body:
            out.append(f"### {gate_title(gate)}\n\n{md_table(header, body)}")
            out.extend(table_notes(gate, entries or {}))
            if (spec := GATES.get(gate)) is not None and spec.definitions:
                out.append("\n".join(f"- {d}" for d in spec.definitions))
    if lines := cost_lines(doc.get("cost")):
        out.append("\n".join(f"- {line.strip()}" for line in lines))
    return "\n\n".join(out) + "\n"


def curve_rows(doc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    entries = ((doc or {}).get("gates") or {}).get("curve") or {}
    rows = [v for v in entries.values() if isinstance(v, dict) and isinstance(v.get("users"), (int, float))]
    return sorted(rows, key=lambda r: r["users"])


def plot_curve(doc: Mapping[str, Any], out: str | Path, baseline: Mapping[str, Any] | None = None,
               bounds: Mapping[int, Mapping[str, Mapping[str, float]]] | None = None) -> Path:
    """PNG of the run's curve (results/plotting.py: one quantity per axis, spread bars, bounds)."""

    return draw_curve(doc, out, baseline, bounds)


def cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="glmf report", description="Render a pytest-glmf result file.", epilog=(
        "Exit status: 0 when the file was rendered; 1 when it was rendered but is INCOMPLETE (the session or "
        "command stopped before the end: the first line says why); 2 when it cannot be read."))
    ap.add_argument("result", help="result JSON written by a pytest-glmf session, or by a glmf gate command's --json")
    ap.add_argument("--baseline", help="an earlier result file to compare against")
    ap.add_argument("--markdown", metavar="OUT", help="write a Markdown report (for a PR comment)")
    ap.add_argument("--plot", metavar="OUT.png", help="write a PNG of the concurrency curve")
    ap.add_argument("--html", metavar="OUT.html", help="write the report as one self-contained HTML page")
    ap.add_argument("--thresholds", metavar="FILE", help="thresholds file whose bounds for the result's lane the "
                                                         "HTML page marks and the --plot draws (default: none)")
    ap.add_argument("--history", type=int, metavar="K", help="show the last K stored runs on the same lane beside this one")
    ap.add_argument("--store", help="history store for --history (a SQLite file, sqlite:///PATH, postgresql://...; "
                                    "default: $GLMF_HISTORY, else history.sqlite beside RESULT)")
    args = ap.parse_args(argv)
    try:
        doc = as_result_document(json.loads(Path(args.result).read_text()), args.result)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"glmf report: cannot read {args.result}: {exc}", file=sys.stderr)
        return 2
    except NotAGateOutput as exc:
        print(f"glmf report: {exc}", file=sys.stderr)
        return 2
    base = None
    if args.baseline:
        try:
            base = load_baseline(args.baseline, doc.get("schema", 1))
        except BaselineError as exc:
            print(f"glmf report: {exc}", file=sys.stderr)
            return 2
    print(terminal_report(doc, base))
    if args.history:
        text = _history_beside(doc, args.history, args.store, Path(args.result).parent)
        if text is None:
            return 2
        print("\n" + text)
    if args.markdown:
        Path(args.markdown).write_text(markdown_report(doc, base))
        print(f"\nmarkdown written to {args.markdown}")
    if args.plot:
        try:
            plot_curve(doc, args.plot, base, _curve_bounds(doc, args.thresholds))
        except (RuntimeError, ValueError, ConfigError) as exc:
            print(f"glmf report: {exc}", file=sys.stderr)
            return 2
        print(f"plot written to {args.plot}")
    if args.html:

        try:
            write_report_page(doc, args.html, baseline=base, result_path=args.result, thresholds=args.thresholds)
        except (OSError, ValueError) as exc:
            print(f"glmf report: {exc}", file=sys.stderr)
            return 2
        print(f"HTML written to {args.html}")
    return 1 if doc.get("incomplete") else 0


def _curve_bounds(doc: Mapping[str, Any], thresholds: str | None) -> dict[int, Any] | None:
    """The lane's curve bounds from a thresholds file (ConfigError from its loader), None without one."""
    if thresholds is None:
        return None
    lane = str((doc.get("lane") or {}).get("name") or "")
    return curve_bounds(load_thresholds(thresholds).for_gate(lane, "curve"))


def _history_beside(doc: Mapping[str, Any], k: int, store_value: str | None, results_dir: Path) -> str | None:
    """`glmf report --history K`: the table, or None after one line on stderr (store fault)."""

    try:
        location = parse_location(store_value or os.environ.get("GLMF_HISTORY") or None, Path.cwd(), results_dir)
        if location is None:
            raise HistoryError("the history store is off; name one with --store")
        store = open_store(location, create=False)
        if store is None:
            raise HistoryError(f"no history store at {location.display}")
        with store:
            return history_table(doc, queries.runs_beside(store, dict(doc), k))
    except (HistoryError, ValueError, NotAResultFile) as exc:
        print(f"glmf report: {exc}", file=sys.stderr)
        return None
