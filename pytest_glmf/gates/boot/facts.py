"""BootFacts (the boot gate's contract, docs/architecture.md section 5) and the line helpers both engines' parsers share.

Per-rank lines (SGLang `[ts TP3]`, vLLM `(Worker_TP1 pid=..)`) are copies of one fact: `find_line` takes
a fact from the primary rank (TP0 / DP0 / rank=0 / no rank) when it printed one, else from the
first rank that did.
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
    kv_pool_layout: str | None = None               # engine.logformats LAYOUT_* (how the pool lines map to pools)
    kv_cache_memory_gib: float | None = None
    max_concurrency: dict[str, Any] | None = None    # {tokens_per_request, factor} (vLLM)
    cuda_graph_bs: list[int] | None = None
    ready: bool = False
    problems: list[str] = field(default_factory=list)
    # where seats, KV tokens and context came from: "boot log", or the server's word ("/server_info",
    # "/v1/models") where the log says nothing (gates/boot/told.py)
    sources: dict[str, str] = field(default_factory=dict)
    # whether a boot log was read (parse_boot_log of a non-empty text); False: the facts are the
    # server's word alone, and nothing was checked for the log's problems
    log_read: bool = False

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
DOCKER_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s")


@dataclass
class LogLine:
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


def log_lines(text: str) -> list[LogLine]:
    out = []
    for no, raw in enumerate(text.splitlines(), start=1):
        if raw.startswith("# source:"):
            continue  # provenance header of the saved excerpts, not engine output
        raw = DOCKER_TS.sub("", raw, count=1)
        rank, msg = "", raw
        if m := _SGL_PREFIX.match(raw):
            rank, msg = (m.group("rank") or "").strip(), raw[m.end():]
        elif m := _VLLM_PREFIX.match(raw):
            rank, msg = (m.group("proc") or "").strip(), raw[m.end():]
        elif m := _VLLM_PROC_ONLY.match(raw):
            rank, msg = m.group("proc").strip(), raw[m.end():]
        out.append(LogLine(no, rank, _rank_is_primary(rank), msg.strip()))
    return out


def find_line(lines: list[LogLine], pattern: re.Pattern[str]) -> tuple[LogLine, re.Match[str]] | None:
    """First match on the primary rank, else the first match anywhere."""
    first = None
    for line in lines:
        if m := pattern.search(line.msg):
            if line.primary:
                return line, m
            first = first or (line, m)
    return first


def find_last_line(lines: list[LogLine], patterns: list[re.Pattern[str]]) -> tuple[LogLine, re.Match[str]] | None:
    """The last line any of `patterns` matches on the primary rank, else the last anywhere (a value
    the engine revises as it boots: the last word is the one it runs with)."""
    last = last_primary = None
    for line in lines:
        if m := next((m for p in patterns if (m := p.search(line.msg))), None):
            last = (line, m)
            if line.primary:
                last_primary = last
    return last_primary or last


def parse_int(s: str) -> int:
    return int(s.replace(",", ""))


def torch_dtype_name(s: str | None) -> str | None:
    return None if s is None else s.strip().removeprefix("torch.")


