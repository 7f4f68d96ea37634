"""The lines of the charts join only numbers that compare (the comparison's and the history's HTML
pages, the session's PNG): a row that is not a measurement of its users (seat-starved, invalid), a
row whose users shared one prompt, and a number not measured are on no line, and no line runs
across them (the pages drew one line through every point). Read from the SVG the CLI writes: a
point is on a line when its centre is one of the line's vertices."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.cli import main
from pytest_glmf.results import svg
from pytest_glmf.results.history import open_store, parse_location

NS = {"s": "http://www.w3.org/2000/svg"}
WHY = "client timestamps can be off by up to 0.31 s on TTFT p95 (40 % of 0.77 s) > 5 % allowed"


def lane_doc(lane: str, seats: int, rows: dict[int, dict[str, Any]], faster: float = 0.0) -> dict[str, Any]:
    curve = {f"users={u}": {"users": u, "seats": seats, "per_user_tok_s": 100.0 + faster - u / 2,
                            "aggregate_tok_s": 90.0 * u, "ttft_p95_s": 0.2 - faster / 100 + u / 100, "spread_pct": 1.0, "valid": True,
                            "seat": {"seats": seats, "shared": u > seats}, **extra} for u, extra in rows.items()}
    return {"schema": 1, "session_id": f"s-{lane}", "lane": {"name": lane}, "provenance": {"engine": "sglang"},
            "gates": {"curve": curve}, "exitstatus": 0}


# lane a: its 32-user row invalid (client-bound runs) and 64 seats, so its 96-user row queues (neither is a
# measurement of its users); lane b: TTFT p95 not measured at 16 users, every user's prompt the same at 96
A = lane_doc("a", 64, {1: {}, 8: {}, 16: {}, 32: {"valid": False, "flags": "client-bound runs"}, 48: {}, 64: {},
                      96: {}})
B = lane_doc("b", 128, {1: {}, 8: {}, 16: {"ttft_p95_s": None, "unmeasured": {"ttft_p95_s": WHY}}, 32: {}, 64: {},
                        96: {"shared_prefix": True}}, faster=10.0)


def charts(page: Path) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r'<svg class="chart".*?</svg>', page.read_text(), re.S)]


def points(chart: ET.Element) -> dict[str, tuple[float, float]]:
    """Each circle's title ("a @ 32: ...", its series and x) up to the colon -> its centre."""
    return {c.find("s:title", NS).text.split(": ")[0]: (float(c.get("cx")), float(c.get("cy")))
            for c in chart.iterfind(".//s:circle", NS)}


def polyline(element: ET.Element) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (xy.split(",") for xy in element.get("points").split())]


def lines(chart: ET.Element, color: str | None = None) -> list[list[tuple[float, float]]]:
    return [polyline(pl) for pl in chart.iterfind(".//s:polyline", NS) if color in (None, pl.get("stroke"))]


def on_a_line(chart: ET.Element, name: str) -> bool:
    at = points(chart)[name]
    return any(at in line for line in lines(chart))


def crossed_by(chart: ET.Element, lane: str, users: int) -> bool:
    """A line of `lane`'s colour runs across `users`: a segment from one of its points below to one above."""
    xs = {int(name.split(" @ ")[1]): x for name, (x, _) in points(chart).items() if name.startswith(f"{lane} @ ")}
    below, above = max(x for u, x in xs.items() if u < users), min(x for u, x in xs.items() if u > users)
    color = next(c.get("stroke") for c in chart.iterfind(".//s:circle", NS)
                 if c.find("s:title", NS).text.startswith(f"{lane} @ "))
    return any(a[0] <= below and b[0] >= above for line in lines(chart, color) for a, b in zip(line, line[1:]))


def test_the_comparison_page_joins_only_rows_that_compare(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(A))
    (tmp_path / "b.json").write_text(json.dumps(B))
    out = tmp_path / "compare.html"
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--html", str(out)]) == 0
    per_user, ttft = charts(out)

    for chart in (per_user, ttft):
        for name in ("a @ 1", "a @ 8", "a @ 16", "a @ 48", "a @ 64", "b @ 1", "b @ 8", "b @ 32", "b @ 64"):
            assert on_a_line(chart, name), name
        # a's invalid 32-user row: hollow, on no line, and a's line stops at 16 and starts again at 48;
        # its 96 users on 64 seats: hollow, on no line
        assert not on_a_line(chart, "a @ 32") and not crossed_by(chart, "a", 32) and not on_a_line(chart, "a @ 96")
        # every user of b's 96-user row sent one prompt: hollow, in a series of its own, on no line
        shared = "b, prefix shared (not comparable) @ 96"
        assert shared in points(chart) and not on_a_line(chart, shared)
        assert [c.get("fill") for c in chart.iterfind(".//s:circle", NS)
                if c.find("s:title", NS).text.startswith(("a @ 32", "a @ 96", shared))] == ["#fff"] * 3
    # b's 16-user TTFT p95 was not measured: no point, a cross saying why, and b's line broken there
    assert "b @ 16" in points(per_user) and "b @ 16" not in points(ttft)
    (gap,) = [t for t in ttft.iterfind(".//s:text", NS) if t.get("class") == "gap"]
    assert gap.find("s:title", NS).text == f"b @ 16: not measured ({WHY})"
    assert not crossed_by(ttft, "b", 16)
    assert "not measured there" in out.read_text()        # the legend says what the cross means


def test_a_point_drawn_apart_and_a_gap_break_the_line_and_nothing_else_does() -> None:
    """svg.line_parts: the runs of points a line joins."""
    pts = [svg.Point(u, 1.0, apart=u == 32) for u in (1, 8, 16, 32, 48, 64, 96, 128)]
    parts = svg.line_parts(pts, [80.0], lambda p: float(p.x))
    assert [[p.x for p in part] for part in parts] == [[1, 8, 16], [48, 64], [96, 128]]
    assert [[p.x for p in part] for part in svg.line_parts(pts[:3], [], lambda p: float(p.x))] == [[1, 8, 16]]
    assert svg.line_parts([svg.Point(1, 1.0), svg.Point(2, 1.0, apart=True)], [], lambda p: float(p.x)) == []


def history_doc(i: int, values: dict[str, Any]) -> dict[str, Any]:
    entry = {"users": 48, "per_user_tok_s": 50.0, "ttft_p95_s": 0.76, "spread_pct": 1.0, **values}
    return {"schema": 1, "session_id": f"20261101-00000{i}-000{i}", "lane": {"name": "batch"},
            "provenance": {"lane": "batch", "engine": "sglang", "image": f"sglang:n{i}", "engine_version": "0.5.23",
                           "started_at": f"2026-11-0{i + 1}T02:00:00+00:00"},
            "gates": {"curve": {"users=48": entry}}, "incomplete": [], "exitstatus": 0}


def test_the_history_page_breaks_a_trend_where_a_run_did_not_measure_the_number(tmp_path: Path,
                                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Five runs; the third stored users=48's per-user tok/s but not its TTFT p95 (not measured): the
    TTFT trend has no line from run 2 to run 4 and a cross at run 3; per-user tok/s is one line."""
    where = tmp_path / "history.sqlite"
    location = parse_location(str(where), tmp_path, tmp_path)
    assert location is not None
    with open_store(location) as store:
        for i in range(5):
            store.add_run(history_doc(i, {"ttft_p95_s": None, "unmeasured": {"ttft_p95_s": WHY}} if i == 2 else {}))
    out = tmp_path / "history.html"
    assert main(["history", "list", "--store", str(where), "--lane", "batch", "--html", str(out)]) == 0
    capsys.readouterr()
    by_title = {c.find("s:title", NS).text: c for c in charts(out)}
    per_user, ttft = by_title["Concurrency curve: per_user_tok_s"], by_title["Concurrency curve: ttft_p95_s"]
    assert [len(line) for line in lines(per_user)] == [5]
    assert [len(line) for line in lines(ttft)] == [2, 2]           # runs 1-2 and 4-5
    (gap,) = [t for t in ttft.iterfind(".//s:text", NS) if t.get("class") == "gap"]
    assert gap.find("s:title", NS).text.startswith("users=48 @ #3 ") and "curve.ttft_p95_s not measured" in \
        gap.find("s:title", NS).text


def test_the_run_png_breaks_its_line_where_a_number_was_not_measured() -> None:
    """The session's PNG (results/plotting.py) as the pages: TTFT p95 not measured at 16 users is a
    break in the line (NaN), not a line from 8 to 32 users; per-user tok/s, measured there, is whole."""
    pytest.importorskip("matplotlib")
    from pytest_glmf.results.plotting import curve_figure, draw, pyplot

    fig = draw(curve_figure(B))
    try:
        per_user, _, ttft = fig.get_axes()
        own = [c for c in ttft.containers if c.get_label() == "TTFT p95 (s)"][0].lines[0]
        assert list(own.get_xdata()) == [1, 8, 16, 32, 64]
        ys = list(own.get_ydata())
        assert ys[2] != ys[2] and all(y == y for y in ys[:2] + ys[3:])    # NaN at 16 users only
        whole = [c for c in per_user.containers if c.get_label().startswith("per-user")][0].lines[0]
        assert all(y == y for y in whole.get_ydata())
    finally:
        pyplot().close(fig)


def test_the_comparison_png_joins_only_rows_that_compare() -> None:
    """`glmf compare --plot` (compare/report.py) as its HTML page: lane a's line breaks at its invalid
    32-user row and its seat-starved 96-user row, lane b's TTFT line at 16 users (not measured); b's
    96-user row, every user's prompt the same, is on a dashed line of its own. (The line ran through
    every row, and paired the rows' points wrongly once a number was missing.)"""
    pytest.importorskip("matplotlib")
    from pytest_glmf.compare.report import lanes_figure
    from pytest_glmf.results.plotting import pyplot

    fig = lanes_figure([A, B])
    try:
        tok, ttft = fig.get_axes()

        def line(ax: Any, color: str, style: str) -> tuple[list[float], list[float]]:
            found = [ln for ln in ax.get_lines() if ln.get_color() == color and ln.get_linestyle() == style
                     and len(ln.get_xdata())]
            assert len(found) == 1, [(ln.get_color(), ln.get_linestyle()) for ln in ax.get_lines()]
            return list(found[0].get_xdata()), list(found[0].get_ydata())

        def broken(ys: list[float]) -> list[int]:
            return [i for i, y in enumerate(ys) if y != y]

        xs, ys = line(tok, "C0", "-")
        assert xs == [1, 8, 16, 32, 48, 64, 96] and broken(ys) == [3, 6]
        xs, ys = line(ttft, "C1", "-")
        assert xs == [1, 8, 16, 32, 64] and broken(ys) == [2]
        assert line(ttft, "C1", "--")[0] == [96]
    finally:
        pyplot().close(fig)
