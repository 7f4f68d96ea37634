"""The boot facts as the terminal table the boot gate and `glmf bootlog` print."""
from __future__ import annotations

from pytest_glmf.gates.boot.parse import BootFacts
from pytest_glmf.gates.verdict import fmt, render_table


def render_facts(facts: BootFacts, version: str | None = None) -> str:
    """The readable key | value table of `glmf bootlog FILE`."""

    d = facts.to_dict()
    rows: list[list[str]] = [["engine", fmt(d["engine"])]]
    if version:
        rows.append(["engine_version", version])
    for key in ("max_running_requests", "requested_max_running_requests", "max_mamba_cache_size",
                "state_slots_per_request", "kv_tokens", "context_len"):
        rows.append([key, fmt(d[key])])
    def gb(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    rows.append(["kv_cache_memory_gib", gb(facts.kv_cache_memory_gib)])
    for i, pool in enumerate(facts.kv_pools):
        rows.append([f"kv_pool[{i}]", f"{fmt(pool['tokens'])} tokens, {pool['dtype'] or '?'}, {gb(pool['size_gb'])} GB"])
    if facts.max_concurrency:
        mc = facts.max_concurrency
        rows.append(["max_concurrency", f"{mc['factor']:g}x at {mc['tokens_per_request']:,} tokens/request"])
    bs = facts.cuda_graph_bs
    shown = "-" if bs is None else (", ".join(map(str, bs)) or "none") if len(bs) <= 12 else \
        f"{len(bs)} sizes, {bs[0]}..{bs[-1]}"
    rows += [["cuda_graph_bs", shown], ["ready", str(facts.ready)], ["cap_reason", facts.cap_reason or "-"]]
    rows += [["problem", p] for p in facts.problems] or [["problems", "none"]]
    return render_table(rows, ["key", "value"])
