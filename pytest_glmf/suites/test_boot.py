"""Boot gate: what the server printed at boot, against the lane's thresholds.

The recipe's lesson: "max_running_requests is capped to 7 by the mamba state cache" decided a
whole benchmark verdict, and "FP8 KV" was half true (two pools, one stays bf16). Both are in the
boot log; these tests read them and fail with the knob to turn.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.boot.checks import kv_pool_dtype_mismatch
from pytest_glmf.gates.boot.hints import seat_cap_hint
from pytest_glmf.gates.verdict import assert_checks, checks_from_bounds, note_evaluated, render_table

pytestmark = pytest.mark.glmf_gate("boot")

@pytest.fixture(scope="module", autouse=True)
def boot_log_present(glmf_server) -> None:
    """An attached server (--glmf-url) has no boot log unless the lane names one: nothing to gate."""
    if glmf_server.boot_log_path is None:
        pytest.skip(f"no boot log for lane {glmf_server.lane.name!r} (attached to {glmf_server.base_url}); "
                    "set boot_log: FILE in the lane to gate boot facts")


@pytest.fixture(scope="module")
def boot_section(glmf_thresholds, glmf_lane) -> dict[str, Any]:
    section = glmf_thresholds.for_gate(glmf_lane.name, "boot")
    if not section:
        pytest.skip(f"no boot thresholds for lane {glmf_lane.name!r} in {glmf_thresholds.path}")
    return section


def test_boot_log_has_no_problems(glmf_boot_facts, glmf_results, glmf_server, record_property):
    facts = glmf_boot_facts.to_dict()
    glmf_results.record("boot", "facts", facts)
    for key in ("max_running_requests", "kv_tokens", "context_len"):
        record_property(f"boot.{key}", facts[key])
    note_evaluated()
    if glmf_boot_facts.problems:
        rows = [[str(i + 1), p] for i, p in enumerate(glmf_boot_facts.problems)]
        pytest.fail(f"the boot log of lane {glmf_server.lane.name!r} reports {len(rows)} problem(s)\n"
                    + render_table(rows, ["#", "problem"]) + f"\n(boot log: {glmf_server.boot_log_path})",
                    pytrace=False)


def test_boot_facts_meet_thresholds(glmf_boot_facts, boot_section, glmf_thresholds, glmf_lane):
    source = glmf_thresholds.source(glmf_lane.name, "boot")
    checks = checks_from_bounds("boot", glmf_boot_facts.to_dict(), boot_section, source=source,
                                hints={"max_running_requests": seat_cap_hint(glmf_boot_facts.cap_reason)})
    if not checks:
        pytest.skip(f"no boot metric bounds in {source}")
    assert_checks(checks, f"boot facts of lane {glmf_lane.name!r}")


def test_kv_pool_dtypes(glmf_boot_facts, boot_section, glmf_thresholds, glmf_lane):
    expected = boot_section.get("kv_pool_dtypes")
    if expected is None:
        pytest.skip(f"no kv_pool_dtypes in {glmf_thresholds.source(glmf_lane.name, 'boot')}")
    note_evaluated()
    bad = kv_pool_dtype_mismatch(glmf_boot_facts.kv_pools, glmf_boot_facts.kv_pool_layout, expected)
    if bad:
        source = glmf_thresholds.source(glmf_lane.name, "boot")
        rows = [["kv_pool_dtypes", bad["measured"], bad["expected"],
                 f"{bad['layout']}; check --kv-cache-dtype ({glmf_lane.kv or 'not set'}) and the attention "
                 f"backend; ({source})"]]
        pytest.fail(f"KV pool dtypes of lane {glmf_lane.name!r} differ from the thresholds\n"
                    + render_table(rows, ["metric", "measured", "expected", "note"]), pytrace=False)


def test_seats_cover_every_curve_row(glmf_boot_facts, glmf_thresholds, glmf_lane):
    """Users beyond the effective cap queue instead of decoding: a curve row is only meaningful
    with one seat per user (the recipe's round-1 mistake)."""
    rows = glmf_thresholds.for_gate(glmf_lane.name, "curve").get("rows") or []
    users = sorted({int(r["users"]) for r in rows if not r.get("allow_queueing")})
    if not users:
        pytest.skip(f"no curve rows for lane {glmf_lane.name!r} in {glmf_thresholds.path}")
    seats = glmf_boot_facts.max_running_requests
    source = glmf_thresholds.source(glmf_lane.name, "curve")
    hint = seat_cap_hint(glmf_boot_facts.cap_reason)
    note_evaluated(len(users))
    failed = [[f"seats < users @ {u} users", str(seats), f">= {u}", f"{hint} ({source})"]
              for u in users if seats is None or seats < u]
    if failed:
        pytest.fail(f"lane {glmf_lane.name!r}: {len(failed)} curve row(s) would queue behind the seat cap\n"
                    + render_table(failed, ["metric", "measured", "expected", "note"]), pytrace=False)
