"""What the server can hold at most, from its boot facts: the search never asks for more users
than its seats (beyond them requests queue) or than its KV pool holds for the workload (beyond it
the server admits fewer and queues the rest), unless the service level allows queueing.

KV pool arithmetic, as the recipe does it ("a 201K-token KV pool: about 4K tokens per user at
48"): each user holds its prompt and its whole output (the load sends ignore_eos, so the server
reserves all of it), and a prefix every user shares is held once:

    users <= (kv_tokens - shared) / (prompt + output - shared)

A server also keeps a page per request and admits against reservations (SGLang's PrefillAdder), so
it may admit a few users fewer than this; such a users value then fails on TTFT (the extra users
queue), which the probe shows.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_glmf.gates.boot.hints import seat_cap_hint
from pytest_glmf.gates.capacity.search import Bound


def kv_hint(facts: Mapping[str, Any]) -> str:
    """The knobs that give the KV pool more tokens, in the engine's own flags."""
    if facts.get("engine") == "vllm":
        return "raise --gpu-memory-utilization, or shorten the context per user"
    hint = "raise --mem-fraction-static"
    if facts.get("max_mamba_cache_size"):
        # the recipe's tradeoff: state slots and KV tokens share one budget
        hint += (f", or trade state slots for KV tokens (fewer --max-mamba-cache-size than "
                 f"{facts['max_mamba_cache_size']}, at the cost of seats)")
    return hint + ", or shorten the context per user"


def users_bound(facts: Mapping[str, Any] | None, *, prompt_tokens: float, max_tokens: int, shared_tokens: float = 0.0,
                max_users: int, allow_queueing: bool = False, lane: Any = None) -> tuple[Bound, list[Bound]]:
    """The binding bound (the smallest) and every bound that applies, for this workload. `lane`:
    the seat hint leaves out advice its engine flags already follow (boot/hints.py)."""
    facts = facts or {}
    bounds = [Bound(max_users, "max_users", f"the search's ceiling, settings.max_users = {max_users}",
                    "raise capacity settings.max_users")]
    seats = facts.get("max_running_requests")
    if seats:
        # the hint carries the boot log's cap reason with the flag that raises it
        bounds.append(Bound(seats, "seats", f"{seats} seats (max_running_requests)",
                            seat_cap_hint(facts.get("cap_reason"), lane)))
    n = kv_users(facts, prompt_tokens, max_tokens, shared_tokens)
    if n is not None:
        per_user = prompt_tokens + max_tokens - shared_tokens
        shared = f"{shared_tokens:,.0f} shared + " if shared_tokens else ""
        bounds.append(Bound(n, "kv_pool", f"KV pool {facts['kv_tokens']:,} tokens / ({shared}{per_user:,.0f} per user)",
                            kv_hint(facts)))
    binding = [b for b in bounds if allow_queueing is False or b.kind == "max_users"]
    return min(binding, key=lambda b: (b.value, b.kind == "max_users")), bounds


def kv_users(facts: Mapping[str, Any] | None, prompt_tokens: float, max_tokens: int, shared_tokens: float = 0.0) -> int | None:
    """How many users of this size the KV pool holds (None: the pool size is unknown)."""
    kv = (facts or {}).get("kv_tokens")
    if not kv:
        return None
    return max(0, int((kv - shared_tokens) // max(1.0, prompt_tokens + max_tokens - shared_tokens)))
