"""SGLang's boot log -> BootFacts (both generations of pytest_glmf/engine/logformats.py).

Decisions, where SGLang does not print things the same way everywhere:
- `max_running_requests` is the effective value from the summary line
  (`max_total_num_tokens=..., max_running_requests=N, context_len=...`); without one, the cap
  line's value. The server_args dump (`ServerArgs(...)` on the nightly, a `{...}` dict on 0.5.23)
  only gives `requested_max_running_requests`.
- `cap_reason` keeps the engine's own advice when the cap line gives one (0.5.23's mamba cap line:
  "To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state
  size with --mamba-ssm-dtype bfloat16.").
- `kv_pool_layout`: on a DSA architecture (the `Load weight end. type=` of the target model) two
  `KV Cache is allocated` lines are the nightly's MLA + indexer pools, one line is 0.5.23's
  `DSATokenToKVPool` (both in one pool); other models print one line per pool.
- `cuda_graph_bs`: the nightly's `Capture cuda graph bs [...]`, or 0.5.23's
  `Capture target decode|verify CUDA graph end. bs=[...]` (the target's, not the draft's).
- The summary line is the `max_total_num_tokens=` line that also carries `max_running_requests=` or
  `context_len=`: 0.5.23's unified memory pool (`--enable-unified-memory`) prints
  `[unified-memory-pool]   total_bytes=..., max_total_num_tokens=..., max_mamba_cache_size=...,
  max_num_reqs=...` before it, which gives only `max_mamba_cache_size`
  (that pool prints no `Mamba Cache is allocated` line; `max_num_reqs` is the request pool's size, not
  the seats).
- Under 0.5.23's post-capture KV sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING) the pool line before
  capture is a `KV Cache VA upper bound` (a reservation, not a pool); the pool is
  `Post-capture KV sizing: KV cache allocated. dtype: ..., #tokens: ..., KV size: ...` after capture.
  The drafter's `... draft KV cache allocated` line is not one of the target's pools.
"""
from __future__ import annotations

import re
from typing import Any

from pytest_glmf.engine import logformats as lf
from pytest_glmf.gates.boot.facts import BootFacts, LogLine, find_line, parse_int, torch_dtype_name
from pytest_glmf.gates.boot.hints import advice_for

# The summary line: the pool size (`full_` is the hybrid-SWA spelling) with the seats or the context
# length beside it. Other lines that carry `max_total_num_tokens=` have neither (post-capture resize,
# 0.5.23's `[unified-memory-pool]   total_bytes=..., max_total_num_tokens=..., max_num_reqs=...`) or
# carry it in parentheses (PR #32360's `max_running_requests=64 ..., bound by kv_capacity (...)`).
_SGL_SUMMARY = re.compile(r"(?<![\w(])(?:full_)?max_total_num_tokens=(\d+)(?=.*\b(?:max_running_requests|context_len)=)")
# `KV Cache is allocated.` (with a `Full `/`SWA ` label on hybrid-SWA pools), and 0.5.23's post-capture
# `Post-capture KV sizing: KV cache allocated.` (not its `draft KV cache allocated`)
_SGL_KV = re.compile(r"(?:KV Cache is allocated|Post-capture KV sizing: KV cache allocated)\.(?P<rest>.*#tokens:.*)")
_SGL_KV_DTYPE = re.compile(r"Using KV cache dtype: ([\w.]+)")
_SGL_MAMBA = re.compile(r"Mamba Cache is allocated\.\s*max_mamba_cache_size:\s*(\d+)|"
                        r"\[unified-memory-pool\]\s.*\bmax_mamba_cache_size=(\d+)")
# `max_running_requests is capped to 7 by the mamba state cache (max_mamba_cache_size=38, 5 state slots per request)`
_SGL_CAP = re.compile(r"max_running_requests (?:is |was )?capped to (?P<n>\d+) by the (?P<why>[^(.]+?)\s*(?:\((?P<detail>[^)]*)\)|[.:]|$)")
# `max_running_requests was reduced from the requested 74 to 26 (per dp worker) due to the available KV cache capacity.`
# and PR #32360's `... reduced from the requested 74 to 26 (per dp worker), bound by mamba_state_pool (...)`
_SGL_REDUCED = re.compile(r"max_running_requests (?:was )?reduced from the requested (?P<req>\d+) to (?P<n>\d+)(?P<rest>.*)")
_SGL_BOUND = re.compile(r"max_running_requests=(?P<n>\d+)(?: \(per dp worker\))?, bound by (?P<rest>.*)")
_SGL_POST_CAPTURE = re.compile(r"Post-capture KV sizing: max_running_requests (\d+) -> (\d+)")
# nightly `ServerArgs(..., max_running_requests=74, ...)`; 0.5.23 `{..., 'max_running_requests': 74, ...}`
_SGL_ARGS_REQUESTED = re.compile(r"""(?:\bmax_running_requests=|['"]max_running_requests['"]:\s*)(\d+|None)\b""")
_SGL_ARGS_DUMP = re.compile(r"server_args=|ServerArgs\(|model_path=|'model_path':")
# nightly `Capture cuda graph bs [1, 2, ...]`; 0.5.23 `Capture target decode CUDA graph end. bs=[1, 2, ...], ...`
# (`target verify` under speculative decoding; a `draft ...` line is the drafter's own graphs)
_SGL_CG_BS = re.compile(r"Capture (?:decode )?cuda graph bs \[([\d,\s]*)\]|"
                        r"Capture (?:target )?(?:decode|verify) CUDA graph end\. bs=\[([\d,\s]*)\]")
_SGL_ARCH = re.compile(r"Load weight end\..*?\btype=(\w+)")
_SGL_ADVICE = re.compile(r"To raise it: (?P<advice>.+?)\.?\s*$")
SGL_READY = re.compile(r"The server is fired up and ready to roll|Decode batch(?: \[\d+\])?[.,]|"
                        r"\"POST /v1/(?:chat/)?completions HTTP/[\d.]+\" 200")
_MAMBA_SIZE = re.compile(r"max_mamba_cache_size[=:]\s*(\d+)")
_SLOTS = re.compile(r"(\d+) (?:state )?slots per request")
_SIZE_GB = re.compile(r"size:\s*([\d.]+)\s*GB")

def _kind(why: str) -> str:
    why = why.lower()
    if "mamba" in why or "state" in why:
        return "mamba"
    if "kv" in why or "token" in why or "memory" in why:
        return "kv"
    if "estimate" in why:
        return "estimate"
    return "max_running_requests" if "max_running_requests" in why else "unknown"


def _sgl_kv_pools(lines: list[LogLine]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    primary_rank = None
    dtype_hint = None
    for line in lines:
        if m := _SGL_KV_DTYPE.search(line.msg):
            dtype_hint = torch_dtype_name(m.group(1))
        m = _SGL_KV.search(line.msg)
        if not m:
            continue
        rest = m.group("rest")
        tokens = re.search(r"#tokens:\s*([\d,]+)", rest)
        dtype = re.search(r"dtype:\s*([\w.]+)", rest)
        sizes = [float(s) for s in _SIZE_GB.findall(rest)]
        groups.setdefault(line.rank, []).append({
            "tokens": parse_int(tokens.group(1)) if tokens else None,
            "dtype": torch_dtype_name(dtype.group(1)) if dtype else dtype_hint,
            "size_gb": round(sum(sizes), 2) if sizes else None,
        })
        if line.primary and primary_rank is None:
            primary_rank = line.rank
    if not groups:
        return []
    return groups[primary_rank if primary_rank is not None else next(iter(groups))]


def parse_sglang(lines: list[LogLine], facts: BootFacts) -> None:
    summary = find_line(lines, _SGL_SUMMARY)
    if summary:
        line, m = summary
        kv = dict(re.findall(r"(\w+)=(-?\d+)\b", line.msg))
        facts.kv_tokens = int(m.group(1))
        facts.max_running_requests = int(kv["max_running_requests"]) if "max_running_requests" in kv else None
        facts.context_len = int(kv["context_len"]) if "context_len" in kv else None

    for line in lines:  # the server_args dump: requested values only
        if _SGL_ARGS_DUMP.search(line.msg):
            if (dump := _SGL_ARGS_REQUESTED.search(line.msg)) and dump.group(1) != "None":
                facts.requested_max_running_requests = int(dump.group(1))
                break

    if mamba := find_line(lines, _SGL_MAMBA):
        facts.max_mamba_cache_size = int(mamba[1].group(1) or mamba[1].group(2))

    _sgl_cap(lines, facts)
    if (facts.cap_reason is None and facts.requested_max_running_requests is not None
            and facts.max_running_requests is not None
            and facts.max_running_requests < facts.requested_max_running_requests):
        facts.cap_reason = (
            f"max_running_requests is {facts.max_running_requests}, below the requested "
            f"{facts.requested_max_running_requests}, and the log names no reason: check "
            f"--mem-fraction-static and, on hybrid models, --max-mamba-cache-size")

    facts.kv_pools = _sgl_kv_pools(lines)
    facts.kv_pool_layout = _kv_pool_layout(lines, facts.kv_pools)
    if facts.kv_tokens is None and facts.kv_pools:
        facts.kv_tokens = facts.kv_pools[0]["tokens"]
    sizes = [p["size_gb"] for p in facts.kv_pools if p["size_gb"] is not None]
    facts.kv_cache_memory_gib = round(sum(sizes), 2) if sizes else None

    if bs := find_line(lines, _SGL_CG_BS):
        facts.cuda_graph_bs = [int(x) for x in re.findall(r"\d+", bs[1].group(1) or bs[1].group(2))]


def _kv_pool_layout(lines: list[LogLine], pools: list[dict[str, Any]]) -> str | None:
    """How the pool lines map to pools (engine/logformats.py LAYOUT_*): on a DSA model one line is
    0.5.23's combined pool, two are the nightly's MLA + indexer pools."""
    if not pools:
        return None
    arch = find_line(lines, _SGL_ARCH)   # the first `Load weight end` is the target model's
    if arch is None or arch[1].group(1) not in lf.DSA_ARCHITECTURES:
        return lf.LAYOUT_PLAIN
    return lf.LAYOUT_ONE_POOL if len(pools) == 1 else lf.LAYOUT_TWO_POOLS


def _sgl_cap(lines: list[LogLine], facts: BootFacts) -> None:
    """The cap's reason (and the cap, when no summary line), from whichever cap line this version prints."""
    requested = None
    advice = None
    if cap := find_line(lines, _SGL_CAP):
        m = cap[1]
        n, why, detail = int(m.group("n")), m.group("why").strip(), m.group("detail") or ""
        if given := _SGL_ADVICE.search(cap[0].msg):
            advice = given.group("advice")   # the engine's own words (0.5.23)
    elif red := find_line(lines, _SGL_REDUCED):
        m = red[1]
        n, detail, requested = int(m.group("n")), m.group("rest"), int(m.group("req"))
        bound = re.search(r"bound by (\w+)", detail) or re.search(r"due to (?:the )?([^.;]+)", detail)
        why = bound.group(1).strip() if bound else ""
    elif bnd := find_line(lines, _SGL_BOUND):
        m = bnd[1]
        n, detail = int(m.group("n")), m.group("rest")
        why = detail.split(" ", 1)[0]
    elif post := find_line(lines, _SGL_POST_CAPTURE):
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
    fix = advice or (advice_for(kind) if kind in ("mamba", "kv", "estimate")
                     else "raise --max-running-requests and the limit the log names")
    facts.cap_reason = f"max_running_requests {verb} {n} by {what}: {fix}"




_SGL_MAMBA_SIZES = re.compile(r"(\w+) size:\s*([\d.]+)\s*GB")


def state_pool(text: str, slots_per_request: int | None) -> dict[str, Any] | None:
    """The mamba state pool's size from SGLang's "Mamba Cache is allocated" line (every `X size: N GB`
    on it summed: conv and ssm state, and under speculative decoding the intermediate caches), and
    what one seat costs: total / (slots / slots per request). None when the log has no such line.
    The recipe: "120 slots cost 41 GB" (24 seats, 1.7 GB per seat); AR "640 slots in 43 GB" (0.34)."""
    line = next((x for x in text.splitlines() if "Mamba Cache is allocated" in x), None)
    if line is None or not (m := _SGL_MAMBA.search(line)):
        return None
    slots = int(m.group(1))
    parts = {name: float(gb) for name, gb in _SGL_MAMBA_SIZES.findall(line)}
    total = round(sum(parts.values()), 2)
    per_seat = round(total * slots_per_request / slots, 3) if slots and slots_per_request else None
    return {"slots": slots, "parts_gb": parts, "total_gb": total, "slots_per_request": slots_per_request,
            "gb_per_seat": per_seat}
