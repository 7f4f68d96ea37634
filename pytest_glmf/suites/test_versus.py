"""Lane beats lane: a curve section's `beats: [{lane: B, metric, users}]` (compare/thresholds.py) on
lane A says A beats B on that curve metric, by more than the two rows' run-to-run spreads, at those
users values, from valid rows only (seat-starved, KV-starved and invalid rows fail with their
reason: they are not a measurement of that many users; compare/judge.py).

An entry is judged on whichever of its two lanes runs second: with several lanes in one session,
once both were measured; across sessions, against the other lane's `<results>/<lane>-latest.json`.
This module runs after test_curve.py, so this lane's curve rows are recorded by then.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.compare import assert_lane_beats
from pytest_glmf.compare.fixture import lane_document
from pytest_glmf.plugin.accessors import selected_lanes, session_thresholds

pytestmark = [pytest.mark.glmf_gate("curve")]



def _beats_entries(config: pytest.Config) -> list[tuple[str, dict[str, Any]]]:
    """(owner lane, entry) of every `curve.beats` entry of the selected lanes' sections, and of any
    section whose entry names a selected lane (judged on whichever lane runs second)."""
    thresholds = session_thresholds(config)
    if thresholds is None:
        return []
    selected = {lane.name for lane in selected_lanes(config)}
    return [(owner, entry) for owner, gates in thresholds.lanes.items()
            for entry in ((gates or {}).get("curve") or {}).get("beats") or []
            if owner in selected or entry["lane"] in selected]


def test_curve_beats(glmf_lane, glmf_thresholds, glmf_results, pytestconfig):
    """`curve.beats: [{lane: B, metric, users}]` on lane A: A beats B on the metric by more than the
    rows' spreads at those users values (compare/judge.py), from valid rows only."""

    entries = _beats_entries(pytestconfig)
    if not entries:
        pytest.skip(f"no curve.beats for lane {glmf_lane.name!r} in {glmf_thresholds.path}")
    judged = 0
    for owner, entry in entries:
        if glmf_lane.name not in (owner, entry["lane"]):
            continue
        a, b = (lane_document(n, glmf_lane.name, glmf_results, pytestconfig) for n in (owner, entry["lane"]))
        if a is None or b is None:
            continue
        assert_lane_beats(a, b, entry.get("metric", "per_user_tok_s"), users=entry.get("users"),
                          names=(owner, entry["lane"]), source=f"{glmf_thresholds.source(owner, 'curve')}.beats")
        judged += 1
    if not judged:
        pytest.skip(f"curve.beats of lane {glmf_lane.name!r}: the other lane has no curve rows yet (in this session "
                    f"or {glmf_results.results_dir}/<lane>-latest.json); it is judged once both lanes were measured")
