"""Rendering only: one self-contained HTML page for a result file (`glmf report RESULT --html
OUT.html`, and `<results>/<lane>-latest.html` with --glmf-html).

The page opens anywhere, offline: inline CSS, charts as inline SVG (results/svg.py), no script, and
a Content-Security-Policy that forbids the browser to fetch anything at all. It is built from the
same data as the terminal and Markdown reports (results/columns.py: the gates' columns;
results/baseline.py: the comparisons) and in the words of each gate's declaration (gates/<gate>/spec.py: title, definitions,
each metric's unit and meaning), in this order: the verdict and the failed tests' tables, the lane
and its provenance, one section per gate that ran, the comparison with the baseline, the failure
ledger. results/html_pages.py renders a comparison of lanes and the run history the same way.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from pytest_glmf.config.thresholds import load_thresholds
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.engine.serverconfig import ServerConfig
from pytest_glmf.engine.surface import surface_changes
from pytest_glmf.gates.registry import GATES
from pytest_glmf.results import ledger
from pytest_glmf.results.baseline import baseline_label, compare_results, comparison_summary, machine_differences
from pytest_glmf.results.cost import cost_lines
from pytest_glmf.results.html_blocks import (
    definitions,
    ordered_gates,
    page,
    section,
    table,
    tag,
    td,
    write_page,
)
from pytest_glmf.results.html_gates import baseline_cells, gate_section
from pytest_glmf.text import fmt

# ---------------------------------------------------------------------------- the session's page


def lane_of(doc: Mapping[str, Any]) -> str:
    prov = doc.get("provenance") or {}
    return str((doc.get("lane") or {}).get("name") or prov.get("lane") or "?")


def verdict_of(doc: Mapping[str, Any]) -> str:
    """passed, failed or incomplete: what the session's exit status and `incomplete` say (unknown:
    a file that says neither, written before results carried the exit status)."""
    if doc.get("incomplete"):
        return "incomplete"
    status = doc.get("exitstatus")
    if status is None:
        return "failed" if doc.get("failed_tests") else "unknown"
    return "passed" if status == 0 else "failed"


def session_report(doc: Mapping[str, Any], *, baseline: Mapping[str, Any] | None = None,
                   bounds: Mapping[str, Mapping[str, Any]] | None = None,
                   ledger_lines: Sequence[str] = ()) -> str:
    """The page for one result document. `bounds`: the lane's thresholds sections by gate (for the
    bound marks and lines); `ledger_lines`: the failure ledger's lines of this session."""
    lane = lane_of(doc)
    comps = baseline_cells(doc, baseline) if baseline is not None else {}
    started = (doc.get("provenance") or {}).get("started_at")
    parts = [f"<h1>pytest-glmf: lane {escape(lane)}</h1>",
             f'<p class="sub">session {escape(str(doc.get("session_id", "?")))}'
             + (f", started {escape(str(started))}" if started else "") + "</p>",
             verdict_block(doc), provenance_section(doc, baseline)]
    gates = doc.get("gates") or {}
    for gate in ordered_gates(gates):
        parts.append(gate_section(gate, gates[gate], (bounds or {}).get(gate) or {}, comps))
    if baseline is not None:
        parts.append(baseline_section(doc, baseline))
    parts.append(ledger_section(ledger_lines))
    return page(f"pytest-glmf {lane} {verdict_of(doc)}", "\n".join(parts))


def incomplete_reasons(doc: Mapping[str, Any]) -> list[str]:
    """Why the run did not reach its end: a session's list, or a gate command's one reason."""
    why = doc.get("incomplete")
    if not why:
        return []
    return [str(w) for w in why] if isinstance(why, (list, tuple)) else [str(why)]


def unverified_gates(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(gate, why) of each gate the session ran that verified nothing (the result file's
    `verified`, as plugin/verified.py writes it and the terminal's "NOT verified" lines say)."""
    verified = doc.get("verified")
    if not isinstance(verified, Mapping):
        return []
    return [(str(gate), str(d.get("why_not") or "no check evaluated")) for gate, d in verified.items()
            if isinstance(d, Mapping) and not d.get("checks")]


def verdict_block(doc: Mapping[str, Any]) -> str:
    """The verdict and, beside it, what it does not cover: the gates that verified nothing (each
    with why) and why the run is incomplete; then each failed test with its table."""
    word = verdict_of(doc)
    failed = [f for f in doc.get("failed_tests") or [] if isinstance(f, Mapping)]
    lines = []
    if doc.get("exitstatus") is not None:
        lines.append(f"pytest exit status {doc['exitstatus']}")
    if failed:
        lines.append(f"{len(failed)} failed test(s)")
    inner = [f'<div class="word">{word}</div><div>{escape("; ".join(lines))}</div>']
    why_incomplete = incomplete_reasons(doc)
    if why_incomplete:
        inner.append('<div class="incomplete-banner"><b>INCOMPLETE: the run did not reach its end; what is below '
                     "is part of it.</b>" + definitions(why_incomplete) + "</div>")
    unverified = unverified_gates(doc)
    if unverified:
        n = len(unverified)
        head = f"{n} gate{'s' if n > 1 else ''} verified nothing"
        head = f"{word.upper()}, but {head}" if word == "passed" else head
        inner.append(f'<div class="unverified"><b>{escape(head)}:</b><ul>'
                     + "".join(f"<li><b>{escape(g)}</b>: {escape(why)}</li>" for g, why in unverified)
                     + "</ul></div>")
    done = [f"{gate} ({fmt(d.get('checks'))} checks)" for gate, d in (doc.get("verified") or {}).items()
            if isinstance(d, Mapping) and d.get("checks")]
    if done:
        inner.append(f'<p class="verified">verified: {escape(", ".join(done))}</p>')
    inner.extend(f'<p class="cost">{escape(line)}</p>' for line in cost_lines(doc.get("cost")))   # results/cost.py
    for f in failed:
        cause = f.get("cause_class")
        inner.append(f'<div class="failure"><b>{escape(str(f.get("test", "?")))}</b> '
                     + (tag(str(cause), "bad") if cause else "")
                     + f"<pre>{escape(str(f.get('message') or ''))}</pre></div>")
    if word == "failed" and not failed:
        inner.append("<p>The result file names no failed test (written before pytest-glmf recorded them): "
                     "the failure ledger below has one line per failure.</p>")
    return section("verdict", "Verdict", f'<div class="verdict {word}">{"".join(inner)}</div>')


PROVENANCE_ROWS = [("lane", "lane"), ("launcher", "launcher"), ("image", "image"), ("image digest", "image_digest"),
                   ("engine", "engine"), ("engine version", "engine_version"), ("model", "model"),
                   ("model revision", "model_revision"), ("model bytes", "model_bytes"), ("GPU", "gpu_name"),
                   ("GPU count", "gpu_count"), ("GPU driver", "gpu_driver"), ("simulator time scale", "time_scale"),
                   ("pytest-glmf", "plugin_version"), ("git commit", "git_commit"), ("started", "started_at")]


def provenance_section(doc: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> str:
    prov = doc.get("provenance") or {}
    lane = doc.get("lane") or {}
    identity = prov.get("engine_identity") or {}
    facts = {**{k: lane.get(k) for k in ("name", "launcher", "image", "engine") if lane.get(k)}, **prov}
    facts.setdefault("lane", lane.get("name"))
    facts.setdefault("engine_version", identity.get("version"))
    facts.setdefault("engine", identity.get("declared"))
    rows = [[label, fmt(facts.get(key))] for label, key in PROVENANCE_ROWS if facts.get(key) not in (None, "")]
    argv = prov.get("argv") or lane.get("extra")
    if argv:
        rows.append(["flags", " ".join(str(a) for a in argv)])
    says = _server_says(prov)
    if says:
        rows.append(["the server says", says])
    if doc.get("compared_with"):
        rows.append(["compared with", _compared(doc["compared_with"])])
    if baseline is not None and not doc.get("compared_with"):

        rows.append(["baseline", baseline_label(baseline)])
    return section("provenance", "Lane and provenance", table([], rows))


def _server_says(prov: Mapping[str, Any]) -> str:
    if not isinstance(prov.get("server_config"), Mapping):
        return ""

    told = ServerConfig.from_dict(prov["server_config"])
    return told.summary() if told.told else ""


def _compared(value: Any) -> str:
    if isinstance(value, Mapping):
        label = value.get("label") or value.get("file") or ""
        runs = value.get("runs") or []
        return str(label) + (f" ({len(runs)} stored runs)" if runs else "")
    return str(value)


def baseline_section(doc: Mapping[str, Any], baseline: Mapping[str, Any]) -> str:

    parts = [f"<p>Baseline: {escape(baseline_label(baseline))}. A change is coloured only where it exceeds the "
             "allowed change: the larger of the gate's tolerance and the run-to-run spread of either run.</p>"]
    diffs = machine_differences(doc, baseline)
    if diffs:
        parts.append("<p><b>Warning:</b> the baseline comes from a different setup; changes may not be "
                     "regressions:</p>" + definitions(diffs))
    changed = surface_changes((doc.get("provenance") or {}).get("served_surface"),
                              (baseline.get("provenance") or {}).get("served_surface"))
    if changed:
        parts.append("<p>The engine's served surface changed since the baseline (not a failure by itself):</p>"
                     + definitions(changed))
    comps = compare_results(doc, baseline)
    cells = baseline_cells(doc, baseline)
    rows = []
    for c in comps:
        cls = cells[(c.gate, c.key, c.metric)][0]
        r = c.row()
        rows.append([td(r[0]), td(r[1], "num"), td(r[2], "num"), td(r[3], f"num {cls}".strip()), td(r[4])])
    parts.append(f"<p>{escape(comparison_summary(comps))}.</p>")
    if rows:
        parts.append(table(["metric", "baseline", "now", "change", "allowed"], rows, raw=True))
    return section("baseline", "Against the baseline", "".join(parts))


def ledger_section(lines: Sequence[str]) -> str:
    if not lines:
        inner = "<p>No failure was written to the failure ledger during this session.</p>"
    else:
        inner = '<ul class="ledger">' + "".join(f"<li>{escape(ln[2:] if ln.startswith('- ') else ln)}</li>"
                                                for ln in lines) + "</ul>"
    return section("ledger", "Failure ledger", inner)


def write_report_page(doc: Mapping[str, Any], out: str | Path, *, baseline: Mapping[str, Any] | None = None,
                      result_path: str | Path | None = None, thresholds: str | Path | None = None) -> Path:
    """`glmf report RESULT --html OUT`: the page, with the bounds of `thresholds` (a file) and the
    ledger lines beside the result file. ValueError naming the thresholds file when it is bad."""
    bounds = {}
    if thresholds is not None:

        try:
            bounds = lane_bounds(load_thresholds(thresholds), lane_of(doc))
        except (ConfigError, OSError) as exc:
            raise ValueError(f"--thresholds {thresholds}: {exc}") from None
    ledger = session_ledger(doc, Path(result_path).parent) if result_path is not None else []
    return write_page(session_report(doc, baseline=baseline, bounds=bounds, ledger_lines=ledger), out)


def lane_bounds(thresholds: Any, lane: str) -> dict[str, dict[str, Any]]:
    """The lane's section of each gate in a thresholds file (config/thresholds.Thresholds, or None)."""
    if thresholds is None:
        return {}
    return {gate: thresholds.for_gate(lane, gate) for gate in GATES}


def session_ledger(doc: Mapping[str, Any], results_dir: Path) -> list[str]:
    """The ledger lines of this session: its lane's lines written at or after its start (the
    ledger beside the result file; none when there is no ledger there)."""

    started = str((doc.get("provenance") or {}).get("started_at") or "")
    since = started.replace("T", " ").replace("+00:00", "Z")[:19]
    lane = lane_of(doc)
    out = []
    for line in ledger.read(results_dir):
        fields = line[2:].split(" | ")
        if len(fields) > 2 and fields[1] == f"lane {lane}" and (not since or fields[0][:19] >= since):
            out.append(line)
    return out
