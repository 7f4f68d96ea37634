"""Per-request acceptance on the real vLLM 0.32 (CPU, n-gram speculation): the response's
`metrics.speculative_decoding` (`--per-request-spec-decode-metrics summary`) against the engine's own
/metrics counters, request by request and under load (pytest_glmf/gates/acceptance/probe.py)."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.gates.acceptance import measure_acceptance
from pytest_glmf.gates.acceptance.probe import (
    SOURCE_VLLM_RESPONSE,
    _read_spec_counters,
    load_prompt_classes,
    measure_vllm,
    served_model,
)
from pytest_glmf.launch import launch_lane

pytestmark = [pytest.mark.real_engine]

NGRAM = "real-ngram"
K = 4                                  # num_speculative_tokens of the lane
DRAFTS, DRAFT_TOKENS, ACCEPTED = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                                  "vllm:spec_decode_num_accepted_tokens_total")
POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


@pytest.fixture(scope="module")
def per_request_ngram(real_lanes: dict[str, Any], real_results_dir) -> Iterator[Any]:
    lane = real_lanes[NGRAM]
    lane = dataclasses.replace(lane, name="real-ngram-per-request",
                               extra=[*lane.extra, "--per-request-spec-decode-metrics", "summary"])
    server = launch_lane(lane, real_results_dir, "real-acc")
    try:
        yield server
    finally:
        server.stop()


def _delta(before: dict[str, float], after: dict[str, float], name: str) -> int:
    return int(after.get(name, 0) - before.get(name, 0))


def test_each_response_says_what_the_counters_say(per_request_ngram):
    """One request at a time: the response's steps, drafted, accepted and per-position counts
    (from its histogram) equal the /metrics deltas around it, exactly."""
    classes = load_prompt_classes()
    with Client(per_request_ngram.base_url) as client:
        model = served_model(client)
        seen = []
        for pc in classes[:4]:
            before = _read_spec_counters(client)
            rec = measure_vllm(client, pc.name, 0, pc.prompts[0], 96, model=model, counters=False)
            after = _read_spec_counters(client)
            assert rec.error is None and rec.source == SOURCE_VLLM_RESPONSE, rec
            assert (rec.verify_steps, rec.draft_tokens, rec.accepted_tokens) == (
                _delta(before, after, DRAFTS), _delta(before, after, DRAFT_TOKENS), _delta(before, after, ACCEPTED)), pc.name
            assert rec.accepted_per_pos == [_delta(before, after, f"{POS}#{k}") for k in range(K)], pc.name
            assert rec.draft_tokens == K * rec.verify_steps      # the n-gram proposer drafts k or nothing
            seen.append(rec.accepted_tokens)
    assert sum(seen) > 0, "n-gram lookup never matched on four classes"


def test_per_request_acceptance_under_load_pools_to_the_counters(per_request_ngram):
    """4 requests in flight: each class's numbers come from its own responses, and all of them
    together are what the server counted over the whole run."""
    classes = load_prompt_classes()
    with Client(per_request_ngram.base_url) as client:
        before = _read_spec_counters(client)
    result = measure_acceptance(per_request_ngram.base_url, classes, prompts_per_class=2, max_tokens_scale=0.25,
                                users=4)
    with Client(per_request_ngram.base_url) as client:
        after = _read_spec_counters(client)
    assert result.source == SOURCE_VLLM_RESPONSE and result.users == 4 and result.method == "ngram"
    recs = result.records
    assert all(r["error"] is None for r in recs)
    assert sum(r["accepted_tokens"] for r in recs) == _delta(before, after, ACCEPTED)
    assert sum(r["verify_steps"] for r in recs) == _delta(before, after, DRAFTS)
    for row in result.classes:
        if row.no_drafts:
            assert row.accept_length is None and row.accept_pos is None
            continue
        assert row.accept_length == pytest.approx(1 + sum(row.accept_pos or []), abs=1e-9), row.name
        assert 0 <= row.detail["accept_pos1"] <= 1 and row.accept_pos == sorted(row.accept_pos or [], reverse=True)
