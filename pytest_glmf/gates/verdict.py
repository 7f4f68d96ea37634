"""Thresholds -> verdict rows -> one readable failure.

Every gate (its metrics are declared in `gates/<gate>/spec.py`) measures plain numbers, turns them
into `Check`s against the bounds from thresholds.yaml, and calls `assert_checks`. A failure is a
table, one row per violated item, in domain units, with where the bound came from and which knob
to turn (the table made by pytest_glmf/text.py, like every other). Baseline comparison
(regressions against a stored run) produces the same rows.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_glmf.gates.registry import gate_spec
from pytest_glmf.text import fit_table, fmt

# Why a check failed, as measured (the failure ledger's cause class), most telling first: a request
# that never reached the server explains everything after it; the server's errors explain missed
# numbers; a client-bound run makes its numbers the client's; otherwise the lane, as configured,
# missed its bound.
CAUSES = ("network", "server", "client-bound", "configuration")


@dataclass
class Check:
    """One measured value against one bound. `bound` is {"min": x} and/or {"max": y}."""

    metric: str
    value: float | int | None
    bound: Mapping[str, Any]
    where: str = ""          # e.g. "@ 48 users", "class=prose"
    source: str = ""         # e.g. "thresholds.yaml: lanes.batch.curve[48]"
    hint: str = ""           # the knob to turn, when known
    cause: str = "configuration"   # one of CAUSES: what a failure of this check says went wrong

    @property
    def ok(self) -> bool:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return False
        lo, hi = self.bound.get("min"), self.bound.get("max")
        return (lo is None or self.value >= lo) and (hi is None or self.value <= hi)

    def expected(self) -> str:
        parts = []
        if self.bound.get("min") is not None:
            parts.append(f">= {fmt(self.bound['min'])}")
        if self.bound.get("max") is not None:
            parts.append(f"<= {fmt(self.bound['max'])}")
        return " and ".join(parts) or "(no bound)"

    def change(self) -> str:
        """Signed distance to the violated bound, in percent of the bound."""
        if self.value is None:
            return "not measured"
        for key in ("min", "max"):
            b = self.bound.get(key)
            if b is None:
                continue
            violated = self.value < b if key == "min" else self.value > b
            if violated:
                return f"{(self.value - b) / b * 100:+.1f} %" if b else f"{self.value - b:+g}"
        return ""


def failure_table(checks: Iterable[Check]) -> str:
    """One row per missed bound; a note too long for the terminal goes under the table as "note 1: ..."."""
    rows = []
    for c in checks:
        label = f"{c.metric} {c.where}".strip()
        note = "; ".join(p for p in (c.change(), c.hint, f"({c.source})" if c.source else "") if p)
        rows.append([label, fmt(c.value), c.expected(), note])
    return fit_table(["metric", "measured", "expected", "note"], rows, first=(3,))


# ---------------------------------------------------------------------------- "something was verified"
# A session in which no check was evaluated must not pass (plugin/verified.py). The helpers here
# have no handle on the session, so they count what they evaluate in this one tally (per process;
# the plugin reads it before and after each test phase and sends the difference with the test's
# report, also from xdist workers). Checks made without a `Check` call `note_evaluated`.


class _Tally:
    evaluated = 0
    failed_causes: set[str] = set()


def note_evaluated(n: int = 1) -> None:
    """Count `n` checks evaluated (a verdict given), for checks not made through `failed_checks`."""
    _Tally.evaluated += n


def evaluated_count() -> int:
    """Checks evaluated in this process so far."""
    return _Tally.evaluated


def failed_checks(checks: Iterable[Check]) -> list[Check]:
    """Evaluate every check (counted as evaluated) and return the violated ones (their causes
    are noted for the failure ledger)."""
    checks = list(checks)
    note_evaluated(len(checks))
    failed = [c for c in checks if not c.ok]
    _Tally.failed_causes.update(c.cause for c in failed)
    return failed


def take_failure_cause() -> str | None:
    """The most telling cause of the checks failed since the last call (CAUSES order), then forget them."""
    causes, _Tally.failed_causes = _Tally.failed_causes, set()
    return next((c for c in CAUSES if c in causes), None)


def failure_message(failed: list[Check], title: str = "", details: str = "") -> str:
    """The failure text of violated checks: the title, how many bounds were missed, one table row
    per missed bound, then `details` (e.g. the measured row, the bad turns)."""
    head = f"{title}: " if title else ""
    tail = f"\n\n{details}" if details else ""
    return f"{head}{len(failed)} threshold(s) missed\n{failure_table(failed)}{tail}"


def assert_checks(checks: Iterable[Check], title: str = "", details: str = "") -> None:
    """Fail the calling test with one table of every violated check (all checks are evaluated,
    not just the first failure), then `details` (e.g. the bad turns behind a fraction)."""
    __tracebackhide__ = True
    failed = failed_checks(checks)
    if failed:
        pytest.fail(failure_message(failed, title, details), pytrace=False)


def checks_from_bounds(gate: str, measured: Mapping[str, Any], bounds: Mapping[str, Any], *,
                       where: str = "", source: str = "", hints: Mapping[str, str] | None = None) -> list[Check]:
    """One Check per metric named in `bounds` (a thresholds.yaml mapping metric -> {min|max})."""
    known = gate_spec(gate).metrics
    out = []
    for metric, bound in bounds.items():
        if metric not in known:
            continue  # non-metric settings (users, allow_queueing, ...) live beside the metrics
        out.append(Check(metric, measured.get(metric), bound, where=where, source=source,
                         hint=(hints or {}).get(metric, "")))
    return out
