"""Rendering only: one self-contained HTML page for a result file (`glmf report RESULT --html
OUT.html`, and `<results>/<lane>-latest.html` with --glmf-html).

The page opens anywhere, offline: inline CSS, charts as inline SVG (results/svg.py), no script, and
a Content-Security-Policy that forbids the browser to fetch anything at all. It is built from the
same data as the terminal and Markdown reports (results/report.py: the gates' columns, baseline
comparisons) and in the words of each gate's declaration (gates/<gate>/spec.py: title, definitions,
each metric's unit and meaning), in this order: the verdict and the failed tests' tables, the lane
and its provenance, one section per gate that ran, the comparison with the baseline, the failure
ledger. results/html_pages.py renders a comparison of lanes and the run history the same way.
"""
from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from pytest_glmf.gates.registry import GATES
from pytest_glmf.gates.verdict import fmt

# The browser may load nothing: no network, no other file; inline styles and data: images only.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
# Gates in the order a reader asks about them; gates not listed follow in the order recorded.
GATE_ORDER = ("boot", "curve", "capacity", "drift", "acceptance", "tools", "template", "agents")

CSS = """
:root{--fg:#1b1f23;--mute:#5b636b;--line:#d6dadf;--bg:#fff;--soft:#f5f7f9;--ok:#1e7a34;--bad:#b3261e;
--warn:#8a5a00;--okbg:#e6f4ea;--badbg:#fce8e6;--warnbg:#fff4d6}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1100px;padding:16px 20px 40px;font:15px/1.45 system-ui,-apple-system,"Segoe UI",
Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:1.45em;margin:.2em 0 .1em}h2{font-size:1.2em;margin:1.6em 0 .5em;padding-bottom:.2em;
border-bottom:1px solid var(--line)}h3{font-size:1.02em;margin:1.1em 0 .4em}
.sub{color:var(--mute);margin:0 0 1em}
.verdict{border-radius:8px;padding:12px 16px;margin:12px 0;border:1px solid}
.verdict.passed{background:var(--okbg);border-color:#9fd3ad}.verdict.failed{background:var(--badbg);
border-color:#f1aaa4}.verdict.incomplete,.verdict.unknown{background:var(--warnbg);border-color:#f0cf7f}
.verdict .word{font-size:1.5em;font-weight:700;text-transform:uppercase;letter-spacing:.04em}
.passed .word{color:var(--ok)}.failed .word{color:var(--bad)}.incomplete .word,.unknown .word{color:var(--warn)}
.kpis{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}.kpi{background:var(--soft);border:1px solid var(--line);
border-radius:6px;padding:6px 10px;min-width:120px}.kpi b{display:block;font-size:1.15em}.kpi span{color:var(--mute);
font-size:.82em}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;margin:6px 0}
table{border-collapse:collapse;font-size:.88em;font-variant-numeric:tabular-nums}
th,td{border:1px solid var(--line);padding:4px 7px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}th small,td small{display:block;color:var(--mute);font-weight:400}
td.num{text-align:right;white-space:nowrap}
tr.marked td{background:#fbfbf3;color:#555}
tr td.miss{background:var(--badbg);color:var(--bad);font-weight:600}tr td.worse{background:var(--badbg);
color:var(--bad)}tr td.better{background:var(--okbg);color:var(--ok)}
.tag{display:inline-block;border-radius:4px;padding:0 5px;font-size:.78em;margin:1px 2px;border:1px solid}
.tag.bad{color:var(--bad);border-color:#f1aaa4;background:var(--badbg)}.tag.warn{color:var(--warn);
border-color:#f0cf7f;background:var(--warnbg)}.tag.info{color:#1f4f7a;border-color:#b7d2ea;background:#eef5fb}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:8px 10px;overflow-x:auto;
font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre}
.failure{border-left:4px solid var(--bad);padding-left:10px;margin:10px 0}
dl.defs{font-size:.86em;color:var(--mute);margin:.4em 0}dl.defs dt{font-weight:600;color:var(--fg);float:left;
margin-right:.4em}dl.defs dd{margin:0 0 .2em}
ul.defs{font-size:.86em;color:var(--mute);padding-left:1.2em;margin:.4em 0}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(440px,1fr));gap:10px 18px}
figure{margin:0}svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:#e8ebee}svg .axis{stroke:#8b949e}svg .tick{font-size:11px;fill:#5b636b}
svg .al{font-size:12px;fill:#30363d}svg .ct{font-size:13px;font-weight:600;fill:#1b1f23}
svg .bound{stroke:var(--bad);stroke-dasharray:5 4;stroke-width:1.3}svg .bl{font-size:11px;fill:var(--bad)}
p.legend{font-size:.8em;color:var(--mute);margin:2px 0 8px}p.legend span{margin-right:12px;white-space:nowrap}
p.legend i{display:inline-block;width:18px;height:0;vertical-align:middle;margin-right:4px}
p.legend i.hollow{width:9px;height:9px;border:2px solid #5b636b;border-radius:50%}
p.legend i.boundkey{border-top:2px dashed var(--bad)}
.ledger li{font-size:.86em;margin:.3em 0;word-break:break-word}
footer{margin-top:2.5em;color:var(--mute);font-size:.8em}
@media (max-width:640px){body{padding:10px;font-size:14px}h1{font-size:1.2em}.kpi{min-width:0;flex:1 1 40%}
th,td{padding:3px 5px}.charts{grid-template-columns:1fr}}
@media print{body{max-width:none;padding:0;font-size:10.5pt}.scroll{overflow:visible}pre{white-space:pre-wrap}
section,figure,table{break-inside:avoid-page}h2{break-after:avoid-page}a{color:inherit}
.verdict,td.miss,td.worse,td.better,tr.marked td{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
"""


# ---------------------------------------------------------------------------- building blocks


def page(title: str, body: str) -> str:
    """The whole document around `body`."""
    made = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="generator" content="pytest-glmf"><title>{escape(title)}</title>'
            f"<style>{CSS}</style></head>\n<body>\n{body}\n"
            f"<footer>pytest-glmf report, written {made}. One file: it loads nothing else.</footer>\n"
            "</body></html>\n")


def section(ident: str, title: str, inner: str) -> str:
    return f'<section id="{escape(ident)}"><h2>{escape(title)}</h2>\n{inner}\n</section>\n'


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, row_classes: Sequence[str] | None = None,
          raw: bool = False) -> str:
    """A table; cells are text (escaped) unless `raw` (then they are HTML already: `td(...)`)."""
    head = "".join(h if raw and h.startswith("<th") else f"<th>{escape(h)}</th>" for h in header)
    body = []
    for i, r in enumerate(rows):
        cls = (row_classes or [])[i] if row_classes and i < len(row_classes) else ""
        cells = "".join(c if raw else f"<td>{escape(c)}</td>" for c in r)
        body.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def td(text: str, cls: str = "", note: str = "", tip: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (f' title="{escape(tip)}"' if tip else "")
    small = f"<small>{escape(note)}</small>" if note else ""
    return f"<td{attrs}>{escape(text)}{small}</td>"


def th(text: str, note: str = "", tip: str = "") -> str:
    title = f' title="{escape(tip)}"' if tip else ""
    return f"<th{title}>{escape(text)}" + (f"<small>{escape(note)}</small>" if note else "") + "</th>"


def definitions(lines: Iterable[str]) -> str:
    items = "".join(f"<li>{escape(d)}</li>" for d in lines)
    return f'<ul class="defs">{items}</ul>' if items else ""


def charts(svgs: Iterable[str]) -> str:
    figs = "".join(f"<figure>{s}</figure>" for s in svgs if s)
    return f'<div class="charts">{figs}</div>' if figs else ""


def tag(text: str, kind: str = "info") -> str:
    return f'<span class="tag {kind}">{escape(text)}</span>'


def write_page(text: str, out: str | Path) -> Path:
    from pytest_glmf.results.recorder import write_atomic

    path = Path(out)
    write_atomic(path, text)
    return path


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def unit_of(gate: str, metric: str) -> str:
    spec = GATES.get(gate)
    m = spec.metrics.get(metric) if spec is not None else None
    return m.unit if m is not None else ""


def metric_doc(gate: str, metric: str) -> str:
    spec = GATES.get(gate)
    m = spec.metrics.get(metric) if spec is not None else None
    return m.doc if m is not None else ""


def gate_title(gate: str) -> str:
    spec = GATES.get(gate)
    return spec.title if spec is not None else gate


def ordered_gates(gates: Mapping[str, Any]) -> list[str]:
    return [g for g in GATE_ORDER if gates.get(g)] + [g for g in gates if g not in GATE_ORDER and gates.get(g)]


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
    from pytest_glmf.results.html_gates import baseline_cells, gate_section

    lane = lane_of(doc)
    comps = baseline_cells(doc, baseline) if baseline is not None else {}
    parts = [f"<h1>pytest-glmf: lane {escape(lane)}</h1>",
             f'<p class="sub">session {escape(str(doc.get("session_id", "?")))}'
             f'{", started " + escape(str((doc.get("provenance") or {}).get("started_at"))) if (doc.get("provenance") or {}).get("started_at") else ""}</p>',
             verdict_block(doc), provenance_section(doc, baseline)]
    gates = doc.get("gates") or {}
    for gate in ordered_gates(gates):
        parts.append(gate_section(gate, gates[gate], (bounds or {}).get(gate) or {}, comps))
    if baseline is not None:
        parts.append(baseline_section(doc, baseline))
    parts.append(ledger_section(ledger_lines))
    return page(f"pytest-glmf {lane} {verdict_of(doc)}", "\n".join(parts))


def verdict_block(doc: Mapping[str, Any]) -> str:
    word = verdict_of(doc)
    failed = [f for f in doc.get("failed_tests") or [] if isinstance(f, Mapping)]
    lines = []
    if doc.get("exitstatus") is not None:
        lines.append(f"pytest exit status {doc['exitstatus']}")
    if failed:
        lines.append(f"{len(failed)} failed test(s)")
    inner = [f'<div class="word">{word}</div><div>{escape("; ".join(lines))}</div>']
    for why in doc.get("incomplete") or []:
        inner.append(f"<p><b>incomplete:</b> {escape(str(why))}</p>")
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
        from pytest_glmf.results.baseline import baseline_label

        rows.append(["baseline", baseline_label(baseline)])
    inner = table(["", ""], rows).replace("<thead><tr><th></th><th></th></tr></thead>", "")
    return section("provenance", "Lane and provenance", inner)


def _server_says(prov: Mapping[str, Any]) -> str:
    if not isinstance(prov.get("server_config"), Mapping):
        return ""
    from pytest_glmf.engine.serverconfig import ServerConfig

    told = ServerConfig.from_dict(prov["server_config"])
    return told.summary() if told.told else ""


def _compared(value: Any) -> str:
    if isinstance(value, Mapping):
        label = value.get("label") or value.get("file") or ""
        runs = value.get("runs") or []
        return str(label) + (f" ({len(runs)} stored runs)" if runs else "")
    return str(value)


def baseline_section(doc: Mapping[str, Any], baseline: Mapping[str, Any]) -> str:
    from pytest_glmf.results.baseline import baseline_label, compare_results, machine_differences
    from pytest_glmf.results.report import surface_lines

    parts = [f"<p>Baseline: {escape(baseline_label(baseline))}. A change is coloured only where it exceeds the "
             "allowed change: the larger of the gate's tolerance and the run-to-run spread of either run.</p>"]
    diffs = machine_differences(doc, baseline)
    if diffs:
        parts.append("<p><b>Warning:</b> the baseline comes from a different setup; changes may not be "
                     "regressions:</p>" + definitions(diffs))
    changed = surface_lines(doc, baseline)
    if changed:
        parts.append("<p>The engine's served surface changed since the baseline (not a failure by itself):</p>"
                     + definitions(changed))
    comps = compare_results(doc, baseline)
    rows, classes = [], []
    for c in comps:
        worse = c.regressed
        better = not worse and c.worse_by is not None and -c.worse_by > c.allowed + 1e-12
        cls = "worse" if worse else "better" if better else ""
        r = c.row()
        rows.append([td(r[0]), td(r[1], "num"), td(r[2], "num"), td(r[3], f"num {cls}".strip()), td(r[4])])
        classes.append("")
    bad = sum(1 for c in comps if c.regressed)
    parts.append(f"<p>{bad} regression(s) in {len(comps)} compared metrics.</p>")
    if rows:
        parts.append(table(["metric", "baseline", "now", "change", "allowed"], rows, raw=True))
    return section("baseline", "Against the baseline", "".join(parts))


def ledger_section(lines: Sequence[str]) -> str:
    if not lines:
        inner = "<p>No failure was written to the failure ledger during this session.</p>"
    else:
        inner = '<ul class="ledger">' + "".join(f"<li>{escape(ln[2:] if ln.startswith('- ') else ln)}</li>"
                                                for ln in lines) + "</ul>"
    return section("ledger", "Failure ledger", inner
                   + "<p class=\"sub\">when | lane | what | cause class | image | flags | why</p>")


def write_report_page(doc: Mapping[str, Any], out: str | Path, *, baseline: Mapping[str, Any] | None = None,
                      result_path: str | Path | None = None, thresholds: str | Path | None = None) -> Path:
    """`glmf report RESULT --html OUT`: the page, with the bounds of `thresholds` (a file) and the
    ledger lines beside the result file. ValueError naming the thresholds file when it is bad."""
    bounds = {}
    if thresholds is not None:
        from pytest_glmf.config.thresholds import load_thresholds
        from pytest_glmf.config.yamlfile import ConfigError

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
    from pytest_glmf.results import ledger

    started = str((doc.get("provenance") or {}).get("started_at") or "")
    since = started.replace("T", " ").replace("+00:00", "Z")[:19]
    lane = lane_of(doc)
    out = []
    for line in ledger.read(results_dir):
        fields = line[2:].split(" | ")
        if len(fields) > 2 and fields[1] == f"lane {lane}" and (not since or fields[0][:19] >= since):
            out.append(line)
    return out
