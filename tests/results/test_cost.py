"""What a verdict cost (results/cost.py): the GPU count from the lane or the provenance, the server's
GPU time with its boot, each gate's wall and GPU time in the result file and the terminal summary."""
from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_glmf.config.lanes import LaneConfig, load_lanes
from pytest_glmf.results.cost import cost_block, cost_lines, server_gpus
from pytest_glmf.testing.spec_truth import SpecTruthServer


def lane(**kw) -> LaneConfig:
    return dataclasses.replace(load_lanes(None)["daily"], **{"launcher": "process", **kw})


@pytest.mark.parametrize(("kw", "prov", "want"), [
    ({"gpus": 4}, {"gpu_count": 8}, (4, "lane gpus")),
    ({"gpus": ["0", "3"]}, {}, (2, "lane gpus (devices)")),
    ({"env": {"CUDA_VISIBLE_DEVICES": "2,3,5"}}, {}, (3, "lane env CUDA_VISIBLE_DEVICES")),
    ({}, {"argv": ["vllm", "serve", "m", "--tensor-parallel-size", "4", "--data-parallel-size=2"]},
     (8, "the engine's parallel-size flags")),
    ({}, {"argv": ["sglang", "--tp", "2"], "gpu_count": 8}, (2, "the engine's parallel-size flags")),
    ({}, {"gpu_count": 1}, (1, "the host's GPUs (nvidia-smi)")),
    ({}, {}, (0, "no GPU seen (nvidia-smi)")),
    ({"launcher": "sim"}, {"gpu_count": 8}, (0, "the simulator holds no GPU")),
])
def test_the_gpu_count_comes_from_the_lane_first(kw, prov, want):
    assert server_gpus(lane(**kw), prov) == want


def test_gpu_time_is_held_wall_time_times_gpus_boot_included():
    cost = cost_block(lane(gpus=2), {}, {"boot": 1.5, "curve": 90.0}, started=1000.0, ready=1105.0, until=1300.0)
    assert cost == {"gpus": 2, "gpus_from": "lane gpus", "server_held_s": 300.0, "attached": False, "boot_s": 105.0,
                    "server_gpu_s": 600.0, "gates": {"boot": {"wall_s": 1.5, "gpu_s": 3.0},
                                                     "curve": {"wall_s": 90.0, "gpu_s": 180.0}}}
    assert cost_lines(cost) == [
        "What the verdict cost: 10.00 GPU min, 2 GPU(s) x 300.0 s held (boot 105.0 s included; GPUs: lane gpus)",
        "  per gate: boot 1.5 s (0.05 GPU min); curve 90.0 s (3.00 GPU min)"]
    attached = cost_block(lane(gpus=1), {}, {"drift": 6.0}, started=None, ready=None, until=1300.0)
    assert attached["server_held_s"] is None and attached["gates"]["drift"]["gpu_s"] == 6.0
    assert cost_lines(attached)[0] == "What the verdict cost: no server launched by this session"


def test_the_result_file_and_the_summary_carry_each_gates_cost(pytester):
    """A lane that says it holds 2 GPUs, attached to a truth server: the acceptance tests' wall time
    is in `cost.gates.acceptance`, its GPU time twice that, and the summary prints both."""
    with SpecTruthServer({"only": [0.5]}, lambda text: "only", hold_s=0.2) as server:
        pytester.makefile(".yaml", lanes=f"lanes:\n  two:\n    engine: vllm\n    launcher: attach\n"
                                         f"    url: {server.url}\n    spec: ngram\n    gpus: 2\n")
        pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  two:\n    acceptance:\n"
                                              "      settings: {prompts_per_class: 1}\n")
        pytester.makepyfile(test_mine="""
import pytest
from pytest_glmf.gates.acceptance import PromptClass, assert_speculating

@pytest.mark.glmf_gate("acceptance")
def test_accepts(glmf_acceptance):
    result = glmf_acceptance([PromptClass("only", "only", 8, [[{"role": "user", "content": "hi"}]])] * 1)
    assert_speculating(result)
""")
        result = pytester.runpytest("test_mine.py", "--glmf-lanes", "lanes.yaml", "--glmf-lane", "two", "--glmf-thresholds",
                                    "thresholds.yaml", "--glmf-results", str(pytester.path / "results"),
                                    "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    cost = json.loads((pytester.path / "results" / "two-latest.json").read_text())["cost"]
    assert (cost["gpus"], cost["gpus_from"], cost["attached"], cost["boot_s"]) == (2, "lane gpus", True, None)
    assert cost["server_held_s"] > 0.2     # attached during the test's setup, held past its answers
    assert cost["server_gpu_s"] == pytest.approx(2 * cost["server_held_s"])
    wall = cost["gates"]["acceptance"]["wall_s"]
    assert 0.2 <= wall < 30 and cost["gates"]["acceptance"]["gpu_s"] == pytest.approx(2 * wall)
    result.stdout.re_match_lines([r"What the verdict cost: 0\.\d\d GPU min, 2 GPU\(s\) x [\d.]+ s held "
                                  r"\(attached: boot not seen; GPUs: lane gpus\)",
                                  r"  per gate: acceptance [\d.]+ s \(0\.\d\d GPU min\)"])


def test_the_html_pages_verdict_says_what_it_cost():
    from pytest_glmf.results.html import verdict_block

    cost = cost_block(lane(gpus=2), {}, {"curve": 90.0}, started=1000.0, ready=1105.0, until=1300.0)
    html = verdict_block({"exitstatus": 0, "incomplete": [], "cost": cost})
    assert ('<p class="cost">What the verdict cost: 10.00 GPU min, 2 GPU(s) x 300.0 s held (boot 105.0 s included; '
            'GPUs: lane gpus)</p>') in html
    assert '<p class="cost">  per gate: curve 90.0 s (3.00 GPU min)</p>' in html
    assert 'class="cost"' not in verdict_block({"exitstatus": 0, "incomplete": []})


def test_the_markdown_report_says_what_it_cost():
    from pytest_glmf.results.report import markdown_report

    cost = cost_block(lane(gpus=2), {}, {"curve": 90.0}, started=1000.0, ready=1105.0, until=1300.0)
    md = markdown_report({"lane": {"name": "x"}, "gates": {}, "cost": cost})
    assert "- What the verdict cost: 10.00 GPU min, 2 GPU(s) x 300.0 s held" in md
    assert "- per gate: curve 90.0 s (3.00 GPU min)" in md
