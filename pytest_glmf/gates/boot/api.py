"""The boot gate's public API: what the server printed at boot, judged against bounds written like
the thresholds file's boot section.

    from pytest_glmf.gates.boot import assert_boot, assert_seats, parse_boot_log

    facts = parse_boot_log(open("server.log").read())       # in a test: the glmf_boot_facts fixture
    assert_seats(facts, 48)                                  # one seat per user, or the cap's knob
    assert_boot(facts, kv_tokens={"min": 150_000}, kv_pool_dtypes=["fp8_e4m3", "bfloat16"])

The facts (`BootFacts`: seats and why they are capped, KV pools, context length, problems) are
parsed by `parse.py`; the failures name the knob that raises a cap, in the engine's own words.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from pytest_glmf.gates.boot.checks import kv_pool_dtype_mismatch
from pytest_glmf.gates.boot.facts import BootFacts
from pytest_glmf.gates.boot.hints import seat_cap_hint
from pytest_glmf.gates.boot.told import BOOT_LOG, source_of
from pytest_glmf.gates.bounds import caller_source, checked_bounds, lane_phrase
from pytest_glmf.gates.verdict import Check, checks_from_bounds, failed_checks, failure_message, note_evaluated
from pytest_glmf.text import fit_table, fmt, render_table


def _lane_kv(lane: Any) -> str:
    return getattr(lane, "kv", None) or "not set"


UNSAID = ("neither the boot log nor the server says it: give the server's boot log (boot_log: in the lane, "
          "or --glmf-boot-log FILE)")


def _hint(facts: BootFacts, metric: str, lane: Any) -> str:
    """The note of a failed bound: the knob, and where the number came from when not from the boot
    log; for a number nothing said, how to get it said."""
    if getattr(facts, metric, None) is None:
        extra = "; vLLM tells seats only in dev mode (VLLM_SERVER_DEV_MODE=1)" \
            if metric == "max_running_requests" and facts.engine == "vllm" else ""
        return UNSAID + extra
    if metric == "max_running_requests":
        told, hint = source_of(facts), seat_cap_hint(facts.cap_reason, lane)
        return hint + (f"; seats from {told}" if told != BOOT_LOG and told not in hint else "")
    told = source_of(facts, metric)
    return f"from the {told}" if told != BOOT_LOG else ""


def assert_boot(facts: BootFacts, *, source: str | None = None, lane: Any = None, **bounds: Any) -> None:
    """Fail the test unless the boot facts meet `bounds`: metric bounds (max_running_requests,
    kv_tokens, context_len, kv_cache_memory_gib: {"min": x} and/or {"max": y}) and
    `kv_pool_dtypes` (the KV pools' dtypes, e.g. ["fp8_e4m3", "bfloat16"]: the set of the pools'
    dtypes, or where the log prints one pool line, one of them; checks.py). A seat
    bound that fails names the knob that raises the cap. `lane`: a lane name or the `glmf_lane`
    fixture (named in the failure, with its --kv-cache-dtype)."""
    __tracebackhide__ = True
    if source is None:
        source = caller_source()
    bounds = checked_bounds("boot", bounds, "assert_boot", ("kv_pool_dtypes",), source)
    expected = bounds.pop("kv_pool_dtypes", None)
    checks = checks_from_bounds("boot", facts.to_dict(), bounds, source=source,
                                hints={metric: _hint(facts, metric, lane) for metric in bounds})
    failed = failed_checks(checks)
    messages = [failure_message(failed, f"boot facts{lane_phrase(lane)}")] if failed else []
    if expected is not None:
        note_evaluated()
        bad = kv_pool_dtype_mismatch(facts.kv_pools, facts.kv_pool_layout, _dtypes(expected))
        if bad is not None:
            knob = (f"check --kv-cache-dtype ({_lane_kv(lane)}) and the attention backend" if facts.kv_pools else
                    "the KV pool dtypes are only in the boot log: give it (boot_log: in the lane, or "
                    "--glmf-boot-log FILE)")
            rows = [["kv_pool_dtypes", bad["measured"], bad["expected"], f"{bad['layout']}; {knob}; ({source})"]]
            messages.append(f"KV pool dtypes{lane_phrase(lane)} differ from the thresholds\n"
                            + fit_table(["metric", "measured", "expected", "note"], rows, first=(3,)))
    if messages:
        pytest.fail("\n\n".join(messages), pytrace=False)


def _dtypes(expected: Any) -> list[str]:
    if isinstance(expected, str) or not isinstance(expected, Iterable):
        pytest.fail(f"assert_boot(): kv_pool_dtypes must be a list of dtype names, e.g. [fp8_e4m3, bfloat16]; "
                    f"got {expected!r}", pytrace=False)
    return list(expected)


def assert_seats(facts: BootFacts, users: int | Sequence[int], *, source: str | None = None, lane: Any = None) -> None:
    """Fail the test unless the server's effective seats (max_running_requests from the boot log,
    else from what the server says: gates/boot/told.py) hold every users value: users beyond the seats queue instead of decoding, and a curve there
    measures the queue (the recipe's round-1 mistake). The failure names the cap's reason and the
    knob that raises it."""
    __tracebackhide__ = True
    values = sorted({users} if isinstance(users, int) else set(users))
    if source is None:
        source = caller_source()
    seats = facts.max_running_requests
    checks = [Check("seats", seats, {"min": u}, where=f"@ {u} users") for u in values]
    hint = _hint(facts, "max_running_requests", lane)
    failed = [[f"seats < users @ {c.bound['min']} users", fmt(seats), f">= {c.bound['min']}", f"{hint} ({source})"]
              for c in failed_checks(checks)]
    if failed:
        name = getattr(lane, "name", lane)
        pytest.fail(f"{f'lane {name!r}' if name else 'the server'}: {len(failed)} curve row(s) would "
                    "queue behind the seat cap\n" + fit_table(["metric", "measured", "expected", "note"], failed, first=(3,)),
                    pytrace=False)


def assert_boot_log_clean(facts: BootFacts, *, lane: Any = None, log_path: Any = None) -> None:
    """Fail the test when the boot log reports problems (fatal errors, memory failures), one row
    each, with where the log is. Skip it, saying how to give one, when no boot log was read (an
    attached server without --glmf-boot-log): the suite's boot tests skip the same way."""
    __tracebackhide__ = True
    if not facts.log_read and not facts.problems:
        name = getattr(lane, "name", lane)
        pytest.skip(f"no boot log{f' for lane {name!r}' if name else ''}: nothing was checked for problems; give it "
                    "with --glmf-boot-log FILE (an attached server) or boot_log: FILE in the lane")
    note_evaluated()
    if facts.problems:
        rows = [[str(i + 1), p] for i, p in enumerate(facts.problems)]
        where = f"\n(boot log: {log_path})" if log_path is not None else ""
        pytest.fail(f"the boot log{lane_phrase(lane)} reports {len(rows)} problem(s)\n"
                    + render_table(rows, ["#", "problem"]) + where, pytrace=False)
