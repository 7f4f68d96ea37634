"""vLLM's boot log -> BootFacts.

vLLM prints no effective cap. Its scheduler admits at most `max_num_seqs` sequences; the KV cache
only limits how many *full-length* requests fit (`Maximum concurrency ... Fx`), shorter requests
share it. So `max_running_requests` = `--max-num-seqs` when `non-default args` shows it, else
vLLM's default when the log tells which one applies (CPU: 128 x world size, capped by
max_num_batched_tokens; vllm/engine/arg_utils.py `get_batch_defaults`); on GPU the default depends
on the card (1024 on >= 70 GiB non-A100, else 256), which the log does not say: null, and
`cap_reason` says so. `cap_reason` also names the KV limit when fewer full-length requests fit.
`auto` KV dtype is reported as the model dtype; `size_gb` is the KV cache memory in GiB.
"""
from __future__ import annotations

import re

from pytest_glmf.engine.logformats import LAYOUT_PLAIN
from pytest_glmf.gates.boot.facts import BootFacts, LogLine, find_line, parse_int, torch_dtype_name

_VLLM_KVTOK = re.compile(r"(?P<dev>GPU|CPU) KV cache size: (?P<tok>[\d,]+) tokens")
_VLLM_KVTOK_V0 = re.compile(r"maximum number of tokens that can be stored in KV cache \((\d+)\)")
_VLLM_BLOCKS = re.compile(r"# GPU blocks: (?P<gpu>\d+)(?:, # CPU blocks: (?P<cpu>\d+))?")
_VLLM_CONC = re.compile(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x")
_VLLM_MEM = [
    re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    re.compile(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache"),          # CPU backend
    re.compile(r"the rest of the memory reserved for KV Cache is ([\d.]+)\s*GiB"),  # V0
    re.compile(r"\bkv_cache_size=([\d.]+)\s*GiB"),                                  # V0 profiling
]
_VLLM_CTX = [
    re.compile(r"Using max model len (\d+)"),
    re.compile(r"\bmax_seq_len=(\d+)"),
    re.compile(r"The model's max seq len \((\d+)\)"),
]
_VLLM_NONDEFAULT = re.compile(r"non-default args: (\{.*)")
_VLLM_CONFIG = re.compile(r"Initializing a V\d LLM engine|LLM engine \(v[\d.]")
VLLM_READY = re.compile(r"Application startup complete|\"(?:GET|POST) /\S* HTTP/[\d.]+\" 200")


def _dict_int(text: str, key: str) -> int | None:
    m = re.search(rf"'{key}': (\d+)", text)
    return int(m.group(1)) if m else None


def parse_vllm(lines: list[LogLine], facts: BootFacts) -> None:
    nondefault = find_line(lines, _VLLM_NONDEFAULT)
    args = nondefault[1].group(1) if nondefault else ""
    facts.requested_max_running_requests = _dict_int(args, "max_num_seqs")
    config = find_line(lines, _VLLM_CONFIG)
    config_msg = config[0].msg if config else ""

    device = None
    if kv := find_line(lines, _VLLM_KVTOK):
        facts.kv_tokens, device = parse_int(kv[1].group("tok")), kv[1].group("dev")
    elif kv0 := find_line(lines, _VLLM_KVTOK_V0):
        facts.kv_tokens = int(kv0[1].group(1))
    if device is None and ("device_config=cpu" in config_msg
                           or any("cpu_worker.py" in ln.msg or "CPU KV cache" in ln.msg for ln in lines)):
        device = "CPU"

    if conc := find_line(lines, _VLLM_CONC):
        facts.max_concurrency = {"tokens_per_request": parse_int(conc[1].group("len")),
                                 "factor": float(conc[1].group("x"))}
    for pattern in _VLLM_MEM:
        if mem := find_line(lines, pattern):
            facts.kv_cache_memory_gib = float(mem[1].group(1))
            break
    for pattern in _VLLM_CTX:
        if ctx := find_line(lines, pattern):
            facts.context_len = int(ctx[1].group(1))
            break
    if facts.context_len is None and facts.max_concurrency:
        # vLLM prints the concurrency for max_model_len-token requests
        facts.context_len = facts.max_concurrency["tokens_per_request"]

    if facts.kv_tokens is not None:
        kv_dtype = re.search(r"\bkv_cache_dtype=([\w.]+)", config_msg)
        model_dtype = re.search(r"\bdtype=([\w.]+)", config_msg)
        dtype = kv_dtype.group(1) if kv_dtype else None
        if dtype == "auto":  # auto: the KV cache uses the model's dtype
            dtype = model_dtype.group(1) if model_dtype else None
        facts.kv_pools = [{"tokens": facts.kv_tokens, "dtype": torch_dtype_name(dtype),
                           "size_gb": facts.kv_cache_memory_gib}]
        facts.kv_pool_layout = LAYOUT_PLAIN

    if m := re.search(r"'cudagraph_capture_sizes': \[([\d,\s]*)\]", config_msg):
        facts.cuda_graph_bs = sorted(int(x) for x in re.findall(r"\d+", m.group(1)))

    blocks = find_line(lines, _VLLM_BLOCKS)
    booted = (facts.kv_tokens is not None or facts.max_concurrency is not None
              or facts.kv_cache_memory_gib is not None or blocks or nondefault or config)
    if booted:
        # `# GPU blocks: N, # CPU blocks: M` is the V0 engine's line (V1 prints GPU blocks alone)
        v0 = bool(blocks and blocks[1].group("cpu"))
        _vllm_cap(facts, device, v0, args, config_msg)


def _vllm_cap(facts: BootFacts, device: str | None, v0: bool, args: str, config_msg: str) -> None:
    kv_fix = ("raise VLLM_CPU_KVCACHE_SPACE or lower --max-model-len" if device == "CPU"
              else "raise --gpu-memory-utilization or lower --max-model-len")
    resolved = re.search(r"\bmax_num_seqs[=:]\s*(\d+)", config_msg)  # builds that print the scheduler config
    if facts.requested_max_running_requests is not None:
        seqs = facts.requested_max_running_requests
        reason = f"max_running_requests is vLLM's --max-num-seqs {seqs}: raise --max-num-seqs"
    elif resolved:
        seqs = int(resolved.group(1))
        reason = f"max_running_requests is vLLM's max_num_seqs {seqs} (engine config): raise --max-num-seqs"
    elif device == "CPU":
        world = 1
        for key in ("tensor_parallel_size", "pipeline_parallel_size"):
            if m := re.search(rf"\b{key}=(\d+)", config_msg):
                world *= int(m.group(1))
        seqs = 128 * world
        batched = _dict_int(args, "max_num_batched_tokens")
        seqs = min(seqs, batched) if batched else seqs
        reason = (f"max_running_requests is vLLM's CPU default max_num_seqs {seqs} "
                  f"(128 x world size {world}; --max-num-seqs not set): raise --max-num-seqs")
    elif v0:
        seqs = 256
        reason = ("max_running_requests is vLLM V0's default max_num_seqs 256 (--max-num-seqs not set): "
                  "raise --max-num-seqs")
    else:
        seqs = None
        reason = ("vLLM's default max_num_seqs depends on the GPU (1024 on >= 70 GiB cards other than "
                  "A100, else 256) and the log does not say which: set --max-num-seqs to pin "
                  "max_running_requests")
    facts.max_running_requests = seqs
    conc = facts.max_concurrency
    if conc and (seqs is None or conc["factor"] < seqs):
        reason += (f"; the KV cache holds only {conc['factor']:g} requests of "
                   f"{conc['tokens_per_request']:,} tokens: {kv_fix}")
    facts.cap_reason = reason


