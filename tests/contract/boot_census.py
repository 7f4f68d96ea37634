"""The census of SGLang 0.5.23's boot-log format strings that carry a fact the boot gate reports.

Scope: every logging call (tests/contract/sources.py `logged_formats`) in the scheduler, the memory
and KV pools and the model runner of the released package (`SCOPE`: sglang/srt/managers,
sglang/srt/mem_cache, sglang/srt/model_executor, which holds model_runner_components/ and the graph
runners) whose format string mentions a fact's keyword (`KEYWORDS`: max_running_requests,
max_total_num_tokens, max_total_tokens, max_num_reqs, #tokens, KV cache, mamba, context_len, cuda graph, bs=).

Each entry is one (file, skeleton) and one or more readings: a rendering with sample values (one per
`{}`) and the facts `parse_boot_log` gives for that line alone (the BootFacts keys besides `engine`
that differ from an empty log's), or no facts and the reason the line carries none. The stage
(test_boot_census.py) fails on a format string of the source that is not here ("new boot line"),
on an entry the source no longer has, and on a reading whose facts the parser does not give.

The facts' numbers are the sample values themselves (the known truth); a pool's `size_gb` is the
sum of the sizes on its line, as SGLang prints them (GiB).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sources import logged_formats

SCOPE = ("sglang/srt/managers", "sglang/srt/mem_cache", "sglang/srt/model_executor")
KEYWORDS = re.compile(r"max_running_requests|max_total_num_tokens|max_total_tokens|max_num_reqs|#tokens|KV cache|mamba|"
                      r"context_len|cuda graph|\bbs=", re.I)
HERE = "tests/contract/boot_census.py"


@dataclass(frozen=True)
class Reading:
    sample: tuple[Any, ...]                       # one value per `{}` of the skeleton
    facts: dict[str, Any] = field(default_factory=dict)
    why_none: str = ""                            # required when `facts` is empty


@dataclass(frozen=True)
class Entry:
    source: str        # the file inside the installed package
    skeleton: str      # its format string, every expression as `{}` (sources.py)
    readings: tuple[Reading, ...]

    def render(self, reading: Reading) -> str:
        return self.skeleton.format(*reading.sample)


def yields(source: str, skeleton: str, sample: tuple[Any, ...], **facts: Any) -> Entry:
    return Entry(source, skeleton, (Reading(sample, facts),))


def none(source: str, skeleton: str, why: str, sample: tuple[Any, ...] | None = None) -> Entry:
    """A line that carries no boot fact; the sample defaults to `7` per field."""
    return Entry(source, skeleton, (Reading(sample if sample is not None else (7,) * skeleton.count("{}"), {}, why),))


def pool(tokens: int, dtype: str, size_gb: float) -> dict[str, Any]:
    """The facts of one plain KV pool line read alone (no `Load weight end`: not a DSA model)."""
    return {"kv_pools": [{"tokens": tokens, "dtype": dtype, "size_gb": size_gb}], "kv_pool_layout": "one-pool-per-line",
            "kv_cache_memory_gib": size_gb, "kv_tokens": tokens}


MANAGERS = "sglang/srt/managers/"
MEM = "sglang/srt/mem_cache/"
UNIFIED = MEM + "unified_memory_pool.py"
POOL = MEM + "memory_pool.py"
CONFIGURATOR = MEM + "kv_cache_configurator.py"
GRAPHS = "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py"
POST = "sglang/srt/model_executor/model_runner_components/kv_pool_runtime.py"
PREFILL_GRAPHS = "sglang/srt/model_executor/runner/prefill_cuda_graph_runner.py"

MAMBA_ADVICE = "increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with " \
               "--mamba-ssm-dtype bfloat16"
KV_ADVICE = "raise --mem-fraction-static or lower --context-length"
NO_PREFILL_GRAPH = "the prefill CUDA graph is switched off; cuda_graph_bs are the decode graph's batch sizes"
UNIFIED_GEOMETRY = "the unified pool's layout; its facts are on the `total_bytes=` line"

CENSUS: tuple[Entry, ...] = (
    # --- scheduler
    yields(MANAGERS + "scheduler.py",
           "max_total_num_tokens={}, chunked_prefill_size={}, max_prefill_tokens={}, max_running_requests={}, "
           "context_len={}, {}={} GB",
           (597120, 8192, 16384, 9, 1048576, "available_gpu_mem", "37.50"),
           kv_tokens=597120, max_running_requests=9, context_len=1048576),
    none(MANAGERS + "utils.py",
         "Request length is longer than the KV cache pool size or the max context length. Truncated. "
         "len(req.origin_input_ids)={}, max_req_input_len={}.",
         "a request truncated at run time, not a boot fact", (2000000, 1048575)),
    # --- unified memory pool (--enable-unified-memory)
    none(MEM + "allocator/unified_hybrid_swa.py",
         "[unified-memory-pool] UnifiedMambaSWATokenToKVPoolAllocator ready: chain=[mamba(up) | swa(float) | "
         "full(down)], mamba max_slots={} (entry_bytes={}), joint available={}",
         "the allocator's slots (max_mamba_cache_size + 1, slot 0 reserved); the tri-pool `total_bytes=` line "
         "gives max_mamba_cache_size", (641, 3145728, 120000)),
    none(MEM + "allocator/unified_mamba.py",
         "[unified-memory-pool] UnifiedMambaTokenToKVPoolAllocator ready: full max_slots={} (min_slot_index={}, "
         "page_size={}, num_pages={}), mamba max_slots={} (min_slot_index={}), full_available={}, mamba_available={}",
         "the allocator's slots (one reserved); the `total_bytes=` line gives max_mamba_cache_size",
         (597184, 64, 64, 9331, 641, 1, 597120, 640)),
    none(UNIFIED, "[unified-memory-pool] UnifiedMambaPool({}) wrapped unified buffer: max_slots={}, num_mamba_layers={}",
         "max_slots is max_mamba_cache_size + 1 (slot 0 reserved); the `total_bytes=` line gives the size",
         ("mamba", 641, 60)),
    none(UNIFIED, "[unified-memory-pool] UNIFIED MEMORY POOL ENABLED -- path=Mamba hybrid ({} full side)",
         "names the pool's path; " + UNIFIED_GEOMETRY, ("MLA",)),
    none(UNIFIED, "[unified-memory-pool]   full_layers={}, mamba_layers={}, kv_lora_rank={}, qk_rope_head_dim={}, "
         "page_size={} (token-major views, entry_bytes={} B)", UNIFIED_GEOMETRY, (15, 60, 512, 64, 64, 1152)),
    none(UNIFIED, "[unified-memory-pool]   full_layers={}, mamba_layers={}, head_num={}, head_dim={}, page_size={}, "
         "is_draft_worker={} ({})", UNIFIED_GEOMETRY,
         (12, 36, 2, 256, 64, False, "token-major views, entry_bytes=2048 B")),
    yields(UNIFIED, "[unified-memory-pool]   total_bytes={}, max_total_num_tokens={}, max_mamba_cache_size={}, "
           "max_num_reqs={}, speculative_num_draft_tokens={}",
           # max_total_num_tokens is the summary line's; max_num_reqs is the request pool, not the seats
           (48318382080, 597120, 640, 128, None), max_mamba_cache_size=640),
    none(UNIFIED, "[unified-memory-pool]   mamba_full_memory_ratio={} governs the total budget only, not the runtime "
         "split.", "the flag's value, echoed", (0.9,)),
    none(UNIFIED, "[unified-memory-pool] UNIFIED MEMORY POOL ENABLED -- path=SWA+Mamba tri-pool",
         "names the pool's path; " + UNIFIED_GEOMETRY, ()),
    yields(UNIFIED, "[unified-memory-pool]   total_bytes={} (={} GB), full_max={}, swa_max={}, max_mamba_cache_size={}, "
           "max_num_reqs={}, joint_available={}",
           (48318382080, "45.00", 400000, 100000, 256, 128, 500000), max_mamba_cache_size=256),
    # --- pools
    none(MEM + "buffer_mode/pipeline.py",
         "BufferModePipeline anchor_lock_cap_tokens=0 (pool={}, max_context_len={}): every prefetch launches with "
         "its splice base unpinned. Shrink --context-length or grow the KV pool.",
         "a HiCache buffer-mode prefetch warning; context_len is the summary line's", (4096, 131072)),
    none(MEM + "deepseek_v4_memory_pool.py",
         "Initialize DeepSeekV4TokenToKVPool with max_num_reqs={} swa_size={} c4_size={} c4_logical_size={} "
         "c128_size={} c4_state_pool_size={} c128_state_pool_size={} unified={} unified_fp8={}",
         "DeepSeek-V4's pool geometry per compression level; its request pool is not the seats",
         (128, 65536, 262144, 1048576, 8192, 256, 256, False, False)),
    none(CONFIGURATOR, "SWA ring: swa_max_total_num_tokens {} -> {} (fixed per-request SWA ring capacity).",
         "the sliding-window pool's resize; kv_tokens is the summary line's full pool", (200000, 131072)),
    yields(CONFIGURATOR,
           "max_running_requests is capped to {} by the mamba state cache (max_mamba_cache_size={}, {} state slots "
           "per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
           "state size with --mamba-ssm-dtype bfloat16.", (9, 48, 5),
           max_running_requests=9, max_mamba_cache_size=48, state_slots_per_request=5,
           cap_reason="max_running_requests capped to 9 by the mamba state cache (max_mamba_cache_size=48, 5 state "
                      f"slots per request): {MAMBA_ADVICE}"),
    yields(CONFIGURATOR,
           "max_running_requests was reduced from the requested {} to {} (per dp worker) due to the available KV "
           "cache capacity.", (74, 26),
           max_running_requests=26, requested_max_running_requests=74,
           cap_reason="max_running_requests reduced from the requested 74 to 26 by the available KV cache capacity: "
                      f"{KV_ADVICE}"),
    Entry(CONFIGURATOR, "max_total_tokens={} is larger than the profiled value {}. Use the profiled value instead.", (
        Reading((131072, -561981), {"problems": ["line 1: max_total_tokens=131072 is larger than the profiled value "
                                                 "-561981. Use the profiled value instead."]}),
        Reading((4000000, 3604480), {}, "--max-total-tokens above what fits: the summary line gives the pool used"),
    )),
    none(MEM + "kv_cache_dtype.py", "{} KV Cache might lead to an accuracy drop!",
         "a warning about the flag; the pool line prints the dtype", ("NVFP4",)),
    none(MEM + "kv_cache_dtype.py",
         "DFLASH fa4 draft: overriding KV cache dtype {} -> {} (fa4 needs K.dtype == Q.dtype; cannot read the "
         "target's quantized KV).", "the drafter's KV dtype; the gate reports the target's pools",
         ("torch.float8_e4m3fn", "torch.bfloat16")),
    none(MEM + "mamba_checkpoint_pool.py",
         "int8 mamba checkpoint pool: {} slots, {}GB (qdata {} + scale {} + conv {}); active mamba pool {} slots{}",
         "the radix cache's checkpoint pool; max_mamba_cache_size is the `Mamba Cache is allocated` line's",
         (512, "3.10", "2.40", "0.30", "0.40", 48, "")),
    none(MEM + "mamba_checkpoint_pool.py",
         "int8 mamba checkpoint pool ({}GB) is allocated from --mem-fraction-static headroom and is not reflected in "
         "max_total_num_tokens; ensure headroom covers it.", "advice about headroom", ("3.10",)),
    yields(POOL, "Mamba Cache is allocated. max_mamba_cache_size: {}, conv_state size: {}GB, ssm_state size: {}GB "
           "intermediate_ssm_state_cache size: {}GB intermediate_conv_window_cache size: {}GB ",
           (48, "0.06", "6.34", "9.74", "0.20"), max_mamba_cache_size=48),
    yields(POOL, "Mamba Cache is allocated. max_mamba_cache_size: {}, conv_state size: {}GB, ssm_state size: {}GB ",
           (640, "0.77", "42.24"), max_mamba_cache_size=640),
    none(POOL, "Warmed fused Mamba slot copy kernel in {} ms", "a kernel warm-up time", ("12.5",)),
    Entry(POOL, "{} {}. dtype: {}, #tokens: {}, K size: {} GB, V size: {} GB", (
        Reading(("KV Cache", "is allocated", "torch.bfloat16", 1048576, "12.00", "12.00"),
                pool(1048576, "bfloat16", 24.0)),
        Reading(("Full KV Cache", "is allocated", "torch.float8_e4m3fn", 400000, "1.50", "1.50"),
                pool(400000, "float8_e4m3fn", 3.0)),
        Reading(("KV Cache", "VA upper bound", "torch.bfloat16", 1048576, "12.00", "12.00"), {},
                "post-capture KV sizing's reservation before capture; the pool is the `Post-capture KV sizing: KV "
                "cache allocated` line"),
    )),
    Entry(POOL, "{} {}. dtype: {}, #tokens: {}, KV size: {} GB", (
        Reading(("KV Cache", "is allocated", "torch.float8_e4m3fn", 597120, "3.45"), pool(597120, "float8_e4m3fn", 3.45)),
        Reading(("SWA KV Cache", "is allocated", "torch.bfloat16", 100000, "0.80"), pool(100000, "bfloat16", 0.8)),
        Reading(("KV Cache", "VA upper bound", "torch.bfloat16", 1048576, "24.00"), {},
                "post-capture KV sizing's reservation before capture; the pool is the `Post-capture KV sizing: KV "
                "cache allocated` line"),
    )),
    none(POOL, "KV Cache skipped (no-op pool). Logical #tokens: {}, physical K/V size: ~{} KB placeholder",
         "no KV pool is allocated (a prefill-only no-op pool): kv_pools stays empty", (1048576, 4)),
    none(MEM + "pool_host/mamba.py", "Allocating {} GB host memory for hierarchical Mamba cache ({} state slots, "
         "layout={}).", "HiCache's host (CPU) tier, not the GPU state pool", ("64.00", 4096, "layer_first")),
    none(MEM + "pool_host/mamba.py", "NPU HiCache Mamba state transfer mode: sync torch fallback.",
         "an NPU transfer mode"),
    none(MEM + "pool_host/mamba.py", "NPU HiCache Mamba state transfer mode: native async.", "an NPU transfer mode"),
    none(MEM + "storage/flexkv/flexkv_connector.py", "[FlexKV] Registered KV caches to server {}",
         "an external KV store's registration", ("127.0.0.1:6000",)),
    none(MEM + "storage/lmcache/lmcache_unified_radix_cache.py",
         "LMCache store skipped for {}: no Mamba checkpoint at token {}", "a run-time cache event", ("req-1", 4096)),
    # --- model runner, CUDA graphs, post-capture KV sizing
    none("sglang/srt/model_executor/model_runner.py", "Decode CUDA graphs already captured; skipping re-capture.",
         "a disaggregation role switch after boot"),
    none("sglang/srt/model_executor/model_runner.py",
         "Enabling decode CUDA graph on role switch (was disabled at startup).",
         "a disaggregation role switch after boot"),
    none(GRAPHS, "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (e.g. via "
         "--cuda-graph-backend-prefill=disabled or auto-disable rules).", NO_PREFILL_GRAPH),
    none(GRAPHS, "Disable prefill CUDA graph for EAGLE target on tc_piecewise to avoid FP4/MoE decode-replay "
         "corruption (#28386).", NO_PREFILL_GRAPH),
    none(GRAPHS, "Disable prefill CUDA graph because the current LoRA configuration does not support it (unsupported "
         "LoRA backend, MoE LoRA without full or breakable capture, or DP attention).", NO_PREFILL_GRAPH),
    none(GRAPHS, "Disable prefill CUDA graph because the model is not a language model", NO_PREFILL_GRAPH),
    none(GRAPHS, "Disable prefill CUDA graph because the capture size is not set", NO_PREFILL_GRAPH),
    none(GRAPHS, "Disable prefill CUDA graph because pipeline parallelism combined with prefill context parallelism "
         "is not validated.", NO_PREFILL_GRAPH),
    none(GRAPHS, "Disable prefill CUDA graph capture because no configured capture size fits backend={} with "
         "max_capture_tokens={} (max_capture_requests={}, context_length={}, request-pool size={}).",
         NO_PREFILL_GRAPH, ("full", 8192, 16, 1048576, 128)),
    none(GRAPHS, "Disable {} prefill CUDA graph because the {} model does not have a 'layers' attribute",
         NO_PREFILL_GRAPH, ("draft", "draft")),
    none(GRAPHS, "Disable prefill CUDA graph because some layers do not apply Standard GQA", NO_PREFILL_GRAPH),
    none(GRAPHS, "Capture {} CUDA graph begin. backend={}, num_tokens={}, avail mem={} GB",
         "the prefill graph's start; it is captured per token count, not batch size",
         ("target prefill", "full", "[512, 1024, 2048]", "41.61")),
    none(GRAPHS, "Capture {} CUDA graph end. elapsed={} s, mem usage={} GB, avail mem={} GB.",
         "the prefill graph's end: no batch sizes", ("target prefill", "3.10", "1.20", "40.41")),
    Entry(GRAPHS, "Capture {} {} end. bs={}, elapsed={} s, mem usage={} GB, avail mem={} GB.", (
        Reading(("target decode", "CUDA graph", [1, 2, 4, 8, 16], "6.20", "4.11", "37.50"),
                {"cuda_graph_bs": [1, 2, 4, 8, 16]}),
        Reading(("target verify", "CUDA graph", [1, 2, 4, 8], "6.20", "4.11", "37.50"), {"cuda_graph_bs": [1, 2, 4, 8]}),
        Reading(("draft decode", "CUDA graph", [1, 2, 4, 8], "1.10", "0.40", "37.10"), {},
                "the drafter's graphs; cuda_graph_bs are the target's"),
    )),
    none(POST, "Post-capture KV sizing: decode CUDA graph max_bs={} < max_running_requests={}; reserving activation "
         "headroom", "a headroom note; a cap it causes is the `max_running_requests {} -> {}` line", (16, 48)),
    yields(POST, "Post-capture KV sizing: max_running_requests {} -> {}", (30, 26),
           max_running_requests=26,
           cap_reason=f"max_running_requests capped to 26 by the post-capture KV sizing (from 30): {KV_ADVICE}"),
    yields(POST, "Post-capture KV sizing: KV cache allocated. dtype: {}, #tokens: {}, KV size: {} GB, avail mem={} GB",
           ("torch.bfloat16", 786432, "18.00", "6.20"), **pool(786432, "bfloat16", 18.0)),
    none(POST, "Post-capture KV sizing: draft KV cache allocated. dtype: {}, #tokens: {}, KV size: {} GB",
         "the drafter's pool; the gate reports the target's", ("torch.bfloat16", 786432, "1.50")),
    none("sglang/srt/model_executor/model_runner_components/load_model_utils.py", "Loaded KV cache scaling factors "
         "from {}", "FP8 KV scales' file; the pool line prints the dtype", ("/models/kv_scales.json",)),
    none("sglang/srt/model_executor/model_runner_components/load_model_utils.py", "Using FP8 KV cache but no scaling "
         "factors provided. Defaulting to scaling factors of 1.0.", "FP8 KV scales; the pool line prints the dtype"),
    none("sglang/srt/model_executor/model_runner_components/startup_weight_load.py",
         "Load weight end. Committed real weights after CUDA graph capture in {} s (capture overlap window {} s, "
         "startup overlap total {} s)", "weight-load timing (no `type=`: the architecture is the first `Load "
         "weight end` line's)", ("2.10", "5.00", "7.10")),
    none(PREFILL_GRAPHS, "Prefill CUDA graph replays contexts up to {} tokens, the attention backend's default; longer "
         "contexts run eager prefill.", "the prefill graph's reach, not the model's context_len", (8192,)),
    none(PREFILL_GRAPHS, "Full prefill CUDA graph cached-prefix chunks: {} aggregate tokens/chunk ({}/request x {} "
         "slots), variants={} ({})", "the prefill graph's chunking", (8192, 512, 16, 2, "cached, fresh")),
    none(PREFILL_GRAPHS, "Prefill CP breakable CUDA graph enabled: strategy={}, cp_size={}",
         "context-parallel prefill graphs", ("zigzag", 2)),
    none(PREFILL_GRAPHS, "Ignoring prefill CUDA graph max context size {} for {}; this path does not yet preserve the "
         "fixed metadata extent.", "the prefill graph's reach", (8192, "tc_piecewise")),
    none(PREFILL_GRAPHS, "Prefill CUDA graph captured a DP gather/scatter; DP ranks will replay a shared MAX_LEN bucket.",
         "data-parallel prefill graphs"),
    none(PREFILL_GRAPHS, "Capturing {} prefill CUDA graph token shapes with fixed max_context_size={} (before execution "
         "variants).", "the prefill graph's token shapes", (8, 8192)),
    none("sglang/srt/model_executor/runner_backend/cuda_graph_dedup_mixin.py", "captured {} CUDA graphs, deduped to {} "
         "execs", "a graph count, not the batch sizes", (20, 12)),
)


def scan(package_parent: Path) -> tuple[list[str], dict[tuple[str, str], list[int]]]:
    """The files of `SCOPE` under `package_parent` (relative names) and, per (file, skeleton) whose format
    string mentions a keyword, the lines of its logging calls."""
    files: list[str] = []
    found: dict[tuple[str, str], list[int]] = {}
    for scope in SCOPE:
        for path in sorted((package_parent / scope).rglob("*.py")):
            name = path.relative_to(package_parent).as_posix()
            files.append(name)
            for line, skeleton in logged_formats(path):
                if KEYWORDS.search(skeleton):
                    found.setdefault((name, skeleton), []).append(line)
    return files, found


def census_problems(files: list[str], found: dict[tuple[str, str], list[int]],
                    census: tuple[Entry, ...] = CENSUS) -> list[str]:
    """One line per format string of the source not in the census, and per entry (of a scanned file)
    that the source no longer has."""
    known = {(e.source, e.skeleton) for e in census}
    out = [f"new boot line in {src}:{lines[0]}: {sk!r}: add it to the census ({HERE})"
           for (src, sk), lines in sorted(found.items(), key=lambda kv: (kv[0][0], kv[1][0])) if (src, sk) not in known]
    scanned = set(files)
    out += [f"census entry no longer in {e.source}: {e.skeleton!r}: remove it from the census ({HERE}) or pin the "
            f"new format" for e in census if e.source in scanned and (e.source, e.skeleton) not in found]
    out += [f"census entry for {e.source}, which the installed sglang does not have: {e.skeleton!r}"
            for e in census if e.source not in scanned]
    return out
