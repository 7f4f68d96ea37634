"""vLLM 0.34 boot logs (issue 39 item 1): the reworded DFlash/DSpark override of the running cap, and
the KV pool of the extensible KV cache (on by default on CUDA), sized after warmup.

The logs are written from vLLM 0.34.0's own format strings (the released wheel's source, file:line of
the logging call cited at each), %-formatted the way its logger does, behind vLLM's line prefix. The
numbers are one consistent boot: a bf16 model with 128 KiB of KV per token, block size 64 (0.34's
default), so a block is 8 MiB; 40.00 GiB reserved before warmup, 7,324 blocks (57.22 GiB) after it.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_boot_seats_told import line, vllm_gpu_server  # noqa: F401  (the fake GPU vLLM, same directory)

from pytest_glmf.gates.boot import assert_seats, parse_boot_log
from pytest_glmf.gates.boot.vllm import VLLM_LINES

# vLLM 0.34.0 (vllm-0.34.0 wheel), the format strings the boot gate reads:
NON_DEFAULT = "non-default args: %s"                                       # entrypoints/common/startup.py:96
ENGINE = "Initializing a V1 LLM engine (v%s) with config: %s"              # v1/engine/core.py:153
MAX_MODEL_LEN = "Using max model len %s"                                   # config/model.py:2214
KV_MEMORY = "Available KV cache memory: %s GiB"                            # v1/worker/gpu_worker.py:795
AFTER_WARMUP = ("Memory after warmup: %s GiB free, %s GiB committed to the KV cache, "   # v1/worker/
                "%s GiB kept for transient activations (%s GiB allocated at peak, "      # extensible_kv_cache.py:693
                "%s GiB of torch reservation growth); %d KV cache blocks (%s GiB) "
                "fit within the requested %s GiB. Torch may reserve up to %s GiB.")
KV_SIZE = ("%s KV cache size: %s tokens, "                                 # v1/core/kv_cache_utils.py:1168
           "Maximum concurrency for %s tokens per request: %.2fx")
REMAP = "Remapping the KV cache from %d to %d blocks to fit the measured budget."   # extensible_kv_cache.py:525
EXTENDED = "Extended KV cache to %d blocks (%.2f GiB)."                    # extensible_kv_cache.py:536
DISABLING = ("Disabling the extensible KV cache: %s. The KV cache will be sized "     # v1/executor/abstract.py:175
             "from profiling estimates instead of measured memory.")
OVERRIDE = ("The %s draft pass fits at most %d requests within "           # config/vllm.py:2310
            "max_num_batched_tokens=%d. Overriding max_num_active_seqs "
            "from %d to %d.")
TENTATIVE = ("Auto-fit max_model_len: reduced from %d to %d to fit in "    # v1/core/kv_cache_planning.py:1478
             "available KV cache memory (%s)%s")
REDUCED = "--max-model-len auto reduced max_model_len from %d to %d (%s)."   # kv_cache_planning.py:1494

BLOCK_GIB = 8 / 1024          # 128 KiB per token x 64 tokens per block
WORKER = {"proc": "Worker_TP0 pid=9"}


def vllm_034_log(args: dict, *middle: str, extended: int | None = 7324, ctx: int = 4096, blocks: int = 7324) -> str:
    """A 0.34 GPU boot: the reservation, the measure after warmup, the settled size, the commit."""
    tokens = blocks * 64
    return (line(NON_DEFAULT, args, proc="APIServer pid=1", where="startup.py:96")
            + line(ENGINE, "0.34.0", f"model='m', dtype=torch.bfloat16, max_seq_len={ctx}, tensor_parallel_size=1, "
                   "kv_cache_dtype=auto, device_config=cuda", where="core.py:153")
            + line(MAX_MODEL_LEN, ctx, where="model.py:2214")
            + "".join(middle)
            + line(KV_MEMORY, "40.0", **WORKER, where="gpu_worker.py:795")
            + (line(AFTER_WARMUP, "60.1", "0.02", "2.9", "2.9", "0.0", blocks, f"{blocks * BLOCK_GIB:.2f}", "79.1",
                    "3.1", **WORKER, where="extensible_kv_cache.py:693") if extended else "")
            + line(KV_SIZE, "GPU", f"{tokens:,}", f"{ctx:,}", tokens / ctx, where="kv_cache_utils.py:1168")
            + (line(EXTENDED, extended, extended * BLOCK_GIB, **WORKER, where="extensible_kv_cache.py:536")
               if extended else "")
            + "(APIServer pid=1) INFO:     Application startup complete.\n")


DFLASH_ARGS = {"model": "/models/qwen3-8b", "max_num_seqs": 80, "max_num_batched_tokens": 8192,
               "speculative_config": {"method": "dflash", "num_speculative_tokens": 15}}
OVERRIDE_LINE = OVERRIDE % ("dflash", 64, 8192, 80, 64)
DFLASH_LOG = vllm_034_log(DFLASH_ARGS, line(OVERRIDE, "dflash", 64, 8192, 80, 64, proc="APIServer pid=1",
                                            where="vllm.py:2310"))
DFLASH_REASON = (f"max_running_requests is vLLM's max_num_active_seqs 64, lowered from 80 at boot: \"{OVERRIDE_LINE}\": "
                 "raise --max-num-batched-tokens (>= 10,240 admits 80 seats: 64 fit in 8,192)")
EXTENDED_LINE = EXTENDED % (7324, 7324 * BLOCK_GIB)


def test_the_logs_here_are_written_from_the_declared_0_34_formats() -> None:
    declared = {x.fmt: x for x in VLLM_LINES.values() if x.fmt}
    for fmt in (NON_DEFAULT, ENGINE, MAX_MODEL_LEN, KV_MEMORY, AFTER_WARMUP, KV_SIZE, REMAP, EXTENDED, DISABLING,
                OVERRIDE, TENTATIVE, REDUCED):
        assert fmt in declared, fmt
        assert declared[fmt].until is None, (fmt, declared[fmt].until)   # still printed by the newest release
    assert declared[OVERRIDE].since == "0.34.0" and declared[OVERRIDE].source == "vllm/config/vllm.py"
    assert declared[EXTENDED].source == "vllm/v1/worker/extensible_kv_cache.py"


def test_a_dflash_lane_gets_the_seats_the_engine_admits_with_the_line_and_the_flag_that_lifts_them() -> None:
    """The issue's DFlash lane: 80 seats asked, 64 admitted; never "raise --max-num-seqs"."""
    f = parse_boot_log(DFLASH_LOG)
    assert (f.engine, f.ready, f.problems) == ("vllm", True, [])
    assert (f.max_running_requests, f.requested_max_running_requests) == (64, 80)
    assert f.cap_reason == DFLASH_REASON
    assert "--max-num-seqs" not in f.cap_reason


def test_a_dspark_override_of_the_gpu_default_gives_seats_the_log_otherwise_never_says() -> None:
    f = parse_boot_log(vllm_034_log({"max_num_batched_tokens": 4096},
                                    line(OVERRIDE, "dspark", 256, 4096, 1024, 256, where="vllm.py:2310")))
    assert (f.max_running_requests, f.requested_max_running_requests) == (256, 1024)
    assert f.cap_reason.endswith("raise --max-num-batched-tokens (>= 16,384 admits 1024 seats: 256 fit in 4,096)")


def test_the_extensible_kv_pool_is_the_one_after_warmup_not_the_reservation() -> None:
    """40.00 GiB reserved before warmup; 57.22 GiB committed after it: the pool is 57.22 GiB."""
    f = parse_boot_log(vllm_034_log({"max_num_seqs": 256}))
    assert (f.kv_cache_memory_gib, f.kv_tokens, f.context_len) == (57.22, 468_736, 4096)
    assert f.kv_pools == [{"tokens": 468_736, "dtype": "bfloat16", "size_gb": 57.22}]
    assert f.max_concurrency == {"tokens_per_request": 4096, "factor": 114.44}
    assert f.sources == {"kv_cache_memory_gib": f'boot log, the extensible KV cache after warmup: "{EXTENDED_LINE}"; '
                                                "the 40.00 GiB before warmup was its reservation"}
    assert (f.max_running_requests, f.cap_reason) == (256, "max_running_requests is vLLM's --max-num-seqs 256: "
                                                            "raise --max-num-seqs")


def test_a_remapped_pool_says_so() -> None:
    f = parse_boot_log(vllm_034_log({}, extended=7324).replace(
        line(EXTENDED, 7324, 7324 * BLOCK_GIB, **WORKER, where="extensible_kv_cache.py:536"),
        line(REMAP, 7400, 7324, **WORKER, where="extensible_kv_cache.py:525")
        + line(EXTENDED, 7324, 7324 * BLOCK_GIB, **WORKER, where="extensible_kv_cache.py:536")))
    assert f.kv_cache_memory_gib == 57.22
    assert f.sources["kv_cache_memory_gib"] == (
        f'boot log, the extensible KV cache after warmup: "{EXTENDED_LINE}"; remapped from 7,400 to 7,324 blocks to '
        "fit the memory measured after warmup; the 40.00 GiB before warmup was its reservation")


def test_a_log_cut_before_the_commit_takes_the_measure_after_warmup() -> None:
    text = vllm_034_log({})
    cut = text[:text.index("Extended KV cache")].rsplit("\n", 1)[0] + "\n"
    f = parse_boot_log(cut)
    assert (f.kv_cache_memory_gib, f.ready) == (57.22, False)
    assert f.sources["kv_cache_memory_gib"].startswith("boot log, the extensible KV cache measured after warmup: "
                                                       "7,324 blocks fit")


def test_with_the_extensible_cache_disabled_the_reservation_is_the_pool() -> None:
    disabled = line(DISABLING, "another rank cannot use it", where="abstract.py:175")
    f = parse_boot_log(vllm_034_log({}, disabled, extended=None, blocks=5120))
    assert (f.kv_cache_memory_gib, f.kv_tokens) == (40.0, 327_680)
    assert f.sources == {"kv_cache_memory_gib": "boot log, the profiling estimate (vLLM disabled the extensible KV "
                                                "cache: another rank cannot use it)"}


def test_the_last_auto_fit_line_is_the_context_served() -> None:
    """0.34 fits the length twice under the extensible KV cache: before warmup (tentative), then after."""
    tentative = line(TENTATIVE, 131072, 65536, "40.0 GiB GPU", "; the final length is set after CUDA graph capture "
                     "and warmup", where="kv_cache_planning.py:1478")
    final = line(REDUCED, 65536, 61440, "57.22 GiB GPU left for the KV cache after CUDA graph capture and warmup",
                 where="kv_cache_planning.py:1494")
    log = vllm_034_log({"max_model_len": -1}, ctx=131072)
    at = log.index("(Worker_TP0 pid=9) INFO 11-29 14:28:17 [extensible_kv_cache.py:693]")
    f = parse_boot_log(log[:at] + tentative + log[at:] + final)
    assert f.context_len == 61440


def test_a_kv_limited_lane_without_gpu_memory_utilization_is_not_told_to_raise_it(unfold) -> None:
    """0.34: unset gpu_memory_utilization is 1.0 under the extensible KV cache; raising it is no knob."""
    f = parse_boot_log(vllm_034_log({"max_num_seqs": 8}, ctx=524288, blocks=7324))
    assert f.max_concurrency["factor"] < 1
    assert f.cap_reason.endswith("lower --max-model-len, capture fewer CUDA graph sizes or use more GPUs (the "
                                 "extensible KV cache already takes all memory left after warmup)")
    set_lower = parse_boot_log(vllm_034_log({"max_num_seqs": 8, "gpu_memory_utilization": 0.9}, ctx=524288))
    assert set_lower.cap_reason.endswith("raise --gpu-memory-utilization or lower --max-model-len")
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_seats(parse_boot_log(DFLASH_LOG), [16, 80], source="t")
    assert "seats < users @ 80 users | 64" in unfold(str(failed.value))


# -- as a user sees it: `glmf bootlog` and the boot suite ------------------------------------------


def _glmf_bootlog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_glmf.cli", "bootlog", *args], capture_output=True, text=True,
                          timeout=60)


def test_glmf_bootlog_on_a_0_34_dflash_log(tmp_path, unfold) -> None:
    log = tmp_path / "boot.log"
    log.write_text(DFLASH_LOG)
    proc = _glmf_bootlog(str(log))
    assert proc.returncode == 0, proc.stderr
    out = unfold(proc.stdout)
    assert "max_running_requests           | 64\n" in out
    assert "requested_max_running_requests | 80\n" in out
    assert f"kv_cache_memory_gib            | 57.22 GiB (boot log, the extensible KV cache after warmup: " \
           f"\"{EXTENDED_LINE}\"; the 40.00 GiB before warmup was its reservation)" in out
    assert "kv_pool[0]                     | 468,736 tokens, bfloat16, 57.22 GiB" in out
    assert f"cap_reason                     | {DFLASH_REASON}" in out
    data = json.loads(_glmf_bootlog(str(log), "--json").stdout)["gates"]["boot"]["facts"]
    assert (data["max_running_requests"], data["kv_cache_memory_gib"], data["kv_tokens"]) == (64, 57.22, 468_736)


def test_the_boot_suite_on_a_0_34_dflash_lane_names_the_cap_and_its_knob(pytester, vllm_gpu_server,  # noqa: F811
                                                                         unfold) -> None:
    (pytester.path / "vllm.log").write_text(DFLASH_LOG)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  dflash: {{engine: vllm, launcher: attach, "
                                             f"url: '{vllm_gpu_server}', boot_log: vllm.log}}\n")
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n  dflash:\n    boot:\n      kv_cache_memory_gib: {min: 50}\n    curve:\n      rows:\n"
        + "".join(f"        - {{users: {u}}}\n" for u in (1, 64, 80))))
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "dflash", "--glmf-thresholds",
                                           str(thresholds), "-p", "no:cacheprovider", "-k",
                                           "test_seats_cover_every_curve_row or test_boot_facts_meet_thresholds or "
                                           "test_boot_log_has_no_problems")
    result.assert_outcomes(passed=2, failed=1)
    out = unfold(result.stdout.str())
    assert "seats < users @ 80 users | 64" in out, out[-3000:]
    assert DFLASH_REASON in out
    assert "raise --max-num-seqs" not in out
