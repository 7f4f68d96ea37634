"""The per-request speculative-decoding numbers the acceptance gate reads, held to the released code:
each released vLLM's (VLLM_RELEASES) `RequestSpecDecodeMetrics` (v1/metrics/stats.py) fed the truth server's steps gives, through
its own `to_dict` and the response model `SpeculativeDecodingMetrics`, exactly the payload the truth
server sends (pytest_glmf/testing/spec_truth.py); and SGLang 0.5.23's `Req.update_spec_correct_drafts_histogram`
grows the histogram the probe reads from `meta_info` as the simulator does."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from oracle_env import in_ci, oracle_python

from pytest_glmf.gates.acceptance.probe import per_position_from_histogram, spec_from_vllm_response
from pytest_glmf.testing.spec_truth import SpecTruthServer, plan_request
from pytest_glmf.upgrade.releases import VLLM_RELEASES

pytestmark = pytest.mark.contract
SETUP_VLLM = Path(__file__).resolve().parent / "setup-vllm"

VLLM_SIDE = r"""
import json, sys
from vllm.v1.metrics.stats import RequestSpecDecodeMetrics
from vllm.entrypoints.generate.base.protocol import SpeculativeDecodingMetrics
plan = json.loads(sys.stdin.read())
m = RequestSpecDecodeMetrics.new(plan["k"])
for j, count in enumerate(plan["histogram"]):
    for _ in range(count):
        m.observe(num_draft_tokens=plan["k"], num_accepted=j)
print(json.dumps(SpeculativeDecodingMetrics(**m.to_dict()).model_dump(exclude_none=True)))
"""

SGLANG_SIDE = r"""
import json, sys
from sglang.srt.managers.schedule_batch import Req
steps = json.loads(sys.stdin.read())
class R:   # the method reads and writes only this one attribute
    spec_correct_drafts_histogram = []
r = R()
for accepted in steps:
    Req.update_spec_correct_drafts_histogram(r, accepted)
print(json.dumps(r.spec_correct_drafts_histogram))
"""


@pytest.mark.parametrize("release", VLLM_RELEASES)
def test_the_truth_servers_payload_is_the_released_vllms_own(release: str):
    proc = subprocess.run(["bash", str(SETUP_VLLM), "--check", release], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        msg = f"vLLM {release} oracle not set up ({proc.stdout.strip()}): run tests/contract/setup-vllm"
        if in_ci():   # the stage never goes green by skipping
            pytest.fail(f"CI=true and {msg}", pytrace=False)
        pytest.skip(msg)
    python = subprocess.run(["bash", str(SETUP_VLLM), "--python", release], capture_output=True,
                            text=True).stdout.strip()
    per_pos = [0.8, 0.5, 0.25]
    plan = plan_request(121, per_pos)
    out = subprocess.run([python, "-W", "ignore", "-c", VLLM_SIDE], input=json.dumps({**plan, "k": 3}),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    released = json.loads(out.stdout.strip().splitlines()[-1])
    with SpecTruthServer({"c": per_pos}, lambda text: "c") as server:
        ours, _ = server._answer({"messages": [{"role": "user", "content": "x"}], "max_tokens": 121})
    assert ours[-1]["metrics"]["speculative_decoding"] == released
    read = spec_from_vllm_response(released)
    assert read["accepted_per_pos"] == plan["per_pos"] and read["verify_steps"] == plan["steps"]


def test_sglangs_histogram_grows_as_the_probe_reads_it():
    steps = [2, 0, 5, 2, 1]
    out = subprocess.run([str(oracle_python()), "-W", "ignore", "-c", SGLANG_SIDE], input=json.dumps(steps),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    hist = json.loads(out.stdout.strip().splitlines()[-1])
    assert hist == [1, 1, 2, 0, 0, 1]                    # index j: the steps that accepted exactly j drafts
    assert per_position_from_histogram(hist) == [sum(1 for s in steps if s >= k) for k in range(1, 6)]
