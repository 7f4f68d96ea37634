"""What our server printed at boot, against our own promise: 48 users, each with a seat (not a place
in a queue) and room for a real document in the KV pool, and the KV cache in FP8 as configured.

    pytest examples/test_my_boot.py --glmf-lanes examples/sim-lanes.yaml --glmf-lane batch
    pytest examples/test_my_boot.py --glmf-lanes examples/sim-lanes.yaml --glmf-lane round1   # fails: 7 seats

`glmf_boot_facts` holds what the boot log says (seats and why they are capped, KV pools, context
length, problems); the assertions take the boot gate's bounds, as a thresholds file writes them,
and fail with a table naming the flag to change.
"""
from pytest_glmf.gates.boot import assert_boot, assert_boot_log_clean, assert_seats

USERS = 48
DOCUMENT_TOKENS = 4000      # what one user keeps in context


def test_boot_log_is_clean(glmf_boot_facts, glmf_lane):
    assert_boot_log_clean(glmf_boot_facts, lane=glmf_lane)


def test_every_user_gets_a_seat(glmf_boot_facts, glmf_lane):
    assert_seats(glmf_boot_facts, USERS, lane=glmf_lane)


def test_every_user_has_room_for_a_document(glmf_boot_facts, glmf_lane):
    assert_boot(glmf_boot_facts, lane=glmf_lane, kv_tokens={"min": USERS * DOCUMENT_TOKENS},
                context_len={"min": 32768}, kv_pool_dtypes=["fp8_e4m3", "bfloat16"])
