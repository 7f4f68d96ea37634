"""vLLM's boot log -> BootFacts.

vLLM prints no effective cap. Its scheduler admits at most `max_num_active_seqs` requests into
RUNNING (vllm/v1/core/sched/scheduler.py, since 0.32: `--max-num-active-seqs`, default
`max_num_seqs`); the KV cache only limits how many *full-length* requests fit (`Maximum
concurrency ... Fx`), shorter requests share it. So `max_running_requests` is the lowest of the
caps the log shows: `--max-num-seqs` and `--max-num-active-seqs` from `non-default args`, and
the DFlash/DSpark override of `max_num_active_seqs` (vllm/config/vllm.py; 0.33 and 0.34 word it
differently, both read; quoted in the cap reason with the flag that lifts it,
`--max-num-batched-tokens`); else vLLM's default when the log tells which one applies
(CPU: 128 x world size, capped by max_num_batched_tokens; vllm/engine/arg_utils.py
`get_batch_defaults`); on GPU the default depends on the card (1024 on >= 70 GiB non-A100, else
256), which the log does not say: null, and `cap_reason` says so (the server's word completes it:
gates/boot/told.py). The KV pool never lowers vLLM's running cap, so the cap reason names it only
when it is what limits: when it holds less than one full-length request. Fewer full-length requests
than seats is the `max_concurrency` fact, which the boot table flags (the curve judges each row's KV
need with the row's own tokens: a 4.1 M-token pool holding 1006.66 requests of 4,096 tokens is no
limit for 1024 seats of shorter requests). `auto` KV dtype is reported as the model dtype; `size_gb` is the KV cache
memory in GiB: with 0.34's extensible KV cache (on by default on CUDA) the pool committed after warmup,
not the reservation "Available KV cache memory" prints before it (`_extensible_pool`, which says in
`sources["kv_cache_memory_gib"]` which line sized the pool). Where the extensible cache takes all
memory left after warmup (`gpu_memory_utilization` unset = 1.0), raising that flag is no advice.

Every line the parser reads is declared once in `VLLM_LINES`, with the format string the tracked vLLM
releases print it with, the file that does, and the releases that do (`since`/`until`; the census,
tests/contract/test_vllm_released.py, pins each to its line in every release of
pytest_glmf/upgrade/releases.py `VLLM_RELEASES`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_glmf.engine.logformats import LAYOUT_PLAIN
from pytest_glmf.gates.boot.facts import BootFacts, LogLine, find_last_line, find_line, parse_int, torch_dtype_name


@dataclass(frozen=True)
class VllmLine:
    """One boot-log line the parser reads: its pattern, and the format string that prints it in the
    vLLM releases the plugin tracks (pytest_glmf/upgrade/releases.py `VLLM_RELEASES`)."""

    name: str
    pattern: re.Pattern[str]
    fmt: str | None = None      # the format string (%-style as in the source); None: no tracked release prints it
    source: str | None = None   # the file inside the `vllm` package that prints it
    since: str | None = None    # the first release printing it (None: every tracked release up to `until`)
    until: str | None = None    # the first release that no longer prints it (None: still printed)


def _line(name: str, pattern: str, fmt: str | None = None, source: str | None = None, *,
          since: str | None = None, until: str | None = None) -> VllmLine:
    return VllmLine(name, re.compile(pattern), fmt, source, since, until)


_OVERRIDE_TAIL = (r" within max_num_batched_tokens=(?P<batched>\d+)\. Overriding max_num_active_seqs from (?P<old>\d+) "
                  r"to (?P<new>\d+)\.")
_AFTER_WARMUP = "Memory after warmup: "   # vllm/v1/worker/extensible_kv_cache.py (0.34)

VLLM_LINES: dict[str, VllmLine] = {x.name: x for x in [
    _line("kv_cache_size", r"(?P<dev>GPU|CPU)(?: \+ host)? KV cache size: (?P<tok>[\d,]+) tokens",
          "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",
          "vllm/v1/core/kv_cache_utils.py"),
    _line("max_concurrency", r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x",
          "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",
          "vllm/v1/core/kv_cache_utils.py"),
    _line("kv_cache_memory", r"Available KV cache memory: ([\d.]+) GiB", "Available KV cache memory: %s GiB",
          "vllm/v1/worker/gpu_worker.py"),
    _line("kv_cache_memory_cpu", r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache",
          "Explicitly set ({}/{}) GiB for KV cache on node {}.", "vllm/v1/worker/cpu_worker.py"),   # an f-string
    # 0.34's extensible KV cache (on by default on CUDA): "Available KV cache memory" is the reservation
    # before warmup; the pool is sized after it, per rank, and committed on every rank at the minimum
    _line("kv_after_warmup",
          r"Memory after warmup: .*; (?P<blocks>\d+) KV cache blocks \((?P<gib>[\d.]+) GiB\) fit within the "
          r"requested (?P<requested>[\d.]+) GiB",
          "Memory after warmup: %s GiB free, %s GiB committed to the KV cache, %s GiB kept for transient "
          "activations (%s GiB allocated at peak, %s GiB of torch reservation growth); %d KV cache blocks (%s GiB) "
          "fit within the requested %s GiB. Torch may reserve up to %s GiB.",
          "vllm/v1/worker/extensible_kv_cache.py", since="0.34.0"),
    _line("kv_extended", r"Extended KV cache to (?P<blocks>\d+) blocks \((?P<gib>[\d.]+) GiB\)\.",
          "Extended KV cache to %d blocks (%.2f GiB).", "vllm/v1/worker/extensible_kv_cache.py", since="0.34.0"),
    _line("kv_remapped", r"Remapping the KV cache from (?P<old>\d+) to (?P<new>\d+) blocks",
          "Remapping the KV cache from %d to %d blocks to fit the measured budget.",
          "vllm/v1/worker/extensible_kv_cache.py", since="0.34.0"),
    _line("kv_extensible_disabled", r"Disabling the extensible KV cache: (?P<why>.*?)\. The KV cache will be sized",
          "Disabling the extensible KV cache: %s. The KV cache will be sized from profiling estimates instead of "
          "measured memory.", "vllm/v1/executor/abstract.py", since="0.34.0"),
    _line("kv_extensible_off", r"Extensible KV cache off: (?P<why>[^.]*)",
          "Extensible KV cache off: without an IMEX channel, KV transfers within a host (e.g. NIXL) would lose "
          "NVLink and fall back to RDMA or TCP. If transfers only cross hosts, pass --enable-extensible-kv-cache.",
          "vllm/config/vllm.py", since="0.34.0"),
    # auto-fit (--max-model-len -1/auto): the last of these lines is the length served
    _line("context_auto_fit", r"Auto-fit max_model_len: reduced from \d+ to (\d+)",
          "Auto-fit max_model_len: reduced from %d to %d to fit in available KV cache memory (%s)",
          "vllm/v1/core/kv_cache_planning.py", until="0.34.0"),
    _line("context_auto_fit_tentative", r"Auto-fit max_model_len: reduced from \d+ to (\d+)",
          "Auto-fit max_model_len: reduced from %d to %d to fit in available KV cache memory (%s)%s",
          "vllm/v1/core/kv_cache_planning.py", since="0.34.0"),
    _line("context_auto_reduced", r"--max-model-len auto reduced max_model_len from \d+ to (\d+) \(",
          "--max-model-len auto reduced max_model_len from %d to %d (%s).",
          "vllm/v1/core/kv_cache_planning.py", since="0.34.0"),
    _line("context_auto_reduced_short", r"--max-model-len auto reduced max_model_len from \d+ to (\d+) \(",
          "--max-model-len auto reduced max_model_len from %d to %d (%s). Requests longer than %d tokens will be "
          "rejected. %s", "vllm/v1/core/kv_cache_planning.py", since="0.34.0"),
    _line("context_auto_fit_after_warmup", r"Auto-fit max_model_len: using max_model_len=(\d+), which fits",
          "Auto-fit max_model_len: using max_model_len=%d, which fits in the KV cache memory left after CUDA graph "
          "capture and warmup (%s).", "vllm/v1/core/kv_cache_planning.py", since="0.34.0"),
    _line("context", r"Using max model len (\d+)", "Using max model len %s", "vllm/config/model.py"),
    _line("non_default_args", r"non-default args: (\{.*)", "non-default args: %s", "vllm/entrypoints/common/startup.py"),
    _line("engine_config", r"Initializing a V\d LLM engine|LLM engine \(v[\d.]",
          "Initializing a V1 LLM engine (v%s) with config: %s", "vllm/v1/engine/core.py"),
    _line("context_config", r"\bmax_seq_len=(\d+)", "Initializing a V1 LLM engine (v%s) with config: %s",
          "vllm/v1/engine/core.py"),    # VllmConfig.__str__ (vllm/config/vllm.py): `max_seq_len=...`
    # the DFlash/DSpark draft pass lowers the running cap (vllm/config/vllm.py); 0.34 reworded it
    _line("active_seqs_override",
          r"The (?P<method>\S+) draft pass needs (?P<per>\d+) query tokens per request" + _OVERRIDE_TAIL,
          "The %s draft pass needs %d query tokens per request within max_num_batched_tokens=%d. "
          "Overriding max_num_active_seqs from %d to %d.", "vllm/config/vllm.py", until="0.34.0"),
    _line("active_seqs_override_fit",
          r"The (?P<method>\S+) draft pass fits at most (?P<fit>\d+) requests" + _OVERRIDE_TAIL,
          "The %s draft pass fits at most %d requests within max_num_batched_tokens=%d. "
          "Overriding max_num_active_seqs from %d to %d.", "vllm/config/vllm.py", since="0.34.0"),
    # uvicorn's line, or a served request: not vLLM's own format
    _line("ready", r"Application startup complete|\"(?:GET|POST) /\S* HTTP/[\d.]+\" 200"),
    # older builds (V0 engine, 2024-2025), no longer in 0.33
    _line("kv_tokens_v0", r"maximum number of tokens that can be stored in KV cache \((\d+)\)"),
    _line("gpu_blocks", r"# GPU blocks: (?P<gpu>\d+)(?:, # CPU blocks: (?P<cpu>\d+))?"),
    _line("kv_cache_memory_v0", r"the rest of the memory reserved for KV Cache is ([\d.]+)\s*GiB"),
    _line("kv_cache_memory_v0_profiling", r"\bkv_cache_size=([\d.]+)\s*GiB"),
    _line("context_v0", r"The model's max seq len \((\d+)\)"),
]}

_L = {name: x.pattern for name, x in VLLM_LINES.items()}
_VLLM_KVTOK, _VLLM_KVTOK_V0, _VLLM_BLOCKS, _VLLM_CONC = (
    _L["kv_cache_size"], _L["kv_tokens_v0"], _L["gpu_blocks"], _L["max_concurrency"])
_VLLM_MEM = [_L["kv_cache_memory"], _L["kv_cache_memory_cpu"], _L["kv_cache_memory_v0"],
             _L["kv_cache_memory_v0_profiling"]]
_VLLM_AUTO_FIT = [_L[n] for n in ("context_auto_fit", "context_auto_reduced", "context_auto_fit_after_warmup")]
_VLLM_CTX = [_L["context"], _L["context_config"], _L["context_v0"]]   # after auto-fit; first found wins
_VLLM_NONDEFAULT, _VLLM_CONFIG, VLLM_READY = _L["non_default_args"], _L["engine_config"], _L["ready"]
_VLLM_OVERRIDES = [_L["active_seqs_override_fit"], _L["active_seqs_override"]]
KV_MEMORY = "kv_cache_memory_gib"


def _dict_int(text: str, key: str) -> int | None:
    m = re.search(rf"'{key}': (\d+)", text)
    return int(m.group(1)) if m else None


def _dict_float(text: str, key: str) -> float | None:
    m = re.search(rf"'{key}': ([\d.]+)", text)
    return float(m.group(1)) if m else None


def parse_vllm(lines: list[LogLine], facts: BootFacts) -> None:
    nondefault = find_line(lines, _VLLM_NONDEFAULT)
    args = nondefault[1].group(1) if nondefault else ""
    facts.requested_max_running_requests = _dict_int(args, "max_num_seqs")
    override = next((o for pattern in _VLLM_OVERRIDES if (o := find_line(lines, pattern))), None)
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
    extensible = _extensible_pool(lines, facts)
    if fit := find_last_line(lines, _VLLM_AUTO_FIT):
        facts.context_len = int(fit[1].group(1))
    for pattern in _VLLM_CTX if facts.context_len is None else []:
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
              or facts.kv_cache_memory_gib is not None or blocks or nondefault or config or override)
    if booted:
        # `# GPU blocks: N, # CPU blocks: M` is the V0 engine's line (V1 prints GPU blocks alone)
        v0 = bool(blocks and blocks[1].group("cpu"))
        _vllm_cap(facts, device, v0, args, config_msg, extensible)
        _active_seqs_cap(facts, args, override[1] if override else None)


def _extensible_pool(lines: list[LogLine], facts: BootFacts) -> bool:
    """vLLM 0.34's extensible KV cache (vllm/v1/worker/extensible_kv_cache.py, on by default on CUDA):
    "Available KV cache memory" is only the reservation before warmup; the pool is what the memory
    measured after warmup fits ("Memory after warmup: ... N KV cache blocks (X GiB) fit ..." per rank),
    committed on every rank at the minimum over ranks ("Extended KV cache to N blocks (X GiB).", after
    a "Remapping the KV cache from A to B blocks" when warmup had committed more). The "KV cache size"
    line (tokens, concurrency) is printed once the size is settled, so it is the final pool's. Where the
    extensible cache is disabled or off, the reservation is the pool. Sets the pool's GiB and why, in
    `facts.sources["kv_cache_memory_gib"]`; True when the pool was sized after warmup."""
    reserved = facts.kv_cache_memory_gib
    before = f"; the {reserved:.2f} GiB before warmup was its reservation" if reserved is not None else ""
    if extended := find_line(lines, _L["kv_extended"]):
        facts.kv_cache_memory_gib = float(extended[1].group("gib"))
        remap = find_line(lines, _L["kv_remapped"])
        remapped = (f"; remapped from {int(remap[1].group('old')):,} to {int(remap[1].group('new')):,} blocks to "
                    "fit the memory measured after warmup" if remap else "")
        facts.sources[KV_MEMORY] = (f'boot log, the extensible KV cache after warmup: "{extended[0].msg}"'
                                    f"{remapped}{before}")
        return True
    if measured := find_line(lines, _L["kv_after_warmup"]):
        facts.kv_cache_memory_gib = float(measured[1].group("gib"))
        facts.sources[KV_MEMORY] = (f"boot log, the extensible KV cache measured after warmup: "
                                    f"{int(measured[1].group('blocks')):,} blocks fit (no \"Extended KV cache\" "
                                    f"line: the log ends before the pool is committed){before}")
        return True
    for name, said in (("kv_extensible_disabled", "vLLM disabled the extensible KV cache"),
                       ("kv_extensible_off", "the extensible KV cache is off")):
        if off := find_line(lines, _L[name]):
            if reserved is not None:
                facts.sources[KV_MEMORY] = (f"boot log, the profiling estimate ({said}: {off[1].group('why')})")
            return False
    return False


def _active_seqs_cap(facts: BootFacts, args: str, override: re.Match[str] | None) -> None:
    """The admission cap below max_num_seqs: `--max-num-active-seqs` (0.32+), and the DFlash / DSpark
    override of it (vllm/config/vllm.py; 0.33 says the query tokens per request, 0.34 how many
    requests fit), which comes after the flag and wins."""
    flag = _dict_int(args, "max_num_active_seqs")
    seqs = facts.max_running_requests
    if override is not None:
        new, old = int(override.group("new")), int(override.group("old"))
        batched = int(override.group("batched"))
        if facts.requested_max_running_requests is None:
            facts.requested_max_running_requests = old
        facts.max_running_requests = new
        if override.groupdict().get("per"):
            per = int(override.group("per"))
            need = f"(>= {old * per:,} = {old} x {per} for {old} seats)"
        else:
            # fit = batched // per, so per <= batched / fit and old x batched / fit tokens admit every seat
            need = f"(>= {-(-old * batched // new):,} admits {old} seats: {new} fit in {batched:,})"
        facts.cap_reason = (f"max_running_requests is vLLM's max_num_active_seqs {new}, lowered from {old} at boot: "
                            f'"{override.group(0)}": raise --max-num-batched-tokens {need}')
    elif flag is not None and (seqs is None or flag < seqs):
        if facts.requested_max_running_requests is None and seqs is not None:
            facts.requested_max_running_requests = seqs
        facts.max_running_requests = flag
        runner = f"--max-num-seqs {seqs} sizes the runner" if seqs is not None else "max_num_seqs sizes the runner"
        facts.cap_reason = (f"max_running_requests is vLLM's --max-num-active-seqs {flag} (the requests admitted "
                            f"into RUNNING; {runner}): raise --max-num-active-seqs")


def _vllm_cap(facts: BootFacts, device: str | None, v0: bool, args: str, config_msg: str,
              extensible: bool = False) -> None:
    if device == "CPU":
        kv_fix = "raise VLLM_CPU_KVCACHE_SPACE or lower --max-model-len"
    elif extensible and _dict_float(args, "gpu_memory_utilization") is None:
        # 0.34: gpu_memory_utilization unset is 1.0 under the extensible KV cache (vllm/config/cache.py)
        kv_fix = ("lower --max-model-len, capture fewer CUDA graph sizes or use more GPUs (the extensible KV cache "
                  "already takes all memory left after warmup)")
    else:
        kv_fix = "raise --gpu-memory-utilization or lower --max-model-len"
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
    if conc and conc["factor"] < 1:   # not one full-length request fits: the KV pool is what limits
        reason += (f"; the KV cache holds only {conc['factor']:g} requests of "
                   f"{conc['tokens_per_request']:,} tokens: {kv_fix}")
    facts.cap_reason = reason


