"""The served surface is recorded per run, and a change against the baseline is reported (an image
upgrade in the simulator's terms: the nightly's dialect, then 0.5.23's)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_glmf.engine.surface import surface_changes

LANES = """\
lanes:
  batch:
    launcher: sim
    time_scale: 0.05
    kv: fp8_e4m3
    mem: 0.9
    ctx: 131072
    maxbs: 128
    extra: --max-mamba-cache-size 640 --mamba-ssm-dtype bfloat16 --tool-call-parser glm47 --enable-metrics
    sim_args: [--log-format, '{fmt}']
"""


def test_surface_changes_lists_each_difference() -> None:
    base = {"version": "0.5.22", "flags_accepted": ["--a", "--b"], "endpoints": {"/version": 404, "/health": 200},
            "generation": {"meta_info_keys": ["id", "spec_accept_token_num"]}}
    now = {"version": "0.5.23", "flags_accepted": ["--a", "--c"], "endpoints": {"/version": 404, "/health": 200},
           "generation": {"meta_info_keys": ["id", "spec_num_correct_drafts"]}}
    assert surface_changes(now, base) == [
        "flags_accepted: +1 (--c) -1 (--b)",
        "generation.meta_info_keys: +1 (spec_num_correct_drafts) -1 (spec_accept_token_num)",
        "version: baseline '0.5.22', now '0.5.23'"]
    assert surface_changes(now, now) == [] and surface_changes(now, None) == []


def run(pytester: pytest.Pytester, fmt: str, *args: str) -> tuple[pytest.RunResult, dict]:
    lanes = pytester.makefile(".yaml", **{f"lanes-{fmt.replace('.', '')}": LANES.format(fmt=fmt)})
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "batch", "-k", "test_boot",
                                           "-p", "no:cacheprovider", *args)
    out = sorted((pytester.path / "glmf-results").glob("batch-2*.json"))[-1]
    return result, json.loads(out.read_text())


def test_the_surface_is_recorded_and_an_upgrade_is_reported(pytester: pytest.Pytester) -> None:
    first, doc = run(pytester, "nightly-2026-09")
    assert first.ret == 0, first.stdout.str()[-2000:]
    surface = doc["provenance"]["served_surface"]
    assert surface["engine"] == "sglang" and surface["owned_by"] == "sglang"
    assert surface["version"].endswith("glmf-sim") and surface["version_source"] == "/server_info"
    assert surface["endpoints"]["/version"] == 404 and surface["endpoints"]["/model_info"] == 200
    assert "--cuda-graph-max-bs-decode" in surface["flags_accepted"] and surface["tool_call_parser"] == "glm47"
    assert "sglang:num_running_reqs" in surface["metric_names"]
    gen = surface["generation"]
    assert "weight_version" in gen["meta_info_keys"] and "spec_verify_ct" not in gen["meta_info_keys"]
    assert gen["logprobs"]["null_at"] == [2] and gen["logprobs"]["entry"] == "[float, int, null]"
    baseline = sorted((pytester.path / "glmf-results").glob("batch-2*.json"))[-1]
    second, _ = run(pytester, "0.5.23", "--glmf-baseline", str(baseline))
    assert second.ret == 0, second.stdout.str()[-2000:]
    second.stdout.fnmatch_lines([
        "The engine's served surface changed since the baseline (not a failure by itself):",
        "  version: baseline '0.5.22.dev0+nightly20260911-glmf-sim', now '0.5.23-glmf-sim'"])
    assert Path(baseline).exists()
