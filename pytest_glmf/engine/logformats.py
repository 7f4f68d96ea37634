"""SGLang's boot-log lines, per generation: what the simulator prints and what the boot parser reads.

Two generations are known:

- `nightly-2026-09`: the recipe's pinned image (lmsysorg/sglang:nightly-dev-cu13-20260911-00143e9c).
  Its lines are taken from real logs (tests/gates/boot/bootlogs) and the recipe: a
  `ServerArgs(...)` dump, `Using KV cache dtype`, `Capture cuda graph bs [...]`, and on the hybrid
  GLM-5 model two `KV Cache is allocated` lines (the MLA pool in bf16, the DSA indexer in fp8).
- `0.5.23`: the released `sglang` 0.5.23 package. Each line carries the file (inside the package)
  whose format string prints it and that string's skeleton (every expression as `{}`); the
  contract stage (tests/contract/test_boot_formats.py) finds the skeleton in the released source,
  so a version whose source changes a line fails naming the line.

A `LineFormat.template` is a `str.format` template with named fields; `render(generation, name,
**fields)` gives the message (without the `[time TP0]` prefix, which is the same in both:
sglang/srt/utils/common.py `configure_logger`, `[%(asctime)s{prefix}] %(message)s`).
"""
from __future__ import annotations

from dataclasses import dataclass

NIGHTLY = "nightly-2026-09"
V0_5_23 = "0.5.23"
GENERATIONS = (NIGHTLY, V0_5_23)

# Architectures SGLang 0.5.23 treats as DSA (sglang/srt/configs/model_config.py `is_deepseek_dsa`;
# with `index_topk` in their config). On these the KV pool is `DSATokenToKVPool`, which logs one
# `KV Cache is allocated` line for the MLA latent and the indexer keys together
# (sglang/srt/mem_cache/memory_pool.py: `MLATokenToKVPool` skips its own log when `use_dsa`).
DSA_ARCHITECTURES = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN",
    "Glm5NextForConditionalGenerationNextN", "Glm5NextForConditionalGeneration", "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN", "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN"})
# The recipe's GLM-5.3-Flash (linear attention + DSA): sglang/srt/models/glm5_next.py `EntryClass`.
GLM5_ARCHITECTURE = "Glm5NextForConditionalGeneration"

# KV pool layouts on a DSA model, as `BootFacts.kv_pool_layout` names them.
LAYOUT_TWO_POOLS = "dsa-two-pools"     # nightly-2026-09: MLA pool and indexer pool, one line each
LAYOUT_ONE_POOL = "dsa-one-pool"       # 0.5.23: one line; its dtype is the MLA pool's, the indexer is inside
LAYOUT_PLAIN = "one-pool-per-line"     # any other model: each line is one pool
LAYOUT_TEXT = {
    LAYOUT_TWO_POOLS: "two DSA pool lines, MLA and indexer (the recipe's nightly)",
    LAYOUT_ONE_POOL: ("one DSA pool line, MLA and indexer together; only the MLA dtype is printed, "
                      "the indexer keys are fp8 with scales (SGLang 0.5.23, sglang/srt/mem_cache/memory_pool.py "
                      "DSATokenToKVPool)"),
    LAYOUT_PLAIN: "one line per KV pool",
}


@dataclass(frozen=True)
class LineFormat:
    name: str
    template: str
    source: str | None = None      # 0.5.23: the file (inside the sglang package) that prints it
    skeleton: str | None = None    # 0.5.23: its format string there, every expression as {}


def _f(name: str, template: str, source: str | None = None, skeleton: str | None = None) -> LineFormat:
    return LineFormat(name, template, source, skeleton)


_SHARED_0523 = {
    "load_weight_begin": _f("load_weight_begin", "Load weight begin. avail mem={avail_gb:.2f} GB",
                            "sglang/srt/model_executor/model_runner.py", "Load weight begin. avail mem={} GB"),
    "load_weight_end": _f("load_weight_end", "Load weight end. elapsed={elapsed_s:.2f} s, type={arch}, "
                          "avail mem={avail_gb:.2f} GB, mem usage={usage_gb:.2f} GB.",
                          "sglang/srt/model_executor/model_runner.py",
                          "Load weight end. elapsed={} s, type={}, {}avail mem={} GB, mem usage={} GB."),
    "chat_template": _f("chat_template", "Using default HuggingFace chat template with detected content format: "
                        "{content_format}", "sglang/srt/parser/template_manager.py",
                        "Using default HuggingFace chat template with detected content format: {}"),
    "mamba_pool": _f("mamba_pool", "Mamba Cache is allocated. max_mamba_cache_size: {slots}, conv_state size: "
                     "{conv_gb:.2f}GB, ssm_state size: {ssm_gb:.2f}GB ", "sglang/srt/mem_cache/memory_pool.py",
                     "Mamba Cache is allocated. max_mamba_cache_size: {}, conv_state size: {}GB, ssm_state size: {}GB "),
    "mamba_pool_spec": _f("mamba_pool_spec", "Mamba Cache is allocated. max_mamba_cache_size: {slots}, conv_state "
                          "size: {conv_gb:.2f}GB, ssm_state size: {ssm_gb:.2f}GB intermediate_ssm_state_cache size: "
                          "{issm_gb:.2f}GB intermediate_conv_window_cache size: {iconv_gb:.2f}GB ",
                          "sglang/srt/mem_cache/memory_pool.py",
                          "Mamba Cache is allocated. max_mamba_cache_size: {}, conv_state size: {}GB, ssm_state size: "
                          "{}GB intermediate_ssm_state_cache size: {}GB intermediate_conv_window_cache size: {}GB "),
    "kv_pool": _f("kv_pool", "KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, KV size: {size_gb:.2f} GB",
                  "sglang/srt/mem_cache/memory_pool.py", "{} {}. dtype: {}, #tokens: {}, KV size: {} GB"),
    "kv_pool_kv": _f("kv_pool_kv", "KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, K size: "
                     "{k_gb:.2f} GB, V size: {v_gb:.2f} GB", "sglang/srt/mem_cache/memory_pool.py",
                     "{} {}. dtype: {}, #tokens: {}, K size: {} GB, V size: {} GB"),
    "memory_pool_end": _f("memory_pool_end", "Memory pool end. avail mem={avail_gb:.2f} GB",
                          "sglang/srt/mem_cache/kv_cache_configurator.py", "Memory pool end. avail mem={} GB"),
    "mamba_cap": _f("mamba_cap", "max_running_requests is capped to {seats} by the mamba state cache "
                    "(max_mamba_cache_size={slots}, {slots_per_request} state slots per request). To raise it: "
                    "increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
                    "--mamba-ssm-dtype bfloat16.", "sglang/srt/mem_cache/kv_cache_configurator.py",
                    "max_running_requests is capped to {} by the mamba state cache (max_mamba_cache_size={}, {} state "
                    "slots per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, "
                    "or halve the state size with --mamba-ssm-dtype bfloat16."),
    "kv_reduced": _f("kv_reduced", "max_running_requests was reduced from the requested {requested} to {seats} "
                     "(per dp worker) due to the available KV cache capacity.",
                     "sglang/srt/mem_cache/kv_cache_configurator.py",
                     "max_running_requests was reduced from the requested {} to {} (per dp worker) due to the "
                     "available KV cache capacity."),
    "post_capture": _f("post_capture", "Post-capture KV sizing: max_running_requests {before} -> {after}",
                       "sglang/srt/model_executor/model_runner_components/kv_pool_runtime.py",
                       "Post-capture KV sizing: max_running_requests {} -> {}"),
    "summary": _f("summary", "max_total_num_tokens={kv_tokens}, chunked_prefill_size={chunked_prefill_size}, "
                  "max_prefill_tokens={max_prefill_tokens}, max_running_requests={seats}, context_len={context_len}, "
                  "available_gpu_mem={avail_gb:.2f} GB", "sglang/srt/managers/scheduler.py",
                  "max_total_num_tokens={}, chunked_prefill_size={}, max_prefill_tokens={}, max_running_requests={}, "
                  "context_len={}, {}={} GB"),
    "ready": _f("ready", "The server is fired up and ready to roll!", "sglang/srt/entrypoints/http_server.py",
                "The server is fired up and ready to roll!"),
    "scheduler_exception": _f("scheduler_exception", "Scheduler hit an exception: {traceback}",
                              "sglang/srt/managers/scheduler.py", "Scheduler hit an exception: {}"),
    "sigquit": _f("sigquit", "Received sigquit from a child process. It usually means the child failed.",
                  "sglang/srt/entrypoints/engine.py",
                  "Received sigquit from a child process. It usually means the child failed."),
    "not_enough_memory": _f("not_enough_memory", "Not enough memory. Please try to increase --mem-fraction-static.",
                            "sglang/srt/model_executor/pool_configurator.py",
                            "Not enough memory. Please try to increase --mem-fraction-static."),
    # every call of the old endpoint names logs this WARNING (the project probes the new names first)
    "deprecated_get_model_info": _f("deprecated_get_model_info", "Endpoint '/get_model_info' is deprecated and will "
                                    "be removed in a future version. Please use '/model_info' instead.",
                                    "sglang/srt/entrypoints/http_server.py",
                                    "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                                    "Please use '/model_info' instead."),
    "deprecated_get_server_info": _f("deprecated_get_server_info", "Endpoint '/get_server_info' is deprecated and "
                                     "will be removed in a future version. Please use '/server_info' instead.",
                                     "sglang/srt/entrypoints/http_server.py",
                                     "Endpoint '/get_server_info' is deprecated and will be removed in a future "
                                     "version. Please use '/server_info' instead."),
    "decode_batch": _f("decode_batch", "Decode batch, #running-req: {running}, {usage}",
                       "sglang/srt/managers/scheduler_components/metrics_reporter.py",
                       "Decode batch{}, #running-req: {}, {}"),
}

FORMATS: dict[str, dict[str, LineFormat]] = {
    V0_5_23: {
        **_SHARED_0523,
        # sglang/srt/entrypoints/engine.py: f"server_args={_server_args_for_logging(server_args)}",
        # a dict (ServerArgs.resolved_dict()), printed with repr
        "server_args": _f("server_args", "server_args={args_dict!r}", "sglang/srt/entrypoints/engine.py",
                          "server_args={}"),
        "tree_cache": _f("tree_cache", "Tree cache initialized: source={source} impl={impl} hybrid_swa={swa} "
                         "hybrid_ssm={ssm} hicache_attached={hicache}", "sglang/srt/mem_cache/registry.py",
                         "Tree cache initialized: source={} impl={} hybrid_swa={} hybrid_ssm={} hicache_attached={}"),
        # capture_name is "{target|draft} {decode|verify}"; the bucket list is on the end line
        "graph_begin": _f("graph_begin", "Capture {capture_name} CUDA graph begin. backend={backend}, "
                          "num_tokens_per_req={tokens_per_req}, avail mem={avail_gb:.2f} GB",
                          "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py",
                          "Capture {} {} begin. backend={}, num_tokens_per_req={}, avail mem={} GB"),
        "graph_end": _f("graph_end", "Capture {capture_name} CUDA graph end. bs={bs}, elapsed={elapsed_s:.2f} s, "
                        "mem usage={usage_gb:.2f} GB, avail mem={avail_gb:.2f} GB.",
                        "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py",
                        "Capture {} {} end. bs={}, elapsed={} s, mem usage={} GB, avail mem={} GB."),
        # --enable-unified-memory on a hybrid Mamba model (init_unified_mamba_pools): one byte buffer for
        # the KV and the state pools; no `Mamba Cache is allocated` line, the slot count is on this one
        "unified_mamba_banner": _f("unified_mamba_banner", "[unified-memory-pool] UNIFIED MEMORY POOL ENABLED -- "
                                   "path=Mamba hybrid ({full_side} full side)", "sglang/srt/mem_cache/unified_memory_pool.py",
                                   "[unified-memory-pool] UNIFIED MEMORY POOL ENABLED -- path=Mamba hybrid ({} full side)"),
        "unified_mamba_pool": _f("unified_mamba_pool", "[unified-memory-pool]   total_bytes={total_bytes}, "
                                 "max_total_num_tokens={kv_tokens}, max_mamba_cache_size={slots}, "
                                 "max_num_reqs={max_num_reqs}, speculative_num_draft_tokens={draft_tokens}",
                                 "sglang/srt/mem_cache/unified_memory_pool.py",
                                 "[unified-memory-pool]   total_bytes={}, max_total_num_tokens={}, max_mamba_cache_size={}, "
                                 "max_num_reqs={}, speculative_num_draft_tokens={}"),
        # SGLANG_ENABLE_POST_CAPTURE_KV_SIZING (non-MLA models): before capture the pool line is a
        # reservation; after capture the pool is resized and logged again
        "kv_pool_va": _f("kv_pool_va", "KV Cache VA upper bound. dtype: {dtype}, #tokens: {tokens}, KV size: "
                         "{size_gb:.2f} GB", "sglang/srt/mem_cache/memory_pool.py",
                         "{} {}. dtype: {}, #tokens: {}, KV size: {} GB"),
        "post_capture_layers": _f("post_capture_layers", "Post-capture KV sizing: full_layer_tokens={full_tokens}, "
                                  "swa_layer_tokens={swa_tokens}",
                                  "sglang/srt/model_executor/model_runner_components/kv_pool_runtime.py",
                                  "Post-capture KV sizing: full_layer_tokens={}, swa_layer_tokens={}"),
        "post_capture_kv": _f("post_capture_kv", "Post-capture KV sizing: KV cache allocated. dtype: {dtype}, "
                              "#tokens: {tokens}, KV size: {size_gb:.2f} GB, avail mem={avail_gb:.2f} GB",
                              "sglang/srt/model_executor/model_runner_components/kv_pool_runtime.py",
                              "Post-capture KV sizing: KV cache allocated. dtype: {}, #tokens: {}, KV size: {} GB, "
                              "avail mem={} GB"),
    },
    NIGHTLY: {
        **{k: LineFormat(v.name, v.template) for k, v in _SHARED_0523.items()},
        "server_args": _f("server_args", "server_args=ServerArgs({args_kv})"),
        "init_dist_begin": _f("init_dist_begin", "Init torch distributed begin."),
        "init_dist_end": _f("init_dist_end", "Init torch distributed ends. mem usage={usage_gb:.2f} GB"),
        "kv_dtype": _f("kv_dtype", "Using KV cache dtype: {dtype}"),
        "tree_cache": _f("tree_cache", "Tree cache initialized: source={source} impl={impl} hybrid_swa={swa} "
                         "hybrid_ssm={ssm} hierarchical=False streaming_wrapped=False"),
        "graph_begin": _f("graph_begin", "Capture cuda graph begin. This can take up to several minutes. "
                          "avail mem={avail_gb:.2f} GB"),
        "graph_bs": _f("graph_bs", "Capture cuda graph bs {bs}"),
        "graph_end": _f("graph_end", "Capture cuda graph end. Time elapsed: {elapsed_s:.2f} s. mem usage="
                        "{usage_gb:.2f} GB. avail mem={avail_gb:.2f} GB."),
    },
}


def render(generation: str, name: str, **fields: object) -> str:
    """One message of `generation`'s line `name` (KeyError names both when unknown)."""
    try:
        fmt = FORMATS[generation][name]
    except KeyError:
        raise KeyError(f"no line {name!r} in SGLang generation {generation!r} "
                       f"(generations: {', '.join(GENERATIONS)})") from None
    return fmt.template.format(**fields)


def has(generation: str, name: str) -> bool:
    return name in FORMATS[generation]
