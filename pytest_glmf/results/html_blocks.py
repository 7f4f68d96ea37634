"""The HTML report's building blocks: the page around a body (inline CSS, a Content-Security-Policy
that lets the browser fetch nothing), sections, tables, cells, and the words of a gate's declaration
(gates/<gate>/spec.py: title, each metric's unit and meaning). results/html.py, html_gates.py and
html_pages.py build their pages from these."""
from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape, unescape
from pathlib import Path
from typing import Any

from pytest_glmf.gates.registry import GATES, report_order
from pytest_glmf.results.recorder import write_atomic

# The browser may load nothing: no network, no other file; inline styles and data: images only.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
# Gates in the order a reader asks about them; gates not listed follow in the order recorded.
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
table{border-collapse:collapse;font-size:.86em;font-variant-numeric:tabular-nums;max-width:100%}
th,td{border:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}
td.brk{overflow-wrap:anywhere}th{background:var(--soft);font-weight:600}th small,td small{display:block;color:var(--mute);
font-weight:400}
td.num{text-align:right;white-space:nowrap}td.num small{white-space:normal}
.verdict .unverified{margin:8px 0 2px;padding:8px 12px;border-radius:6px;background:var(--warnbg);
border:1px solid #f0cf7f;color:#5c3d00}.verdict .unverified b{font-size:1.1em}.verdict .unverified ul{margin:4px 0 0;
padding-left:1.2em}.verdict .incomplete-banner{margin:8px 0 2px;padding:8px 12px;border-radius:6px;
background:var(--warnbg);border:1px solid #f0cf7f}.verdict .verified{font-size:.9em;color:var(--mute);margin:6px 0 0}
tr.marked td{background:#fbfbf3;color:#555}
tr td.miss{background:var(--badbg);color:var(--bad);font-weight:600}tr td.worse{background:var(--badbg);
color:var(--bad)}tr td.better{background:var(--okbg);color:var(--ok)}
.tag{display:inline-block;border-radius:4px;padding:0 5px;font-size:.78em;margin:1px 2px;border:1px solid}
.tag.bad{color:var(--bad);border-color:#f1aaa4;background:var(--badbg)}.tag.warn{color:var(--warn);
border-color:#f0cf7f;background:var(--warnbg)}.tag.info{color:#1f4f7a;border-color:#b7d2ea;background:#eef5fb}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:8px 10px;overflow-x:auto;
font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre}
.failure{border-left:4px solid var(--bad);padding-left:10px;margin:10px 0}.failure b,.sub,.verdict p{overflow-wrap:anywhere}
dl.defs{font-size:.86em;color:var(--mute);margin:.4em 0}dl.defs dt{font-weight:600;color:var(--fg);float:left;
margin-right:.4em}dl.defs dd{margin:0 0 .2em}
ul.defs{font-size:.86em;color:var(--mute);padding-left:1.2em;margin:.4em 0}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(440px,100%),1fr));gap:10px 18px}
figure{margin:0;min-width:0}svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:#e8ebee}svg .axis{stroke:#8b949e}svg .tick{font-size:11px;fill:#5b636b}
svg .al{font-size:12px;fill:#30363d}svg .ct{font-size:13px;font-weight:600;fill:#1b1f23}
svg .bound{stroke:var(--bad);stroke-dasharray:5 4;stroke-width:1.3}svg .bl{font-size:11px;fill:var(--bad)}
p.legend{font-size:.8em;color:var(--mute);margin:2px 0 8px}p.legend span{margin-right:12px;display:inline-block;max-width:100%}
p.legend i{display:inline-block;width:18px;height:0;vertical-align:middle;margin-right:4px}
p.legend i.hollow{width:9px;height:9px;border:2px solid #5b636b;border-radius:50%}
p.legend i.boundkey{border-top:2px dashed var(--bad)}p.legend i.floorkey{border-top:2px dotted #5b636b}
svg .floor{stroke:#5b636b;stroke-dasharray:2 3;stroke-width:1.3}svg .fl{font-size:11px;fill:#5b636b}
.ledger li{font-size:.86em;margin:.3em 0;overflow-wrap:anywhere}
ul.defs li{overflow-wrap:anywhere}
footer{margin-top:2.5em;color:var(--mute);font-size:.8em}
@media (max-width:640px){body{padding:10px;font-size:14px}h1{font-size:1.2em}.kpi{min-width:0;flex:1 1 40%}
th,td{padding:3px 5px}.charts{grid-template-columns:minmax(0,1fr)}}
@media print{body{max-width:none;padding:0;font-size:10.5pt}.scroll{overflow:visible}pre{white-space:pre-wrap}
table{font-size:7.5pt}th,td{padding:2px 4px}
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


# What a table may need, in characters of its narrowest layout (numbers whole, words wrapped), before
# it is split: the page's 1,100 px and a printed page's width (tables in 7.5 pt) both hold it.
TABLE_CHARS = 104


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, row_classes: Sequence[str] | None = None,
          raw: bool = False) -> str:
    """A table; cells are text (escaped) unless `raw` (then they are HTML already: `td(...)`). A
    table too wide for the page (TABLE_CHARS) is printed as two or more, each led by the first
    (key) column, as the terminal's `fit_table` does: no column hides behind a scrollbar, on the
    screen or on paper."""
    heads = [h if raw and h.startswith("<th") else th(h) for h in header]
    body = [[c if raw else td(c) for c in r] for r in rows]
    classes = list(row_classes or [])
    groups = column_groups(heads, body)
    return "".join(_one_table([heads[j] for j in cols if j < len(heads)],
                              [[r[j] for j in cols if j < len(r)] for r in body], classes) for cols in groups)


def _one_table(heads: Sequence[str], body: Sequence[Sequence[str]], classes: Sequence[str]) -> str:
    head = f"<thead><tr>{''.join(heads)}</tr></thead>" if heads else ""   # no header: a list of facts
    rows = []
    for i, r in enumerate(body):
        cls = classes[i] if i < len(classes) else ""
        rows.append(f'<tr class="{cls}">{"".join(r)}</tr>' if cls else f"<tr>{''.join(r)}</tr>")
    return f'<div class="scroll"><table>{head}<tbody>{"".join(rows)}</tbody></table></div>'


def column_groups(heads: Sequence[str], body: Sequence[Sequence[str]], limit: int = TABLE_CHARS) -> list[list[int]]:
    """The columns as tables that fit `limit` characters: each starts with column 0, the others
    follow in order, as many as fit (one group when the whole table fits)."""
    n = max([len(heads), *map(len, body)], default=0)
    widths = [max([_min_chars(heads[j]) if j < len(heads) else 0,
                   *(_min_chars(r[j]) for r in body if j < len(r))]) + 2 for j in range(n)]
    groups: list[list[int]] = [[0]] if n else []
    for j in range(1, n):
        if len(groups[-1]) > 1 and sum(widths[k] for k in groups[-1]) + widths[j] > limit:
            groups.append([0])
        groups[-1].append(j)
    return groups


_TAGS = re.compile(r"<[^>]*>")


def _min_chars(cell: str) -> int:
    """The narrowest a cell (<th> or <td>) lays out, in characters: a number cell's value whole (it
    does not wrap), any other text its longest word (a head breaks at its underscores too; a word
    longer than LONG_WORD may break anywhere)."""
    opening = cell[:cell.find(">") + 1]
    main = cell.split("<small>", 1)[0]
    text = unescape(_TAGS.sub(" ", main))
    if 'class="num' in opening:
        return len(text.strip())
    words = re.split(r"[\s_]+" if opening.startswith("<th") else r"\s+", text)
    return max([min(len(w), LONG_WORD) for w in words if w] or [1])


LONG_WORD = 24      # a word longer than this (a path, a session id) may break anywhere: it never widens a table


def td(text: str, cls: str = "", note: str = "", tip: str = "") -> str:
    if "num" not in cls.split() and max(map(len, text.split()), default=0) > LONG_WORD:
        cls = f"{cls} brk".strip()
    attrs = (f' class="{cls}"' if cls else "") + (f' title="{escape(tip)}"' if tip else "")
    small = f"<small>{escape(note)}</small>" if note else ""
    return f"<td{attrs}>{escape(text)}{small}</td>"


def th(text: str, note: str = "", tip: str = "") -> str:
    """A header cell that may break after its underscores ("per_user_<wbr>tok_s") in a narrow column."""
    title = f' title="{escape(tip)}"' if tip else ""
    head = escape(text).replace("_", "_<wbr>")
    return f"<th{title}>{head}" + (f"<small>{escape(note)}</small>" if note else "") + "</th>"


def definitions(lines: Iterable[str]) -> str:
    items = "".join(f"<li>{escape(d)}</li>" for d in lines)
    return f'<ul class="defs">{items}</ul>' if items else ""


def charts(svgs: Iterable[str]) -> str:
    figs = "".join(f"<figure>{s}</figure>" for s in svgs if s)
    return f'<div class="charts">{figs}</div>' if figs else ""


def tag(text: str, kind: str = "info") -> str:
    return f'<span class="tag {kind}">{escape(text)}</span>'


def write_page(text: str, out: str | Path) -> Path:

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


def ordered_gates(gates: Mapping[str, Any]) -> list[str]:
    order = report_order()
    return [g for g in order if gates.get(g)] + [g for g in gates if g not in order and gates.get(g)]
