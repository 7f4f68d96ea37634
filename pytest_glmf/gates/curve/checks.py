"""Checks around a curve row: seats (the recipe's wrong verdict), KV memory, and the row's gate rows
and flags (the client's self-check, number by number: selfcheck.py). Pure functions over plain data
(boot facts as a dict, measured rows).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pytest_glmf.gates.boot.hints import seat_cap_hint
from pytest_glmf.gates.curve.spec import SPEC
from pytest_glmf.gates.verdict import Check, checks_from_bounds, fmt
from pytest_glmf.load.selfcheck import LABELS, advice_text, bound_size


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


def lane_name(lane: Any) -> str | None:
    """A lane's name, from its config or the name itself (None: no lane)."""
    return lane if isinstance(lane, str) or lane is None else getattr(lane, "name", None)


def row_gate_checks(row: Mapping[str, Any], bounds: Mapping[str, Any], *, source: str = "",
                    lane: Any = None) -> list[Check]:
    """Every verdict of one curve row: the metric bounds from thresholds.yaml, then the row's own
    validity (seats, KV fit, open-loop sends, token counts, failed requests), which fail the gate
    even when the numbers look fine, because then the numbers are not the server's at that many
    users. A number the client did not measure (row["unmeasured"]) fails only a bound set on it,
    and only when its error interval does not decide that bound: where both ends of the interval
    the true value lies in give the same verdict, that verdict stands (`client_check`).
    `lane`: the seat hint leaves out advice its engine flags already follow (boot/hints.py), and
    the client's advice names its settings in the thresholds file under the lane's name."""
    users = row["users"]
    where = f"@ {users} users"
    name = lane_name(lane)
    hints = {"spread_pct": "noisy runs: check other load on the server, or raise runs",
             "ttft_p95_s": "queueing or prefill: compare with seats and ttft_p50_s"}
    unmeasured = row.get("unmeasured") or {}
    checks = []
    for c in checks_from_bounds("curve", row, bounds, where=where, source=source, hints=hints):
        b = (row.get("client_error") or {}).get(c.metric)
        if c.metric not in unmeasured or not b:
            checks.append(c)
            continue
        ends = [Check(c.metric, b["lo"], c.bound).ok, Check(c.metric, b["hi"], c.bound).ok]
        if ends[0] == ends[1]:      # the interval decides the bound: its verdict is the truth's
            hint = f"the client's error interval [{fmt(b['lo'])}, {fmt(b['hi'])}] is on one side of the bound"
            checks.append(dataclasses.replace(c, value=b["value"], hint="; ".join(x for x in (c.hint, hint) if x)))
        else:     # "not measured" (Check.change), the reason, what would measure it
            advice = advice_text(row.get("client_advice"), "settings", name, need_pct=b["bound_pct"])
            checks.append(dataclasses.replace(c, value=None, cause="client-bound",
                                              hint=unmeasured[c.metric] + (f"; {advice}" if advice else "")))
    allow_queueing = bool(bounds.get("allow_queueing"))
    seat = row.get("seat") or {}
    if not allow_queueing and seat.get("seats") is not None:
        checks.append(Check("seats", seat["seats"], {"min": users}, where=where,
                            source=seat.get("seats_source") or "boot log",
                            hint=seat_cap_hint(seat.get("cap_reason"), lane)))
    for i, rep in enumerate(seat.get("replicas") or []):
        if not allow_queueing and rep["users"] is not None and rep["seats"] is not None:
            checks.append(Check(f"seats of replica {i + 1}", rep["seats"], {"min": rep["users"]}, where=where,
                                source=f"boot log of {rep['name']}", hint=seat_cap_hint(rep.get("cap_reason"), lane)))
    mem = row.get("memory") or {}
    if not allow_queueing and mem.get("fits") is False:
        checks.append(Check("kv tokens per user", mem["tokens_per_user"], {"min": mem["need_per_user"]},
                            where=where, source="boot log kv_tokens",
                            hint="shorten the workload, lower users, or give the KV pool more memory"))
    bad_client = [i + 1 for i, r in enumerate(row.get("per_run", [])) if r["client"]["client_bound"]]
    if bad_client:
        notes = "; ".join(row["per_run"][bad_client[0] - 1]["client"]["notes"])
        late_advice = advice_text(row["per_run"][bad_client[0] - 1]["client"].get("advice"), "settings", name)
        checks.append(Check("client-bound runs", len(bad_client), {"max": 0}, where=where,
                            source=f"runs {bad_client}",
                            hint=f"run invalid, not the server's load: {notes}" + (f"; {late_advice}" if late_advice else ""),
                            cause="client-bound"))
    bad_count = [i + 1 for i, r in enumerate(row.get("per_run", [])) if not r["token_count"]["ok"]]
    if bad_count:
        notes = "; ".join(row["per_run"][bad_count[0] - 1]["token_count"]["problems"])
        checks.append(Check("token-count mismatches", len(bad_count), {"max": 0}, where=where,
                            source=f"runs {bad_count}", hint=notes, cause="server"))
    errors = sum(r["errors"] for r in row.get("per_run", []))
    if errors:
        examples = sorted({e for r in row["per_run"] for e in r.get("error_examples", [])})[:2]
        checks.append(Check("failed requests", errors, {"max": 0}, where=where, hint="; ".join(examples),
                            cause="server"))
    return checks


def describe_flags(row: Mapping[str, Any], names: str = "settings", lane: Any = None) -> list[str]:
    """Human flags for the table's last column. The client's advice names its settings as the
    reader sets them: `names="flags"` in a shell (glmf curve), else their thresholds names
    (under the lane's curve settings when `lane` is given)."""
    flags = list((row.get("seat") or {}).get("notes", [])) + list((row.get("memory") or {}).get("notes", []))
    # a number a gate can bound that the client did not measure: shown as "-", said why here
    unmeasured = {m: why for m, why in (row.get("unmeasured") or {}).items() if m in SPEC.metrics}
    if unmeasured:
        worst = max(unmeasured, key=lambda m: bound_size((row.get("client_error") or {}).get(m) or {}))
        pcts = [(row.get("client_error") or {}).get(m, {}).get("bound_pct") for m in unmeasured]
        advice = advice_text(row.get("client_advice"), names, lane_name(lane),
                             need_pct=None if None in pcts else max(pcts))
        labels = ", ".join(LABELS[m] for m in unmeasured)
        flags.append(f"{labels} not measured ({unmeasured[worst]}" + (f"; {advice})" if advice else ")"))
    runs = row.get("per_run", [])
    late = [i for i, r in enumerate(runs, 1) if r["client"]["client_bound"]]
    if late:
        first = runs[late[0] - 1]["client"]
        late_advice = advice_text(first.get("advice"), names, lane_name(lane))
        flags.append(f"client-bound run(s) {','.join(map(str, late))} ({first['notes'][0]}"
                     + (f"; {late_advice})" if late_advice else ")"))
    if row.get("replaced_runs"):
        flags.append(f"{row['replaced_runs']} run(s) measured again for the client ({row['replaced_why'][0]})")
    for i, r in enumerate(runs, 1):
        flags += [f"run {i}: {n}" for n in r["token_count"]["problems"]]
        if r.get("speed_unmeasured"):
            flags.append(f"run {i}: {r['speed_unmeasured']} request(s) without a measurable speed "
                         "(all tokens in one read)")
        if r["errors"]:
            flags.append(f"run {i}: {r['errors']} failed requests")
    if "flush_endpoint" in row and row["flush_endpoint"] is None:
        # harmless for our numbers (every request starts with a unique line) but worth knowing
        flags.append("prefix cache not flushed (no /flush_cache or /reset_prefix_cache)")
    spread, limit = row.get("spread_pct"), row.get("spread_max_pct")
    if spread is not None and limit is not None and spread > limit:
        flags.append(f"spread {spread:.1f} % > {limit:g} %")
    return flags
