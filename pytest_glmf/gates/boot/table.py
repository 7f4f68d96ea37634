"""The boot facts as the terminal table the boot gate and `glmf bootlog` print.

Sizes are GiB, labelled so (SGLang prints "GB" for GiB; vLLM prints GiB). A fact the boot log did
not give says where it came from ("1024 (/server_info)").
"""
from __future__ import annotations

from pytest_glmf.gates.boot.parse import BootFacts
from pytest_glmf.text import fmt, render_table


def render_facts(facts: BootFacts, version: str | None = None) -> str:
    """The readable key | value table of `glmf bootlog FILE`."""

    d = facts.to_dict()
    rows: list[list[str]] = [["engine", fmt(d["engine"])]]
    if version:
        rows.append(["engine_version", version])
    for key in ("max_running_requests", "requested_max_running_requests", "max_mamba_cache_size",
                "state_slots_per_request", "kv_tokens", "context_len"):
        told = facts.sources.get(key)
        rows.append([key, fmt(d[key]) + (f" ({told})" if told and told != "boot log" else "")])

    def gib(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} GiB"

    why = facts.sources.get("kv_cache_memory_gib")     # vLLM 0.34: which line sized the pool (gates/boot/vllm.py)
    rows.append(["kv_cache_memory_gib", gib(facts.kv_cache_memory_gib) + (f" ({why})" if why else "")])
    for i, pool in enumerate(facts.kv_pools):
        size = f", {gib(pool['size_gb'])}" if pool.get("size_gb") is not None else ""
        rows.append([f"kv_pool[{i}]", f"{fmt(pool['tokens'])} tokens, {pool['dtype'] or '?'}{size}"])
    if facts.max_concurrency:
        mc = facts.max_concurrency
        seats = facts.max_running_requests
        short = (f" (fewer full-length requests than the {seats:,} seats)"
                 if seats is not None and mc["factor"] < seats else "")
        rows.append(["max_concurrency", f"{mc['factor']:g}x at {mc['tokens_per_request']:,} tokens/request{short}"])
    bs = facts.cuda_graph_bs
    shown = "-" if bs is None else (", ".join(map(str, bs)) or "none") if len(bs) <= 12 else \
        f"{len(bs)} sizes, {bs[0]}..{bs[-1]}"
    rows += [["cuda_graph_bs", shown], ["ready", str(facts.ready)], ["cap_reason", facts.cap_reason or "-"]]
    rows += [["problem", p] for p in facts.problems] or [["problems", "none"]]
    return render_table(rows, ["key", "value"])
