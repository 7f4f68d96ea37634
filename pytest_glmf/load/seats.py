"""Does a row's load fit the server: its users against the seats (the recipe's wrong verdict: users
beyond `max_running_requests` queue) and its tokens against the KV pool, with what /metrics showed
running and queued. Pure functions over plain data (boot facts as a dict); the curve's verdicts on
them are gates/curve/checks.py.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def seat_check(users: int, facts: Mapping[str, Any] | None, observed: Mapping[str, Any] | None = None,
               decode_steps: int | None = None) -> dict[str, Any]:
    """Compare users with the server's effective seats (boot facts) and with what /metrics showed
    running and queued during the run. SGLang refreshes its running gauge when it logs a prefill
    (with the requests running before it) and every `decode_log_interval` decode steps
    (srt/managers/scheduler_components/metrics_reporter.py): a run of fewer decode steps than that
    (`decode_steps`, the output tokens) never shows its own requests running, so no note is made."""
    facts = facts or {}
    seats = facts.get("max_running_requests")
    observed = observed or {}
    notes: list[str] = []
    shared = seats is not None and users > seats
    if shared:
        notes.append(f"{users} clients sharing {seats} seats")
    max_running, max_queued = observed.get("max_running"), observed.get("max_queued")
    # Informational only: SGLang queues requests transiently while it prefills a burst in chunks
    # even with free seats, and sampling can miss the peak, so /metrics never decides a verdict.
    refresh = facts.get("decode_log_interval")
    stale = refresh is not None and decode_steps is not None and decode_steps < refresh
    if max_running is not None and max_running < users and not stale:
        notes.append(f"/metrics: at most {max_running} of {users} requests running when sampled "
                     f"(up to {max_queued or 0} queued)")
    replicas = []
    if facts.get("replicas"):
        # several replicas: the client deals streams round-robin, so each one's share is known
        # (a router assigns its own: then only the summed seats are compared)
        k = len(facts["replicas"])
        dealt = facts.get("assigned_by", "client") == "client"
        for i, rep in enumerate(facts["replicas"]):
            share = users // k + (1 if i < users % k else 0) if dealt else None
            rep_seats = rep.get("max_running_requests")
            over = share is not None and rep_seats is not None and share > rep_seats
            if over:
                notes.append(f"replica {i + 1} ({rep.get('name')}): {share} clients sharing {rep_seats} seats")
            replicas.append({"name": rep.get("name"), "users": share, "seats": rep_seats, "shared": over,
                             "cap_reason": rep.get("cap_reason")})
        shared = shared or any(r["shared"] for r in replicas)
    # where the seats came from: the boot log, or the server's word where it had none (gates/boot/told.py)
    source = (facts.get("sources") or {}).get("max_running_requests", "boot log")
    return {"seats": seats, "seats_source": source, "shared": shared, "cap_reason": facts.get("cap_reason"),
            "requested_seats": facts.get("requested_max_running_requests"),
            "observed_max_running": max_running, "observed_max_queued": max_queued, "notes": notes,
            "gauge_stale": stale,
            "replicas": replicas}


def memory_check(users: int, kv_tokens: int | None, prompt_tokens: float | None, max_tokens: int,
                 shared_tokens: float = 0.0) -> dict[str, Any]:
    """users x (prompt + output tokens) against the KV token pool: tokens per user the pool allows at
    this row (the recipe: a 201K pool is ~4K per user at 48 users, 1.5K at 128). A prefix every
    user shares (`shared_tokens`, a prefix cache stores it once) counts once; `need_per_user` is
    then what each user adds beside it."""
    shared = int(round(shared_tokens))
    need = int(round((prompt_tokens or 0) + max_tokens)) - shared
    if not kv_tokens:
        return {"kv_tokens": None, "tokens_per_user": None, "need_per_user": need, "shared_tokens": shared,
                "fits": None, "notes": []}
    per_user = (kv_tokens - shared) // max(users, 1)
    total = shared + users * need
    fits = total <= kv_tokens
    what = f"{shared:,} shared + {users} x {need:,}" if shared else f"{users} x {need:,}"
    notes = [] if fits else [f"workload needs {what} = {total:,} KV tokens; pool holds "
                             f"{kv_tokens:,} ({per_user:,} per user)"]
    return {"kv_tokens": kv_tokens, "tokens_per_user": per_user, "need_per_user": need, "shared_tokens": shared,
            "fits": fits, "notes": notes}
