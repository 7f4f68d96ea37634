"""Boot gate: what the server printed at boot, against the lane's thresholds.

The recipe's lesson: "max_running_requests is capped to 7 by the mamba state cache" decided a
whole benchmark verdict, and "FP8 KV" was half true (two pools, one stays bf16). Both are in the
boot log; these tests read them and fail with the knob to turn. An attached server without a boot
log still has its seats, KV pool and context checked where it says them (/server_info:
gates/boot/told.py); what only the log says (problems, KV pool dtypes) is skipped, with the way to
give it.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.boot import assert_boot, assert_boot_log_clean, assert_seats
from pytest_glmf.gates.boot.sglang import state_pool
from pytest_glmf.launch.attach import missing_boot_log
from pytest_glmf.plugin.verified import required_gates

pytestmark = pytest.mark.glmf_gate("boot")


def skip_when_missing(server, config) -> None:
    """The lane names a boot_log that is not there: skip, or fail under --glmf-require boot."""
    if (missing := missing_boot_log(server)) is not None:
        if "boot" in required_gates(config):
            pytest.fail(f"{missing} (--glmf-require boot)", pytrace=False)
        pytest.skip(missing)


@pytest.fixture(scope="module")
def boot_log_present(glmf_server, pytestconfig) -> None:
    """An attached server (--glmf-url) has no boot log unless the lane or --glmf-boot-log names one;
    a lane's boot_log that is not there skips these tests, or fails them under --glmf-require boot."""
    skip_when_missing(glmf_server, pytestconfig)
    if glmf_server.boot_log_path is None:
        pytest.skip(f"no boot log for lane {glmf_server.lane.name!r} (attached to {glmf_server.base_url}); "
                    "give it with --glmf-boot-log FILE or boot_log: FILE in the lane")


@pytest.fixture(scope="module")
def boot_facts_known(glmf_server, glmf_boot_facts, pytestconfig) -> None:
    """Without a boot log, the facts are the server's word: skip when it says none of them."""
    if glmf_server.boot_log_path is None and not glmf_boot_facts.sources:
        skip_when_missing(glmf_server, pytestconfig)
        pytest.skip(f"no boot log for lane {glmf_server.lane.name!r} and the server at {glmf_server.base_url} "
                    "tells no seats, KV pool or context (/server_info); give the boot log with "
                    "--glmf-boot-log FILE or boot_log: FILE in the lane")


@pytest.fixture(scope="module")
def boot_section(glmf_thresholds, glmf_lane) -> dict[str, Any]:
    section = glmf_thresholds.for_gate(glmf_lane.name, "boot")
    if not section:
        pytest.skip(f"no boot thresholds for lane {glmf_lane.name!r} in {glmf_thresholds.path}")
    return section


def test_boot_log_has_no_problems(boot_log_present, glmf_boot_facts, glmf_results, glmf_server, record_property):
    facts = glmf_boot_facts.to_dict()
    glmf_results.record("boot", "facts", facts)
    if facts["engine"] == "sglang" and (pool := state_pool(glmf_server.boot_log, facts["state_slots_per_request"])):
        glmf_results.record("boot", "state_pool", pool)   # bytes per seat, for the lanes' comparison
    for key in ("max_running_requests", "kv_tokens", "context_len"):
        record_property(f"boot.{key}", facts[key])
    assert_boot_log_clean(glmf_boot_facts, lane=glmf_server.lane, log_path=glmf_server.boot_log_path)


def test_boot_facts_meet_thresholds(boot_facts_known, glmf_boot_facts, boot_section, glmf_thresholds, glmf_lane,
                                    glmf_server, glmf_results):
    bounds = glmf_thresholds.bounds(glmf_lane.name, "boot")
    source = glmf_thresholds.source(glmf_lane.name, "boot")
    if not bounds:
        pytest.skip(f"no boot metric bounds in {source}")
    if glmf_server.boot_log_path is None:   # the server's word is all there is: recorded here
        glmf_results.record("boot", "facts", glmf_boot_facts.to_dict())
    assert_boot(glmf_boot_facts, source=source, lane=glmf_lane, **bounds)


def test_kv_pool_dtypes(boot_log_present, glmf_boot_facts, boot_section, glmf_thresholds, glmf_lane):
    expected = boot_section.get("kv_pool_dtypes")
    if expected is None:
        pytest.skip(f"no kv_pool_dtypes in {glmf_thresholds.source(glmf_lane.name, 'boot')}")
    assert_boot(glmf_boot_facts, source=glmf_thresholds.source(glmf_lane.name, "boot"), lane=glmf_lane,
                kv_pool_dtypes=expected)


def test_seats_cover_every_curve_row(boot_facts_known, glmf_boot_facts, glmf_thresholds, glmf_lane):
    """Users beyond the effective cap queue instead of decoding: a curve row is only meaningful
    with one seat per user (the recipe's round-1 mistake)."""
    rows = glmf_thresholds.for_gate(glmf_lane.name, "curve").get("rows") or []
    users = sorted({int(r["users"]) for r in rows if not r.get("allow_queueing")})
    if not users:
        pytest.skip(f"no curve rows for lane {glmf_lane.name!r} in {glmf_thresholds.path}")
    assert_seats(glmf_boot_facts, users, source=glmf_thresholds.source(glmf_lane.name, "curve"), lane=glmf_lane)
