"""Held-out SGLang 0.5.23 boot logs (tests/gates/boot/bootlogs_0_5_23, written from the released format
strings, each line checked against them in tests/contract/test_boot_census.py): the whole BootFacts
of a plain boot, of one with the unified memory pool and of one with post-capture KV sizing.

Issue 22 found the gate right on 1 of the 3: with the unified pool it took
`[unified-memory-pool]   total_bytes=..., max_total_num_tokens=...` for the summary line (no seats, no
context length); after post-capture KV sizing it found no KV pool (the pool line before capture is
`KV Cache VA upper bound`, the pool is `Post-capture KV sizing: KV cache allocated`).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from test_boot_suite import run_boot_suite  # the boot suite on an attached server (same directory)

from pytest_glmf.gates.boot.checks import kv_pool_dtype_mismatch
from pytest_glmf.gates.boot.parse import BootFacts, parse_boot_log

LOGS = Path(__file__).parent / "bootlogs_0_5_23"
BS_128 = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128]

EXPECTED = {
    "glm5_flash_batch.log": {
        "max_running_requests": 160, "requested_max_running_requests": 160, "max_mamba_cache_size": 640,
        "kv_tokens": 3604480, "context_len": 131072,
        "kv_pools": [{"tokens": 3604480, "dtype": "float8_e4m3fn", "size_gb": 20.81}],
        "kv_pool_layout": "dsa-one-pool", "kv_cache_memory_gib": 20.81, "cuda_graph_bs": BS_128},
    "kimi_linear_unified_memory_pool.log": {
        # seats and context from the scheduler's summary, not the unified pool's `max_num_reqs`;
        # the state pool's size from the unified pool's line (it prints no `Mamba Cache` line)
        "max_running_requests": 128, "max_mamba_cache_size": 256, "kv_tokens": 3200000, "context_len": 1048576,
        "kv_pools": [{"tokens": 3200000, "dtype": "bfloat16", "size_gb": 24.03}],
        "kv_pool_layout": "one-pool-per-line", "kv_cache_memory_gib": 24.03, "cuda_graph_bs": BS_128},
    "qwen3_next_post_capture_kv_sizing.log": {
        # the pool after capture (1.6M tokens), not the 2.4M-token reservation before it
        "max_running_requests": 40, "requested_max_running_requests": 64, "max_mamba_cache_size": 192,
        "cap_reason": "max_running_requests capped to 40 by the post-capture KV sizing (from 64): "
                      "raise --mem-fraction-static or lower --context-length",
        "kv_tokens": 1600000, "context_len": 262144,
        "kv_pools": [{"tokens": 1600000, "dtype": "bfloat16", "size_gb": 36.62}],
        "kv_pool_layout": "one-pool-per-line", "kv_cache_memory_gib": 36.62,
        "cuda_graph_bs": [1, 2, 4, 8, 12, 16, 24, 32, 40, 48]},
}


def test_every_held_out_log_has_an_expectation() -> None:
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_held_out_0_5_23_log_facts(name: str) -> None:
    text = (LOGS / name).read_text()
    assert text.startswith("# source: written for issue 22 from SGLang 0.5.23's format strings")
    want = {**BootFacts().to_dict(), "engine": "sglang", "ready": True, "log_read": True,
            **EXPECTED[name]}
    assert parse_boot_log(text).to_dict() == want


def test_the_kv_pool_check_reads_the_post_capture_pool() -> None:
    """The boot gate's dtype check judges the pool after capture (it found none before)."""
    f = parse_boot_log((LOGS / "qwen3_next_post_capture_kv_sizing.log").read_text())
    assert kv_pool_dtype_mismatch(f.kv_pools, f.kv_pool_layout, ["bfloat16"]) is None
    assert kv_pool_dtype_mismatch(f.kv_pools, f.kv_pool_layout, ["float8_e4m3fn"]) == {
        "measured": "bfloat16", "expected": "fp8_e4m3", "layout": "layout: one line per KV pool"}


def test_the_unified_pool_line_is_not_the_summary_even_alone() -> None:
    """A log cut before the summary: the unified pool's line gives the state pool, not the KV tokens or
    seats (its `max_num_reqs` is the request pool's size)."""
    text = "\n".join(line for line in (LOGS / "kimi_linear_unified_memory_pool.log").read_text().splitlines()
                     if "max_total_num_tokens=3200000, chunked" not in line and "ready to roll" not in line)
    f = parse_boot_log(text)
    assert (f.max_running_requests, f.context_len, f.max_mamba_cache_size) == (None, None, 256)
    assert f.kv_tokens == 3200000   # from the KV pool line, as on any log without a summary


HELD_OUT_THRESHOLDS = """\
schema: 1
lanes:
  daily:
    boot:
      max_running_requests: {{min: {seats}}}
      context_len: {{min: {context}}}
      kv_pool_dtypes: [bfloat16]
"""


@pytest.mark.parametrize(("name", "seats", "context"), [
    ("kimi_linear_unified_memory_pool.log", 128, 1048576), ("qwen3_next_post_capture_kv_sizing.log", 40, 262144)])
def test_the_boot_suite_passes_on_the_held_out_logs(pytester, running_fake_server, name, seats, context) -> None:
    """The ready-made boot suite reads seats, context length and the KV pool from both logs (issue 22:
    it failed on each, for want of a fact)."""
    result = run_boot_suite(pytester, running_fake_server, (LOGS / name).read_text(),
                            HELD_OUT_THRESHOLDS.format(seats=seats, context=context))
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.assert_outcomes(passed=3, skipped=1)
    tighter = run_boot_suite(pytester, running_fake_server, (LOGS / name).read_text(),
                             HELD_OUT_THRESHOLDS.format(seats=seats + 1, context=context))
    tighter.assert_outcomes(passed=2, failed=1, skipped=1)
    tighter.stdout.fnmatch_lines([f"max_running_requests | {seats} * | >= {seats + 1} *"])


@pytest.mark.parametrize("name", ["kimi_linear_unified_memory_pool.log", "qwen3_next_post_capture_kv_sizing.log"])
def test_the_facts_are_found_behind_a_foreign_prefix(name: str) -> None:
    """`docker compose logs` puts `service  | ` before SGLang's prefix: the facts are read from the lines'
    fragments, so the summary is still the line with the seats beside the pool size, and the unified
    pool's and post-capture lines still read as they do without it."""
    text = "".join(f"sglang-1  | {line}\n" for line in (LOGS / name).read_text().splitlines()[1:])
    f = parse_boot_log(text)
    want = EXPECTED[name]
    assert (f.engine, f.ready) == ("sglang", True)
    for key in ("kv_tokens", "max_running_requests", "context_len", "max_mamba_cache_size", "kv_pools",
                "cuda_graph_bs"):
        assert getattr(f, key) == want[key], key
