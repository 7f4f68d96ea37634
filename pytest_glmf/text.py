"""Text for people: numbers in one format (`fmt`), tables that fit a terminal's 120 columns
(`render_table`, `fit_table`: long cells become numbered notes under the table), and long lines
folded (`wrap`, `fold`), a text on one line or cut short (`one_line`, `clip`), Markdown tables
(`md_table`): the text of failure messages, the gates' tables, the reports, the failure ledger and
the CLI's progress. It sits at the package's bottom, beside redact.py: the gates, results, launch,
config, compare, the CLI and the plugin import it going down, and it imports nothing of
pytest_glmf (tests/test_layout.py)."""
from __future__ import annotations

import math
import re
import textwrap
from typing import Any


def fmt(x: Any) -> str:
    """A value as the tables write it: "-" for None, an int from 10,000 up with separators, a float to
    three decimals with trailing zeros cut (one from 10 up), three digits ("3.2e-05") below 0.01 and
    from 100,000 up."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10000 else str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if x != 0 and (abs(x) < 0.01 or abs(x) >= 1e5):
            return f"{x:.3g}"
        return f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 10 else f"{x:.1f}"
    return str(x)


def render_table(rows: list[list[str]], header: list[str] | None = None) -> str:
    """Left-aligned pipe table sized to its content (used in failure messages and reports)."""
    all_rows = ([header] if header else []) + rows
    if not all_rows:
        return ""
    widths = [max(len(r[i]) if i < len(r) else 0 for r in all_rows) for i in range(max(map(len, all_rows)))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in all_rows]
    if header:
        lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


WIDTH = 120          # a terminal's, a CI log's: tables fit it, their long cells become notes under them


def fit_table(header: list[str], body: list[list[str]], width: int = WIDTH, first: tuple[int, ...] = ()) -> str:
    """`render_table` made to fit `width`: a one-row table printed on end; long headers on two lines
    ("per_user" over "tok_s_p5"); then the longest cells moved under the table as numbered notes
    ("note 1" in the cell, "note 1: its text" below, a marker no reader takes for an interval such as
    "[4, 6]"; a short value keeps its place ahead of its long flag: "503 note 1"; one number per
    distinct text, numbered in reading order). Numbers of one column read in one format: where one
    has thousands separators ("40,256") the column's others get them ("4,574"). `first`: columns whose long
    cells go under the table before any other's (a failure's note before its metric's name); when
    those are under it, or nothing is left to move, the headers go on two lines before any other
    cell moves. A table still too wide is printed as two (or more), each led by the key column."""
    body = same_number_format(body)
    halves = [_halves(h) for h in header]
    if len(body) <= 3 and _widest([[a for a, _ in halves], [b for _, b in halves]], []) > width:
        # a few rows of many columns (boot facts, one summary): on end, a row per column
        header, body = [header[0], *(r[0] for r in body)], [[h, *(r[j] if j < len(r) else "" for r in body)]
                                                             for j, h in enumerate(header[1:], 1)]
    split = [_halves(h) for h in header]
    two = [[a for a, _ in split], [b for _, b in split]]
    heads = two if len(" | ".join(header)) > width else [header]
    moved: list[str] = []                 # texts moved out, referenced as "\0<index>\0" until numbered
    while _widest(heads, body) > width:
        cells = [(len(c), i, j) for i, r in enumerate(body) for j, c in enumerate(r)
                 if (j > 0 or len(c) > 24) and len(c) > 10 and "\0" not in c]
        if (len(heads) == 1 and any(two[1]) and (not cells or first and not any(c[2] in first for c in cells))
                and _widest(two, body) < _widest(heads, body)):
            heads = two       # headers on two lines before a value leaves its row (`first`'s notes moved)
            continue
        if not cells:
            break
        _, i, j = max([c for c in cells if c[2] in first] or cells)
        text = body[i][j]
        value, _, flag = text.partition(" [")
        keep, note = (value + " ", flag[:-1]) if flag.endswith("]") else ("", text)
        if note not in moved:
            moved.append(note)
        body[i][j] = f"{keep}\0{moved.index(note)}\0"
    order: dict[int, int] = {}
    for r in body:
        for c in r:
            if "\0" in c:
                order.setdefault(int(c.split("\0")[1]), len(order) + 1)
    body = [[c if "\0" not in c else f"{c.split(chr(0))[0]}{note_marker(order[int(c.split(chr(0))[1])])}" for c in r]
            for r in body]
    notes = sorted(order.items(), key=lambda kv: kv[1])
    tables = "\n\n".join(_render([[h[j] for j in cols] for h in heads], [[r[j] for j in cols] for r in body])
                         for cols in _column_groups(heads, body, width))
    return tables + "".join("\n" + wrap(f"{note_marker(n)}: {moved[k]}", width) for k, n in notes)


def note_marker(n: int) -> str:
    """What points from a table's cell to its note under the table ("note 2"): not "[2]", which
    reads as an interval beside the tables' "[4, 6]"."""
    return f"note {n}"


_NUMBER = re.compile(r"^(-?)(\d{4,})(?=$|[.\s%])")
_GROUPED = re.compile(r"^-?\d{1,3}(,\d{3})+(?=$|[.\s%])")


def same_number_format(body: list[list[str]]) -> list[list[str]]:
    """The rows with each column's numbers in one format: a column with one number written with
    thousands separators ("40,256", as `fmt` writes 10,000 and up) has them in all ("4574" -> "4,574")."""
    body = [list(r) for r in body]
    for j in range(max(map(len, body), default=0)):
        column = [r[j] for r in body if j < len(r)]
        if not any(_GROUPED.match(c) for c in column):
            continue
        for r in body:
            if j < len(r) and (m := _NUMBER.match(r[j])):
                r[j] = f"{m.group(1)}{int(m.group(2)):,}{r[j][m.end():]}"
    return body


def _column_groups(heads: list[list[str]], body: list[list[str]], width: int) -> list[list[int]]:
    """The columns of a table still too wide after its notes moved, as tables that fit: each starts
    with the first (key) column, the others follow in order, as many as fit (one table when it fits)."""
    n = max(map(len, [*heads, *body]))
    heads, body = [h + [""] * (n - len(h)) for h in heads], [r + [""] * (n - len(r)) for r in body]
    widths = [max(len(r[j]) for r in [*heads, *body]) for j in range(n)]
    groups: list[list[int]] = [[0]]
    for j in range(1, n):
        if len(groups[-1]) > 1 and sum(widths[k] + 3 for k in groups[-1]) + widths[j] > width:
            groups.append([0])
        groups[-1].append(j)
    return groups


def _halves(name: str) -> tuple[str, str]:
    """A header split at the separator nearest its middle ("per_user_tok_s" -> "per_user", "tok_s")."""
    cuts = [i for i, ch in enumerate(name) if ch in "_ "]
    if len(name) <= 8 or not cuts:
        return name, ""
    i = min(cuts, key=lambda k: abs(k - len(name) / 2))
    return name[:i], name[i + 1:]


def _render(heads: list[list[str]], body: list[list[str]]) -> str:
    if len(heads) == 1:
        return render_table(body, heads[0])
    lines = render_table([*heads, *body]).splitlines()
    widths = [len(c) for c in lines[0].split(" | ")]
    widths = [max(len(r[i]) if i < len(r) else 0 for r in [*heads, *body]) for i in range(len(heads[0]))]
    return "\n".join([*lines[:len(heads)], "-+-".join("-" * w for w in widths), *lines[len(heads):]])


def _widest(heads: list[list[str]], body: list[list[str]]) -> int:
    return max(map(len, render_table([*heads, *body]).splitlines()), default=0)


def wrap(line: str, width: int = WIDTH) -> str:
    """A long note or sentence folded to `width`, its continuation lines indented."""
    return textwrap.fill(line, width, subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)


def fold(line: str, width: int = WIDTH) -> str:
    """A progress line folded at `width`, its continuation lines four spaces deeper than it starts.
    A table row (" | ", or the rule under the header) is printed whole, split mid-row it is no row;
    so is an error line ("ValueError: ...", "error: ..."), which is read and searched for whole."""
    if len(line) <= width or " | " in line or "-+-" in line or _ERROR_LINE.search(line):
        return line
    indent = line[:len(line) - len(line.lstrip())]
    return textwrap.fill(line, width, subsequent_indent=indent + "    ", break_on_hyphens=False,
                         break_long_words=False)


_ERROR_LINE = re.compile(r"^\s*([^:|]+: )?([\w.]*Error|error|ERROR)\b:|^\s*Traceback ")


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, the cut marked "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: str, limit: int) -> str:
    """`text` on one line (each run of whitespace, newlines included, one space), cut at `limit` (`clip`)."""
    return clip(" ".join(text.split()), limit)


def md_table(header: list[str], body: list[list[str]]) -> str:
    """A Markdown table (the reports' `.md`): a header, its rule, a line per row; a "|" in a cell escaped."""
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(esc, r)) + " |" for r in body]
    return "\n".join(lines)
