"""Acceptance tests written the way a user of pytest-glmf writes their own.

Our product promise: 48 people share one box, each with room for a real document in context,
and the API answers fast. The ready-made suites gate the recipe's claims; this file gates ours,
with the same public pieces: fixtures (glmf_boot_facts, glmf_client, glmf_lane), markers
(glmf_lanes, glmf_gate) and the assertion helper that fails with a table.

    pytest examples/test_my_service.py --glmf-lane batch
    pytest examples/test_my_service.py --glmf-url http://127.0.0.1:30000 --glmf-lane batch
"""
import time

import pytest

from pytest_glmf.gates.verdict import Check, assert_checks

USERS = 48
MIN_CONTEXT_PER_USER_TOKENS = 2000


@pytest.mark.glmf_gate("boot")
def test_every_user_gets_room_for_a_document(glmf_boot_facts, glmf_lane, record_property):
    """The KV pool divided among our users, and one seat per user (not a queue)."""
    kv_tokens = glmf_boot_facts.kv_tokens
    per_user_tokens = kv_tokens / USERS if kv_tokens else None
    record_property("kv_tokens_per_user", per_user_tokens)
    assert_checks([
        Check("kv_tokens per user", per_user_tokens, {"min": MIN_CONTEXT_PER_USER_TOKENS},
              where=f"@ {USERS} users", source="examples/test_my_service.py",
              hint="fewer state slots (--max-mamba-cache-size) or more memory (--mem-fraction-static)"),
        Check("seats", glmf_boot_facts.max_running_requests, {"min": USERS}, where=f"@ {USERS} users",
              source="examples/test_my_service.py", hint=glmf_boot_facts.cap_reason or ""),
    ], title=f"our {USERS}-user promise on lane {glmf_lane.name!r}")


@pytest.mark.glmf_lanes("batch", "daily")
def test_model_list_answers_within_half_a_second(glmf_client):
    t0 = time.perf_counter()
    models = glmf_client.get_json("/v1/models")
    elapsed_s = time.perf_counter() - t0
    assert models, "GET /v1/models returned nothing"
    assert_checks([Check("GET /v1/models latency_s", elapsed_s, {"max": 0.5})], title="API")
