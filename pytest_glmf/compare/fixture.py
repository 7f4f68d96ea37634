"""`glmf_lane_curve`: a lane's curve for the comparison, in a user's own test. This lane's rows as
recorded so far in this session (by `glmf_curve` or the curve suite), a lane of this session that
already ran, or another lane's latest result file in the results directory:

    from pytest_glmf.compare import assert_lane_beats

    @pytest.mark.glmf_lanes("daily")
    def test_daily_beats_batch_per_user(glmf_curve, glmf_lane_curve):
        glmf_curve(8, max_tokens=128)
        assert_lane_beats(glmf_lane_curve(), glmf_lane_curve("batch"), users=[8])

A lane with no curve rows yet skips the test with the reason (with several lanes in one session,
a lane still to come is not read from an earlier session's file).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.compare.lanecurve import from_document
from pytest_glmf.plugin.accessors import finished_result_file, selected_lanes

if TYPE_CHECKING:
    from pytest_glmf.compare.lanecurve import LaneCurve
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.results.recorder import SessionRecorder

SERIAL: tuple[str, ...] = ()


def lane_document(name: str, current: str, recorder: "SessionRecorder",
                  config: pytest.Config) -> dict[str, Any] | None:
    """Lane `name`'s result document: this lane's records so far, a lane finished earlier in this
    session, or `<results>/<name>-latest.json`; None when there is no curve to read."""
    if name == current:
        gates = recorder.recorded()
        return {"lane": {"name": name}, "gates": gates} if gates.get("curve") else None
    done = finished_result_file(config, name)
    if done is None and any(lane.name == name for lane in selected_lanes(config)):
        return None     # a lane of this session still to come: its rows, not an earlier session's
    path = done or recorder.results_dir / f"{name}-latest.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if ((doc.get("gates") or {}).get("curve")) else None


@pytest.fixture
def glmf_lane_curve(pytestconfig: pytest.Config, glmf_lane: "LaneConfig",
                    glmf_results: "SessionRecorder") -> Callable[..., "LaneCurve"]:
    """`glmf_lane_curve(name=None) -> LaneCurve`: this lane's curve (None), or lane `name`'s; skips
    the test when that lane has no curve rows yet."""

    def lane_curve(name: str | None = None) -> "LaneCurve":
        __tracebackhide__ = True
        lane = name or glmf_lane.name
        doc = lane_document(lane, glmf_lane.name, glmf_results, pytestconfig)
        if doc is None:
            where = "this session" if lane == glmf_lane.name else \
                f"this session or {glmf_results.results_dir}/{lane}-latest.json"
            pytest.skip(f"glmf_lane_curve({lane!r}): no curve rows of lane {lane!r} yet ({where})")
        return from_document(doc, lane)

    return lane_curve
