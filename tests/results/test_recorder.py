"""The result file's parts: each process appends its own part, the owner merges exactly its
session's (several lanes: lane `b` never takes the parts of lane `b-x`)."""
from __future__ import annotations

import json

from pytest_glmf.results.recorder import SessionRecorder


def test_a_lane_merges_its_own_workers_parts_and_not_a_lane_whose_name_it_prefixes(tmp_path) -> None:
    SessionRecorder(tmp_path, "s1-b", "b", "main").record("curve", "owner", 1)
    SessionRecorder(tmp_path, "s1-b", "b", "gw1").record("curve", "worker", 2)
    SessionRecorder(tmp_path, "s1-b-x", "b-x", "gw0").record("curve", "other lane", 3)
    out = SessionRecorder(tmp_path, "s1-b", "b").write(lane={"name": "b"}, provenance={})
    assert json.loads(out.read_text())["gates"] == {"curve": {"owner": 1, "worker": 2}}
    assert [p.name for p in (tmp_path / ".parts").glob("*.jsonl")] == ["s1-b-x-gw0.jsonl"]   # kept for its lane
    assert SessionRecorder(tmp_path, "s1-b-x", "b-x").recorded() == {"curve": {"other lane": 3}}
