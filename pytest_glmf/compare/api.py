"""The comparison's public API: judge two lanes' curves, assert that one beats the other.

    from pytest_glmf.compare import assert_lane_beats, crossover

    c = crossover("results/daily-latest.json", "results/batch-latest.json")    # or CurveResults, docs
    print(c.sentence())     # "daily beats batch per user up to 16 users; from 32 batch wins; ..."
    assert_lane_beats(daily_curve, batch_curve, "per_user_tok_s", users=[8, 16])   # inside a test

A lane is given as a result file, its JSON document, a CurveResult (with its lane name, or
`name=`) or a LaneCurve. Only valid rows count (compare/lanecurve.py), and "beats" means by more
than the margin of the two rows' run-to-run spreads (compare/judge.py).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.compare.judge import FLOOR_PCT, Crossover, judge
from pytest_glmf.compare.lanecurve import LaneCurve, from_document, from_rows
from pytest_glmf.gates.bounds import caller_source
from pytest_glmf.gates.verdict import Check, failed_checks, failure_message
from pytest_glmf.results.gatejson import read_result
from pytest_glmf.text import fmt


def crossover(a: Any, b: Any, metric: str = "per_user_tok_s", *, users: Sequence[int] | None = None,
              names: tuple[str | None, str | None] = (None, None), floor_pct: float = FLOOR_PCT) -> Crossover:
    """Where lane `a` stops beating lane `b` on `metric` (any curve metric; its direction from the
    curve gate's spec), over `users` (default: every users value measured)."""
    return judge(as_lane_curve(a, names[0]), as_lane_curve(b, names[1]), metric, users=users, floor_pct=floor_pct)


def lane_beats_checks(c: Crossover, users: Sequence[int] | None = None, *, source: str = "") -> list[Check]:
    """One Check per users value: a's lead over b (in the metric's units, signed by the metric's
    direction) against the margin; a users value without a valid row on both lanes fails with why."""
    wanted = sorted(set(users)) if users is not None else [p.users for p in c.points]
    why = {(lane, u): reason for lane, u, reason in c.excluded}
    checks = []
    for u in wanted:
        label = f"{c.metric}: lead of {c.a} over {c.b}"
        p = next((p for p in c.points if p.users == u), None)
        if p is None:
            reasons = [f"{lane}: {why[(lane, u)]}" for lane in (c.a, c.b) if (lane, u) in why]
            missing = [lane for lane, has in ((c.a, (c.a, u) in c.unpaired), (c.b, (c.b, u) in c.unpaired))
                       if not has and (lane, u) not in why]
            reasons += [f"{lane}: no row at {u} users" for lane in missing]
            checks.append(Check(label, None, {"min": 0}, where=f"@ {u} users", source=source,
                                hint="not a measurement of both lanes: " + "; ".join(reasons)))
            continue
        lead = (p.a - p.b) if c.direction == "higher" else (p.b - p.a)
        hint = (f"{c.a} {fmt(p.a)} vs {c.b} {fmt(p.b)}; " +
                ("within noise" if p.winner == "tie" else f"{c.b} wins" if p.winner == "b" else f"{c.a} wins"))
        checks.append(Check(label, lead, {"min": p.margin}, where=f"@ {u} users", source=source, hint=hint))
    return checks


def assert_lane_beats(a: Any, b: Any, metric: str = "per_user_tok_s", *, users: Sequence[int] | None = None,
                      names: tuple[str | None, str | None] = (None, None), floor_pct: float = FLOOR_PCT,
                      source: str | None = None) -> Crossover:
    """Fail the test unless lane `a` beats lane `b` on `metric` by more than the margin at every
    users value of `users` (default: every users value valid on both; none is a failure too). A
    users value where either row is seat-starved, KV-starved or invalid fails with the reason: it
    is not a measurement of that many users. Returns the judged crossover."""
    __tracebackhide__ = True
    if source is None:
        source = caller_source()
    c = crossover(a, b, metric, users=users, names=names, floor_pct=floor_pct)
    checks = lane_beats_checks(c, users, source=source)

    if not checks:
        failed_checks([Check(f"{metric}: users values valid on both lanes", 0, {"min": 1}, source=source)])
        pytest.fail(f"assert_lane_beats({c.a!r}, {c.b!r}, {metric!r}): no users value has a valid row on both "
                    f"lanes\n{excluded_lines(c)}", pytrace=False)
    failed = failed_checks(checks)
    if failed:
        details = "\n".join(x for x in (c.sentence(), excluded_lines(c)) if x)
        pytest.fail(failure_message(failed, f"{c.a} does not beat {c.b} on {metric}", details), pytrace=False)
    return c


def excluded_lines(c: Crossover) -> str:
    return "\n".join(f"excluded: {lane} @ {u} users: {why}" for lane, u, why in c.excluded)


def as_lane_curve(x: Any, name: str | None = None) -> LaneCurve:
    """A LaneCurve from a LaneCurve, a result document (dict), a result file path (a session's, or
    what a `glmf <gate> --json` wrote: results/gatejson.py), or a CurveResult (`measure_curve`'s,
    or the `glmf_curve` fixture's)."""
    if isinstance(x, LaneCurve):
        return x if name is None else LaneCurve(name, x.rows, x.doc)
    if isinstance(x, (str, Path)):
        return from_document(read_result(x), name)
    if isinstance(x, Mapping):
        return from_document(x, name)
    if hasattr(x, "rows") and all(hasattr(r, "to_record") for r in x.rows):
        lane = name or getattr(x, "lane", None)
        if lane is None:
            raise ValueError("a CurveResult without a lane name: pass name=... (e.g. as_lane_curve(curve, 'daily'))")
        return from_rows(lane, [r.to_record() for r in x.rows])
    raise TypeError(f"cannot read a lane's curve from {type(x).__name__}: give a result file, its JSON "
                    "document, a CurveResult or a LaneCurve")
