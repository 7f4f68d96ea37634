"""Both generations of SGLang's boot lines (pytest_glmf/engine/logformats.py), printed by the
simulator with `--log-format`, give the same contract facts; the KV-pool check understands both
pool layouts. The 0.5.23 format strings themselves are pinned against the released source in
tests/contract/test_boot_formats.py."""
from __future__ import annotations

import pytest

from pytest_glmf.engine import logformats as lf
from pytest_glmf.gates.boot.checks import kv_pool_dtype_mismatch
from pytest_glmf.gates.boot.hints import MAMBA_ADVICE, seat_cap_hint
from pytest_glmf.gates.boot.parse import parse_boot_log
from pytest_glmf.sim import boot
from pytest_glmf.sim.args import parse_args
from pytest_glmf.sim.memory import plan

DAILY = ("--speculative-algorithm DFLASH --speculative-draft-model-path /models/GLM-5.3-Flash-DFlash2 "
         "--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.85 --context-length 1048576 --cuda-graph-max-bs-decode 16 "
         "--speculative-dflash-block-size 7 --max-mamba-cache-size 48")
BATCH = ("--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.90 --context-length 131072 --cuda-graph-max-bs-decode 128 "
         "--mamba-ssm-dtype bfloat16 --linear-attn-decode-backend triton --max-mamba-cache-size 640")


def boot_text(argv: str, generation: str) -> tuple[str, object]:
    flags = [*argv.split(), "--log-format", generation]
    return boot.boot_log_text(flags), plan(parse_args(flags))


@pytest.mark.parametrize("generation", lf.GENERATIONS)
@pytest.mark.parametrize("lane", ["daily", "batch"])
def test_both_generations_give_the_contract_facts(lane: str, generation: str) -> None:
    argv = DAILY if lane == "daily" else BATCH + " --max-running-requests 160"
    text, p = boot_text(argv, generation)
    f = parse_boot_log(text)
    assert (f.engine, f.ready, f.problems) == ("sglang", True, [])
    assert (f.max_running_requests, f.kv_tokens, f.max_mamba_cache_size) == (p.seats, p.kv_tokens, p.slots)
    assert f.context_len == (1048576 if lane == "daily" else 131072)
    assert f.cuda_graph_bs == p.cuda_graph_bs and f.cuda_graph_bs
    # the dump is `ServerArgs(...)` on the nightly and a dict on 0.5.23: the requested value either way
    assert f.requested_max_running_requests == (None if lane == "daily" else 160)
    if lane == "daily":
        assert f.state_slots_per_request == 5
        assert f.cap_reason == ("max_running_requests capped to 9 by the mamba state cache (max_mamba_cache_size=48, "
                                f"5 state slots per request): {MAMBA_ADVICE}")
    if generation == lf.NIGHTLY:
        assert f.kv_pool_layout == lf.LAYOUT_TWO_POOLS
        assert [pool["dtype"] for pool in f.kv_pools] == ["bfloat16", "float8_e4m3fn"]
    else:
        assert f.kv_pool_layout == lf.LAYOUT_ONE_POOL
        assert f.kv_pools == [{"tokens": p.kv_tokens, "dtype": "float8_e4m3fn",
                               "size_gb": round(p.mla_gb + p.indexer_gb, 2)}]
    # the recipe's thresholds hold on a healthy server of either generation
    assert kv_pool_dtype_mismatch(f.kv_pools, f.kv_pool_layout, ["fp8_e4m3", "bfloat16"]) is None


def test_each_generation_prints_its_own_lines() -> None:
    nightly, _ = boot_text(DAILY, lf.NIGHTLY)
    released, _ = boot_text(DAILY, lf.V0_5_23)
    assert "server_args=ServerArgs(" in nightly and "server_args={'" in released
    assert "Capture cuda graph bs [1, 2, 4, 8]" in nightly
    assert "Capture target verify CUDA graph end. bs=[1, 2, 4, 8], elapsed=" in released
    assert "Using KV cache dtype" in nightly and "Using KV cache dtype" not in released
    assert nightly.count("KV Cache is allocated") == 2 and released.count("KV Cache is allocated") == 1
    for text in (nightly, released):
        assert "type=Glm5NextForConditionalGeneration" in text and "time_scale" not in text


def test_the_layout_is_in_the_failure() -> None:
    one = [{"tokens": 10, "dtype": "bfloat16", "size_gb": 1.0}]
    assert kv_pool_dtype_mismatch(one, lf.LAYOUT_ONE_POOL, ["fp8_e4m3"]) == {
        "measured": "bfloat16", "expected": "one of fp8_e4m3",
        "layout": "layout: " + lf.LAYOUT_TEXT[lf.LAYOUT_ONE_POOL]}
    two = [{"tokens": 10, "dtype": "bfloat16", "size_gb": 1.0}, {"tokens": 10, "dtype": "bfloat16", "size_gb": 0.1}]
    assert kv_pool_dtype_mismatch(two, lf.LAYOUT_TWO_POOLS, ["fp8_e4m3", "bfloat16"]) == {
        "measured": "bfloat16, bfloat16", "expected": "bfloat16, fp8_e4m3",
        "layout": "layout: two DSA pool lines, MLA and indexer (the recipe's nightly)"}
    assert kv_pool_dtype_mismatch([], None, ["fp8_e4m3"])["layout"] == "layout: no KV pool line"


def test_a_non_dsa_model_is_one_pool_per_line() -> None:
    text = ("[2026-10-30 10:00:00 TP0] Load weight end. elapsed=3.00 s, type=LlamaForCausalLM, avail mem=70.00 GB, "
            "mem usage=15.00 GB.\n[2026-10-30 10:00:01 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: "
            "1000, K size: 1.00 GB, V size: 1.00 GB\n")
    f = parse_boot_log(text)
    assert f.kv_pool_layout == lf.LAYOUT_PLAIN and f.kv_pools == [{"tokens": 1000, "dtype": "bfloat16", "size_gb": 2.0}]


def test_0_5_23_reduced_line_and_dict_dump() -> None:
    text = ("[2026-10-30 10:00:00] server_args={'model_path': '/m', 'max_running_requests': 74, 'tp_size': 1}\n"
            "[2026-10-30 10:00:05 TP0] " + lf.render(lf.V0_5_23, "kv_reduced", requested=74, seats=26) + "\n"
            "[2026-10-30 10:00:05 TP0] " + lf.render(lf.V0_5_23, "summary", kv_tokens=5200, chunked_prefill_size=8192,
                                                     max_prefill_tokens=16384, seats=26, context_len=4096,
                                                     avail_gb=3.0) + "\n"
            "[2026-10-30 10:00:09 TP0] Decode batch [17], #running-req: 26, #token: 4100, token usage: 0.79\n")
    f = parse_boot_log(text)
    assert (f.requested_max_running_requests, f.max_running_requests, f.ready) == (74, 26, True)
    assert f.cap_reason == ("max_running_requests reduced from the requested 74 to 26 by the available KV cache "
                            "capacity: raise --mem-fraction-static or lower --context-length")


def test_one_hint_for_a_seat_cap() -> None:
    assert seat_cap_hint(None) == "raise --max-running-requests (no cap reason in the boot log)"
    given = f"max_running_requests capped to 7 by the mamba state cache: {MAMBA_ADVICE}"
    assert seat_cap_hint(given) == given
    assert seat_cap_hint("capped by the mamba state cache") == f"capped by the mamba state cache: {MAMBA_ADVICE}"
    assert seat_cap_hint("bound by kv capacity").endswith(": raise --mem-fraction-static or lower --context-length")
