"""Boot log -> BootFacts, for SGLang and vLLM. Contract: DESIGN.md section 5.

(Parser to be completed by the boot-log work; the dataclass and its keys are the contract.)
"""
from __future__ import annotations

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


def parse_boot_log(text: str) -> BootFacts:
    raise NotImplementedError
