"""One lane's run is one typed object (plugin/run.py), started afresh for every lane, and the session
holds no string-keyed bag that could carry what lane A's run learned into lane B's (the behaviour:
tests/plugin/test_plugin_lanes.py, test_what_lane_a_knew_is_absent_from_lane_b)."""
from __future__ import annotations

import dataclasses

import pytest

from pytest_glmf.plugin.options import Settings
from pytest_glmf.plugin.run import LaneRun
from pytest_glmf.plugin.session import GlmfSession


def test_the_session_holds_no_bag_of_keys_and_the_run_holds_the_lane() -> None:
    session_fields = {f.name for f in dataclasses.fields(GlmfSession)}
    assert "extra" not in session_fields and not hasattr(GlmfSession, "extra")
    bags = [f.name for f in dataclasses.fields(GlmfSession) if str(f.type).replace('"', "").startswith(("dict", "Mapping"))]
    assert bags == [], f"string-keyed bags on the session: {bags}"
    per_lane = {"server", "remote_server", "boot_error", "gone", "stopped", "incomplete", "recorder", "result_file",
                "failed_tests", "baseline_note", "history_note", "html_file", "html_error"}
    assert per_lane <= {f.name for f in dataclasses.fields(LaneRun)}
    assert not per_lane & session_fields, "per-lane state on the session would outlive its lane"


def test_the_resolved_settings_are_frozen_and_a_lanes_are_derived(tmp_path) -> None:
    settings = Settings(lane=None, lanes_file=None, thresholds_file=None, url=None, image=None,
                        results_dir=tmp_path, baseline=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.html = True   # type: ignore[misc]
    assert dataclasses.replace(settings, html=True).html and not settings.html
