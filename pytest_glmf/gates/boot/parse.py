"""Boot log -> BootFacts, for SGLang and vLLM. Contract: docs/architecture.md section 5.

Log formats drift between engine versions (docs/engines.md sections 1, 2, 7), so every fact is read from
`key=value` / `key: value` fragments of a line, never from a whole-line pattern. Per-rank lines
(SGLang `[ts TP3]`, vLLM `(Worker_TP1 pid=..)`) are copies of one fact: a fact is taken from the
primary rank (TP0 / DP0 / rank=0 / no rank) when it printed one, else from the first rank that did.

Engine-specific decisions (documented because the engines do not print them the same way):
- SGLang `max_running_requests` is the effective value from the summary line
  (`max_total_num_tokens=..., max_running_requests=N, context_len=...`); without a summary line, the
  cap line's value. The `server_args` dump only gives `requested_max_running_requests`.
- vLLM prints no effective cap. Its scheduler admits at most `max_num_seqs` sequences; the KV cache
  only limits how many *full-length* requests fit (`Maximum concurrency ... Fx`), shorter requests
  share it. So `max_running_requests` = `--max-num-seqs` when `non-default args` shows it, else
  vLLM's default when the log tells which one applies (CPU: 128 x world size, capped by
  max_num_batched_tokens; vllm/engine/arg_utils.py `get_batch_defaults`); on GPU the default depends
  on the card (1024 on >= 70 GiB non-A100, else 256), which the log does not say: null, and
  `cap_reason` says so. `cap_reason` also names the KV limit when fewer full-length requests fit.
- `kv_pools[].dtype` drops the `torch.` prefix (`bfloat16`, `float8_e4m3fn`); vLLM's `auto` KV dtype
  is reported as the model dtype. `size_gb` is the sum of the sizes on the pool's line, as printed
  (SGLang's "GB" are GiB); for vLLM it is the KV cache memory in GiB.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class BootFacts:
    engine: str | None = None
    max_running_requests: int | None = None          # effective
    requested_max_running_requests: int | None = None
    cap_reason: str | None = None
    max_mamba_cache_size: int | None = None
    state_slots_per_request: int | None = None
    kv_tokens: int | None = None
    context_len: int | None = None
    kv_pools: list[dict[str, Any]] = field(default_factory=list)   # {tokens, dtype, size_gb}
    kv_cache_memory_gib: float | None = None
    max_concurrency: dict[str, Any] | None = None    # {tokens_per_request, factor} (vLLM)
    cuda_graph_bs: list[int] | None = None
    ready: bool = False
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Lines: strip the engine prefix, keep the rank.

# SGLang: `[2026-03-12 09:57:51 DP0 TP0 EP0] msg`, optionally `INFO file.py:NN: msg` after the bracket.
_SGL_PREFIX = re.compile(
    r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?: (?P<rank>[^\]]*))?\]\s*"
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\S+:\d+:\s*)?")
# vLLM: `(EngineCore_DP0 pid=1) INFO 11-29 14:28:17 [file.py:12] msg` or `INFO 12-20 20:25:46 file.py:241] msg`.
_VLLM_PREFIX = re.compile(
    r"^(?:\((?P<proc>[^)]*)\)\s+)?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?"
    r"\s+(?:\[[^\]]*\]|\S+\])\s?")
_VLLM_PROC_ONLY = re.compile(r"^\((?P<proc>[^)]*pid=\d+[^)]*)\)\s+")
# `docker logs --timestamps` puts an RFC 3339 stamp before the engine's own prefix.
_DOCKER_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s")


@dataclass
class _Line:
    no: int            # 1-based line number in the text
    rank: str          # "" when the line names no rank
    primary: bool      # TP0 / DP0 / rank=0 / no rank
    msg: str           # the line without its engine prefix


def _rank_is_primary(rank: str) -> bool:
    rank = re.sub(r"pid=\d+", "", rank)
    numbers = re.findall(r"(?:TP|DP|PP|EP|rank=|_|-)(\d+)", rank)
    if numbers:
        return all(int(n) == 0 for n in numbers)
    # V0 `(VllmWorkerProcess pid=N)` lines come from the non-driver workers.
    return "Worker" not in rank


def _lines(text: str) -> list[_Line]:
    out = []
    for no, raw in enumerate(text.splitlines(), start=1):
        if raw.startswith("# source:"):
            continue  # provenance header of the saved excerpts, not engine output
        raw = _DOCKER_TS.sub("", raw, count=1)
        rank, msg = "", raw
        if m := _SGL_PREFIX.match(raw):
            rank, msg = (m.group("rank") or "").strip(), raw[m.end():]
        elif m := _VLLM_PREFIX.match(raw):
            rank, msg = (m.group("proc") or "").strip(), raw[m.end():]
        elif m := _VLLM_PROC_ONLY.match(raw):
            rank, msg = m.group("proc").strip(), raw[m.end():]
        out.append(_Line(no, rank, _rank_is_primary(rank), msg.strip()))
    return out


def _find(lines: list[_Line], pattern: re.Pattern[str]) -> tuple[_Line, re.Match[str]] | None:
    """First match on the primary rank, else the first match anywhere."""
    first = None
    for line in lines:
        if m := pattern.search(line.msg):
            if line.primary:
                return line, m
            first = first or (line, m)
    return first


def _int(s: str) -> int:
    return int(s.replace(",", ""))


def _dtype(s: str | None) -> str | None:
    return None if s is None else s.strip().removeprefix("torch.")


# ---------------------------------------------------------------------------------------------
# Engine detection: count lines that only one engine prints.

_SGL_MARKS = re.compile(
    r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}|KV Cache is allocated|Mamba Cache is allocated|"
    r"max_total_num_tokens=|Capture cuda graph|Decode batch|Prefill batch|Scheduler hit an exception|"
    r"ServerArgs\(|ready to roll|max_running_requests (?:is |was )?(?:capped|reduced)|sglang|"
    r"speculative_algorithm=|mem_fraction_static=|Load weight end\.|Memory pool end\.")
_VLLM_MARKS = re.compile(
    r"^\((?:APIServer|EngineCore|Worker|VllmWorker)|^(?:INFO|WARNING|ERROR|DEBUG) \d{2}-\d{2} |"
    r"(?:GPU|CPU) KV cache size|# GPU blocks|Maximum concurrency for|vllm|vLLM|non-default args|"
    r"SpecDecoding metrics|Available KV cache memory|Graph capturing finished")


def _engine(text: str) -> str | None:
    sgl = vllm = 0
    for raw in text.splitlines():
        if raw.startswith("# source:"):
            continue
        raw = _DOCKER_TS.sub("", raw, count=1)
        sgl += bool(_SGL_MARKS.search(raw))
        vllm += bool(_VLLM_MARKS.search(raw))
    if sgl == vllm:
        return None
    return "sglang" if sgl > vllm else "vllm"


_VERSION = [
    re.compile(r"\bversion (\d+\.\d+\.\d+\S*)"),                           # vLLM banner / API server
    re.compile(r"LLM engine \(v(\d+\.\d+\.\d+\S*)\)"),                      # vLLM config line
    re.compile(r"\b[Ss][Gg][Ll]ang(?: version|==| v)\s*v?(\d+\.\d+\.\d+\S*)"),
]


def engine_version(text: str) -> str | None:
    """The engine version the log prints (vLLM banner/config line; SGLang prints none at boot)."""
    for pattern in _VERSION:
        if m := pattern.search(text):
            return m.group(1)
    return None


# ---------------------------------------------------------------------------------------------
# Problems: fatal errors and memory failures, both engines.

_FATAL = re.compile(
    r"Scheduler hit an exception|Not enough memory\. Please try to increase --mem-fraction-static|"
    r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|illegal memory access|"
    r"Initialization failed\. warmup error|Not enough GPU memory for hybrid|"
    r"Not enough space for mamba ping pong idx|Capture cuda graph failed|"
    r"max_total_tokens=\d+ is larger than the profiled value -\d+|"
    r"max_running_requests is capped to 0\b|"
    r"Engine core initialization failed|EngineCore failed to start|(?:WorkerProc|EngineCore) hit an exception|"
    r"larger than the maximum number of tokens that can be stored in KV cache")
# The last line of a Python traceback: `RuntimeError: ...`, `torch.OutOfMemoryError: ...`.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<name>[A-Z]\w*(?:Error|Exception))(?::\s|$)")
# Optional imports that fail with a traceback while the server still boots fine (SGLang probes
# torchcodec for video input and logs the failure).
_BENIGN_EXCEPTIONS = {"ImportError", "ModuleNotFoundError"}
_BENIGN_TRACEBACK = re.compile(r"torchcodec")
_PROBLEM_CHARS = 240
_FATAL_REPORT_LINES = 200  # a fatal line's traceback ends within this many lines


def _problems(lines: list[_Line], ready_no: int | None) -> list[str]:
    """Fatal lines anywhere; other exception lines only during boot or in a fatal line's traceback.
    (After the ready line, a request the server rejected logs a traceback too; that is no failure.)"""
    seen: set[str] = set()
    out = []
    traceback = ""  # the frames since the last `Traceback (most recent call last):`
    last_fatal_no = -_FATAL_REPORT_LINES
    for line in lines:
        msg = line.msg
        if msg.endswith("Traceback (most recent call last):"):
            traceback = ""
        traceback += msg + "\n"
        fatal = bool(_FATAL.search(msg))
        if fatal:
            last_fatal_no = line.no
        m = _EXCEPTION.match(msg)
        counts = m and m.group("name") not in _BENIGN_EXCEPTIONS and not _BENIGN_TRACEBACK.search(traceback)
        if counts and ready_no is not None and line.no > ready_no:
            counts = line.no - last_fatal_no <= _FATAL_REPORT_LINES
        if not (fatal or counts):
            continue
        if msg in seen:
            continue  # every TP rank prints the same failure
        seen.add(msg)
        short = msg if len(msg) <= _PROBLEM_CHARS else msg[:_PROBLEM_CHARS - 3] + "..."
        out.append(f"line {line.no}: {short}")
    return out


# ---------------------------------------------------------------------------------------------
# SGLang

# The summary line starts with the pool size; `full_` is the hybrid-SWA spelling. Other lines that
# carry `max_total_num_tokens=` (post-capture resize, PR #32360's `bound by kv_capacity (...)`) do not.
_SGL_SUMMARY = re.compile(r"(?<![\w(])(?<!sizing: )(?:full_)?max_total_num_tokens=(\d+)")
_SGL_KV = re.compile(r"KV Cache is allocated\.(?P<rest>.*#tokens:.*)")
_SGL_KV_DTYPE = re.compile(r"Using KV cache dtype: ([\w.]+)")
_SGL_MAMBA = re.compile(r"Mamba Cache is allocated\.\s*max_mamba_cache_size:\s*(\d+)")
# `max_running_requests is capped to 7 by the mamba state cache (max_mamba_cache_size=38, 5 state slots per request)`
_SGL_CAP = re.compile(r"max_running_requests (?:is |was )?capped to (?P<n>\d+) by the (?P<why>[^(.]+?)\s*(?:\((?P<detail>[^)]*)\)|[.:]|$)")
# `max_running_requests was reduced from the requested 74 to 26 (per dp worker) due to the available KV cache capacity.`
# and PR #32360's `... reduced from the requested 74 to 26 (per dp worker), bound by mamba_state_pool (...)`
_SGL_REDUCED = re.compile(r"max_running_requests (?:was )?reduced from the requested (?P<req>\d+) to (?P<n>\d+)(?P<rest>.*)")
_SGL_BOUND = re.compile(r"max_running_requests=(?P<n>\d+)(?: \(per dp worker\))?, bound by (?P<rest>.*)")
_SGL_POST_CAPTURE = re.compile(r"Post-capture KV sizing: max_running_requests (\d+) -> (\d+)")
_SGL_ARGS_REQUESTED = re.compile(r"\bmax_running_requests=(\d+|None)\b")
_SGL_CG_BS = re.compile(r"Capture (?:decode )?cuda graph bs \[([\d,\s]*)\]")
_SGL_READY = re.compile(r"The server is fired up and ready to roll|Decode batch[.,]|"
                        r"\"POST /v1/(?:chat/)?completions HTTP/[\d.]+\" 200")
_MAMBA_SIZE = re.compile(r"max_mamba_cache_size[=:]\s*(\d+)")
_SLOTS = re.compile(r"(\d+) (?:state )?slots per request")
_SIZE_GB = re.compile(r"size:\s*([\d.]+)\s*GB")

_RAISE_FLAGS = {
    "mamba": "raise --max-mamba-cache-size",
    "kv": "raise --mem-fraction-static or lower --context-length",
    "estimate": "set --max-running-requests explicitly",
}


def _kind(why: str) -> str:
    why = why.lower()
    if "mamba" in why or "state" in why:
        return "mamba"
    if "kv" in why or "token" in why or "memory" in why:
        return "kv"
    if "estimate" in why:
        return "estimate"
    return "max_running_requests" if "max_running_requests" in why else "unknown"


def _sgl_kv_pools(lines: list[_Line]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    primary_rank = None
    dtype_hint = None
    for line in lines:
        if m := _SGL_KV_DTYPE.search(line.msg):
            dtype_hint = _dtype(m.group(1))
        m = _SGL_KV.search(line.msg)
        if not m:
            continue
        rest = m.group("rest")
        tokens = re.search(r"#tokens:\s*([\d,]+)", rest)
        dtype = re.search(r"dtype:\s*([\w.]+)", rest)
        sizes = [float(s) for s in _SIZE_GB.findall(rest)]
        groups.setdefault(line.rank, []).append({
            "tokens": _int(tokens.group(1)) if tokens else None,
            "dtype": _dtype(dtype.group(1)) if dtype else dtype_hint,
            "size_gb": round(sum(sizes), 2) if sizes else None,
        })
        if line.primary and primary_rank is None:
            primary_rank = line.rank
    if not groups:
        return []
    return groups[primary_rank if primary_rank is not None else next(iter(groups))]


def _parse_sglang(lines: list[_Line], facts: BootFacts) -> None:
    summary = _find(lines, _SGL_SUMMARY)
    if summary:
        line, m = summary
        kv = dict(re.findall(r"(\w+)=(-?\d+)\b", line.msg))
        facts.kv_tokens = int(m.group(1))
        facts.max_running_requests = int(kv["max_running_requests"]) if "max_running_requests" in kv else None
        facts.context_len = int(kv["context_len"]) if "context_len" in kv else None

    for line in lines:  # the server_args dump: requested values only
        if "ServerArgs(" in line.msg or "server_args=" in line.msg or "model_path=" in line.msg:
            if (m := _SGL_ARGS_REQUESTED.search(line.msg)) and m.group(1) != "None":
                facts.requested_max_running_requests = int(m.group(1))
                break

    if mamba := _find(lines, _SGL_MAMBA):
        facts.max_mamba_cache_size = int(mamba[1].group(1))

    _sgl_cap(lines, facts)
    if (facts.cap_reason is None and facts.requested_max_running_requests is not None
            and facts.max_running_requests is not None
            and facts.max_running_requests < facts.requested_max_running_requests):
        facts.cap_reason = (
            f"max_running_requests is {facts.max_running_requests}, below the requested "
            f"{facts.requested_max_running_requests}, and the log names no reason: check "
            f"--mem-fraction-static and, on hybrid models, --max-mamba-cache-size")

    facts.kv_pools = _sgl_kv_pools(lines)
    if facts.kv_tokens is None and facts.kv_pools:
        facts.kv_tokens = facts.kv_pools[0]["tokens"]
    sizes = [p["size_gb"] for p in facts.kv_pools if p["size_gb"] is not None]
    facts.kv_cache_memory_gib = round(sum(sizes), 2) if sizes else None

    if bs := _find(lines, _SGL_CG_BS):
        facts.cuda_graph_bs = [int(x) for x in re.findall(r"\d+", bs[1].group(1))]


def _sgl_cap(lines: list[_Line], facts: BootFacts) -> None:
    """The cap's reason (and the cap, when no summary line), from whichever cap line this version prints."""
    requested = None
    if cap := _find(lines, _SGL_CAP):
        m = cap[1]
        n, why, detail = int(m.group("n")), m.group("why").strip(), m.group("detail") or ""
    elif red := _find(lines, _SGL_REDUCED):
        m = red[1]
        n, detail, requested = int(m.group("n")), m.group("rest"), int(m.group("req"))
        bound = re.search(r"bound by (\w+)", detail) or re.search(r"due to (?:the )?([^.;]+)", detail)
        why = bound.group(1).strip() if bound else ""
    elif bnd := _find(lines, _SGL_BOUND):
        m = bnd[1]
        n, detail = int(m.group("n")), m.group("rest")
        why = detail.split(" ", 1)[0]
    elif post := _find(lines, _SGL_POST_CAPTURE):
        # the KV pool shrank after CUDA-graph capture, and the cap with it
        n, detail, why = int(post[1].group(2)), "", f"post-capture KV sizing (from {post[1].group(1)})"
    else:
        return
    if requested is not None:
        facts.requested_max_running_requests = requested
    if ms := _MAMBA_SIZE.search(detail):
        facts.max_mamba_cache_size = int(ms.group(1))
    if sl := _SLOTS.search(detail):
        facts.state_slots_per_request = int(sl.group(1))
    if facts.max_running_requests is None:
        facts.max_running_requests = n
    kind = _kind(why)
    if kind == "max_running_requests":
        return  # bound by the user's own request: nothing capped it
    if kind == "mamba":
        parts = [f"max_mamba_cache_size={facts.max_mamba_cache_size}"] if facts.max_mamba_cache_size is not None else []
        if facts.state_slots_per_request is not None:
            parts.append(f"{facts.state_slots_per_request} state slots per request")
        what = "the mamba state cache" + (f" ({', '.join(parts)})" if parts else "")
    elif kind == "kv":
        what = f"the {why}" if why.startswith("post-capture") else "the available KV cache capacity"
    else:
        what = why or "an unnamed limit"
    verb = "capped to" if requested is None else f"reduced from the requested {requested} to"
    fix = _RAISE_FLAGS.get(kind, "raise --max-running-requests and the limit the log names")
    facts.cap_reason = f"max_running_requests {verb} {n} by {what}: {fix}"


# ---------------------------------------------------------------------------------------------
# vLLM

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
_VLLM_READY = re.compile(r"Application startup complete|\"(?:GET|POST) /\S* HTTP/[\d.]+\" 200")


def _dict_int(text: str, key: str) -> int | None:
    m = re.search(rf"'{key}': (\d+)", text)
    return int(m.group(1)) if m else None


def _parse_vllm(lines: list[_Line], facts: BootFacts) -> None:
    nondefault = _find(lines, _VLLM_NONDEFAULT)
    args = nondefault[1].group(1) if nondefault else ""
    facts.requested_max_running_requests = _dict_int(args, "max_num_seqs")
    config = _find(lines, _VLLM_CONFIG)
    config_msg = config[0].msg if config else ""

    device = None
    if kv := _find(lines, _VLLM_KVTOK):
        facts.kv_tokens, device = _int(kv[1].group("tok")), kv[1].group("dev")
    elif kv0 := _find(lines, _VLLM_KVTOK_V0):
        facts.kv_tokens = int(kv0[1].group(1))
    if device is None and ("device_config=cpu" in config_msg
                           or any("cpu_worker.py" in ln.msg or "CPU KV cache" in ln.msg for ln in lines)):
        device = "CPU"

    if conc := _find(lines, _VLLM_CONC):
        facts.max_concurrency = {"tokens_per_request": _int(conc[1].group("len")),
                                 "factor": float(conc[1].group("x"))}
    for pattern in _VLLM_MEM:
        if mem := _find(lines, pattern):
            facts.kv_cache_memory_gib = float(mem[1].group(1))
            break
    for pattern in _VLLM_CTX:
        if ctx := _find(lines, pattern):
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
        facts.kv_pools = [{"tokens": facts.kv_tokens, "dtype": _dtype(dtype),
                           "size_gb": facts.kv_cache_memory_gib}]

    if m := re.search(r"'cudagraph_capture_sizes': \[([\d,\s]*)\]", config_msg):
        facts.cuda_graph_bs = sorted(int(x) for x in re.findall(r"\d+", m.group(1)))

    blocks = _find(lines, _VLLM_BLOCKS)
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


# ---------------------------------------------------------------------------------------------


def parse_boot_log(text: str) -> BootFacts:
    """Facts a boot log states, null where it does not say (see the module docstring)."""
    lines = _lines(text)
    facts = BootFacts(engine=_engine(text))
    ready = None
    if facts.engine == "vllm":
        _parse_vllm(lines, facts)
        ready = next((ln for ln in lines if _VLLM_READY.search(ln.msg)), None)
    elif facts.engine == "sglang":
        _parse_sglang(lines, facts)
        ready = next((ln for ln in lines if _SGL_READY.search(ln.msg)), None)
    facts.ready = ready is not None
    facts.problems = _problems(lines, ready.no if ready else None)
    return facts
