"""Checks around a curve row: seats (the recipe's wrong verdict), KV memory, the client's own health,
and the row's gate rows. Pure functions over plain data (boot facts as a dict, measured rows).
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pytest_glmf.gates.boot.hints import seat_cap_hint
from pytest_glmf.gates.curve.records import (
    ERROR_METRICS,
    combine_error_bounds,
    error_bounds,
    merged_events,
    percentile,
    send_lateness_s,
)
from pytest_glmf.gates.curve.spec import DEFAULTS, SPEC
from pytest_glmf.gates.verdict import Check, checks_from_bounds, fmt

MERGED_MAX_FRAC = 0.01      # info only: share of token events that shared a socket read with a later one


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


def late_max_s(lags_s: Sequence[float], stall_max_s: float | None, probe_s: float) -> float:
    """How late the loop can have been to make a read: the longest measured loop lag or process
    stall, plus the probe interval (a stall shorter than it can fall between two probes)."""
    return max(max(lags_s, default=0.0), stall_max_s or 0.0) + probe_s


LABELS = {"per_user_tok_s": "per-user tok/s", "per_user_tok_s_p5": "p5 tok/s", "ttft_p50_s": "TTFT p50",
          "ttft_p95_s": "TTFT p95", "ttft_p99_s": "TTFT p99", "itl_p50_s": "ITL p50", "itl_p95_s": "ITL p95",
          "itl_p99_s": "ITL p99"}
# Of the bounded numbers, those a gate can set a threshold on (spec.py): a row that could not measure
# one is measured again (ITL p50 and the p99s are only marked "not measured").
GATED_ERROR_METRICS = tuple(m for m in ERROR_METRICS if m in SPEC.metrics)
# The numbers a service level speaks of (speed and TTFT): a row that could not measure one of them is
# `client_bound` (the capacity search then has no verdict for it).
SPEED_TTFT = ("per_user_tok_s", "per_user_tok_s_p5", "ttft_p50_s", "ttft_p95_s")
# The client's settings the advice names: by their thresholds names inside pytest, by their flags in a shell
FLAG_OF = {"workers": "--workers", "client_error_max_pct": "--client-error-max"}


def bound_text(error: Mapping[str, Any] | None, names: Sequence[str] = ERROR_METRICS) -> str:
    """The bounds in one line, e.g. "per-user tok/s ±0.2 %, TTFT p50 ±0.0 %, ITL p50 ±2.40 ms"
    (a zero estimate's bound is absolute: it has no relative size)."""
    parts = []
    for name in names:
        b = (error or {}).get(name)
        if b and b.get("bound_pct") is not None:
            parts.append(f"{LABELS[name]} ±{_pct(b['bound_pct'])}")
        elif b and b.get("bound") is not None:
            parts.append(f"{LABELS[name]} ±{_amount(name, b['bound'])} (of a zero)")
    return ", ".join(parts) or "-"


def _pct(x: float) -> str:
    return "unbounded" if math.isinf(x) else f"{x:.1f} %" if x < 10 else f"{x:.0f} %"


def _amount(name: str, x: float) -> str:
    if math.isinf(x):
        return "unbounded"
    return f"{x * 1e3:.2f} ms" if name.startswith(("ttft", "itl")) else f"{x:,.1f} tok/s"


def error_over(error: Mapping[str, Any] | None, max_pct: float, names: Sequence[str] = ERROR_METRICS) -> list[str]:
    """The metrics the client did not measure within `max_pct` % of their value: a bound over that
    share, or a bound on a zero estimate (no relative error is defined there; several tokens per
    socket read make ITL p50 zero)."""
    out = []
    for m in names:
        b = (error or {}).get(m)
        if not b or b.get("bound") is None:
            continue
        if (b["bound_pct"] is None and b["bound"] > 0) or (b["bound_pct"] is not None and b["bound_pct"] > max_pct):
            out.append(m)
    return out


def unmeasured_head(name: str, b: Mapping[str, Any], max_pct: float) -> str:
    """Why a metric is not measured, in its own numbers."""
    if b["bound_pct"] is None:
        return (f"{LABELS[name]} is {_amount(name, b['value'])} as stamped and can be up to {_amount(name, b['bound'])}: "
                "several tokens arrived per socket read, and an error bound on a zero has no relative size")
    value = "-" if math.isinf(b["value"]) else _amount(name, b["value"])
    return (f"client timestamps can be off by up to {_amount(name, b['bound'])} on {LABELS[name]} "
            f"({_pct(b['bound_pct'])} of {value}) > {max_pct:g} % allowed")


def machine_load() -> tuple[float | None, int]:
    """(the 1-minute load average, the machine's cores): the machine, not this process's share of it."""
    try:
        load: float | None = os.getloadavg()[0]
    except (AttributeError, OSError):     # not Unix
        load = None
    return load, os.cpu_count() or 1


def client_advice(error: Mapping[str, Any] | None, over: Sequence[str], *, workers: int = 1,
                  cores: int | None = None, load: float | None = None,
                  machine_cores: int | None = None) -> dict[str, Any]:
    """What would let the client measure what it did not: `starved` when the machine's load
    average exceeds its cores (more client processes only add to it), else `workers` (more client
    processes, while its cores allow); `client_error_max_pct`: the allowed error that would have
    passed (None where no finite % would: an unbounded number or a zero estimate)."""
    pcts = [error[m]["bound_pct"] for m in over if error and error[m]["bound_pct"] is not None]
    need = max(pcts, default=None)
    starved = load is not None and machine_cores is not None and load > machine_cores
    more = None
    if not starved and (cores is None or workers < cores):
        more = min(cores or 2 * workers, max(2, 2 * workers))
    return {"load": load, "machine_cores": machine_cores, "starved": starved, "workers_now": workers,
            "cores": cores, "workers": more,
            "client_error_max_pct": None if need is None or math.isinf(need) else math.ceil(need * 10) / 10}


def setting_text(name: str, value: float, names: str = "settings", lane: str | None = None) -> str:
    """One of the client's settings as the user sets it: its flag in a shell (`names="flags"`), else
    its name in the thresholds file (the lane's curve settings)."""
    if names == "flags":
        return f"{FLAG_OF[name]} {value:g}"
    where = f" (thresholds.yaml: lanes.{lane}.curve.settings)" if lane else " (curve setting)"
    return f"{name}: {value:g}{where}"


def advice_text(advice: Mapping[str, Any] | None, names: str = "settings", lane: str | None = None,
                need_pct: float | None | Literal["all"] = "all") -> str:
    """The advice (client_advice) in words that fit the machine: a starved client is told so,
    with the load and cores, never to add processes. `need_pct`: the largest bound (%) of the
    numbers the reader asks about (one whose bound failed a threshold, those the table shows),
    the allowed error that would have passed them (default: every number the client did not
    measure; None: no % would)."""
    if not advice:
        return ""
    accept = advice.get("client_error_max_pct") if need_pct == "all" else (
        None if need_pct is None or math.isinf(need_pct) else math.ceil(need_pct * 10) / 10)
    if advice.get("starved"):
        more = "--workers" if names == "flags" else "workers"
        text = (f"load {advice['load']:.1f} on {advice['machine_cores']} cores: the client was starved of CPU; "
                f"more {more} will not help: measure from a quieter machine")
    elif advice.get("workers"):
        text = f"give the client more processes: {setting_text('workers', advice['workers'], names, lane)}"
    else:
        text = "the client already has a process per core: measure from a quieter machine"
    if accept is not None:
        text += f", or accept the error: {setting_text('client_error_max_pct', accept, names, lane)} would have passed"
    return text


def client_check(lags_s: Sequence[float], cpu_frac: float | None, *, lag_p99_max_s: float = DEFAULTS.lag_p99_max_s,
                 cpu_max_frac: float = DEFAULTS.cpu_max_frac, stall_max_s: float | None = None, stamps: str = "user",
                 merged_events: int = 0, token_events: int = 0, error: Mapping[str, Any] | None = None,
                 error_max_pct: float = DEFAULTS.spread_max_pct, workers: int = 1,
                 cores: int | None = None, load: float | None = None,
                 machine_cores: int | None = None) -> dict[str, Any]:
    """Which of this run's numbers did the client measure within what the row allows?

    The verdict is the error, not the suspicion, and each number is judged by its own bound:
    `error` (records.error_bounds) bounds how far each of the run's numbers (TTFT p50/p95/p99,
    per-user tok/s and its p5, ITL p50/p95/p99) can be from the times the events really arrived;
    a number whose bound exceeds `error_max_pct` % of it (or that is a zero with a bound) is
    `unmeasured`, with the reason, and the others stand. `causes` says what made each bound, and
    `advice` what would help (client_advice: the load and cores when the machine starved the
    client). The suspicions (event-loop lag p99 over `lag_p99_max_s`, CPU over `cpu_max_frac` of
    a core, events sharing reads) are kept as `info`: they explain a bound, they decide nothing.
    `notes` (and `client_bound`) are for what makes the whole run not the load asked for
    (workers_check: open-loop sends late)."""
    lag_p99 = percentile(lags_s, 99)
    merged_frac = merged_events / token_events if token_events else 0.0
    info = []
    why = ""
    if lag_p99 is not None and lag_p99 > lag_p99_max_s:
        if stall_max_s is not None and stall_max_s > lag_p99_max_s and cpu_frac is not None and cpu_frac < 0.5:
            why = (f" (event-loop lag p99 {lag_p99 * 1e3:.1f} ms; process stalled up to {stall_max_s * 1e3:.0f} ms "
                   f"at {cpu_frac * 100:.0f} % CPU: other load on this machine)")
        else:
            why = f" (event-loop lag p99 {lag_p99 * 1e3:.1f} ms)"
        info.append(f"client event-loop lag p99 {lag_p99 * 1e3:.1f} ms > {lag_p99_max_s * 1e3:g} ms")
    if merged_frac > MERGED_MAX_FRAC:
        info.append(f"{merged_frac * 100:.1f} % of token events shared a socket read with a later one")
    if cpu_frac is not None and cpu_frac > cpu_max_frac:
        info.append(f"client CPU {cpu_frac * 100:.0f} % of a core > {cpu_max_frac * 100:.0f} %")
    error = dict(error or {})
    over = error_over(error, error_max_pct)
    shared, events = error.get("shared_events", 0), error.get("token_events", 0)
    cause = why + (f": {shared} of {events} token events shared a socket read with a later one" if shared
                   else ": reads stamped in user space, as late as the event loop ran")
    causes = {m: cause for m in over}
    return {"stamps": stamps, "lag_p50_s": percentile(lags_s, 50), "lag_p99_s": lag_p99,
            "lag_max_s": max(lags_s, default=None), "stall_max_s": stall_max_s,
            "merged_events": merged_events, "token_events": token_events,
            "cpu_frac": cpu_frac, "error": error, "error_max_pct": error_max_pct, "error_over": over,
            "unmeasured": {m: unmeasured_head(m, error[m], error_max_pct) + causes[m] for m in over},
            "causes": causes,
            "advice": client_advice(error, over, workers=workers, cores=cores, load=load, machine_cores=machine_cores),
            "info": info, "client_bound": False, "notes": []}


def bound_size(b: Mapping[str, Any] | None) -> float:
    """A bound's size for ordering: its %, a zero estimate's bound before any % (-1: no bound)."""
    if not b or b.get("bound") is None:
        return -1.0
    return math.inf if b.get("bound_pct") is None else b["bound_pct"]


def workers_check(shards: Sequence[Any], *, lag_p99_max_s: float = DEFAULTS.lag_p99_max_s,
                  cpu_max_frac: float = DEFAULTS.cpu_max_frac, cores: int | None = None,
                  error_max_pct: float = DEFAULTS.spread_max_pct, load: float | None = None,
                  machine_cores: int | None = None) -> dict[str, Any]:
    """The self-check of a run over its workers (streams.ShardResult each). The run's error bounds
    come from all its records (each read bounded by its own worker's stamps and lag), and decide
    which numbers were measured; every worker's own bounds, lag and CPU are kept in `per_worker`,
    and the worker whose own records are off the most on a number not measured is named in its
    reason. Open loop: requests sent later than the arrival process said mark the whole run
    (`notes`, `client_bound`: the load was not the one asked for). `load` and `machine_cores`
    (machine_load, at the run's end) say whether the machine starved the client. With one worker
    the result is that worker's check."""
    n = len(shards)
    lates = {s.worker: late_max_s(s.lags_s, s.stall_max_s, getattr(s, "lag_probe_s", 0.005)) for s in shards}
    kernel = {s.worker: s.stamps == "kernel" for s in shards}
    per = []
    for s in shards:
        c = client_check(s.lags_s, s.cpu_frac, lag_p99_max_s=lag_p99_max_s, cpu_max_frac=cpu_max_frac,
                         stall_max_s=s.stall_max_s, stamps=s.stamps,
                         merged_events=sum(merged_events(r) for r in s.records),
                         token_events=sum(len(r.chunk_times_s) for r in s.records),
                         error=error_bounds(s.records, lates[s.worker], kernel[s.worker]), error_max_pct=error_max_pct,
                         workers=n, cores=cores, load=load, machine_cores=machine_cores)
        late_p99 = percentile(send_lateness_s(s.records), 99)
        if late_p99 is not None and late_p99 > lag_p99_max_s:
            c["notes"].append(f"open-loop arrivals sent late: p99 {late_p99 * 1e3:.1f} ms after their scheduled "
                              f"times > {lag_p99_max_s * 1e3:g} ms (the arrival process was not kept)")
        c.update(worker=s.worker + 1, pid=s.pid, streams=len(s.records), cpu_s=s.cpu_s, wall_s=s.wall_s,
                 send_late_p99_s=late_p99, client_bound=bool(c["notes"]))
        per.append(c)
    if n == 1:
        whole = {k: v for k, v in per[0].items() if k not in ("worker", "pid", "streams", "cpu_s", "wall_s")}
        whole["notes"] = list(whole["notes"])
    else:
        stamps = "kernel" if all(s.stamps == "kernel" for s in shards) else "user"
        records = [r for s in shards for r in s.records]
        whole = client_check([x for s in shards for x in s.lags_s], None, lag_p99_max_s=lag_p99_max_s,
                             cpu_max_frac=cpu_max_frac, stall_max_s=max(s.stall_max_s for s in shards),
                             stamps=stamps, merged_events=sum(c["merged_events"] for c in per),
                             token_events=sum(c["token_events"] for c in per),
                             error=error_bounds(records, lates, kernel), error_max_pct=error_max_pct, workers=n,
                             cores=cores, load=load, machine_cores=machine_cores)
        for m in whole["error_over"]:
            mine = [c for c in per if m in c["error_over"]]
            if mine:
                w = max(mine, key=lambda c: bound_size(c["error"][m]))
                whole["causes"][m] += (f"; worker {w['worker']} of {n} (pid {w['pid']}, {w['streams']} streams): "
                                       f"{w['unmeasured'][m]}")
                whole["unmeasured"][m] = unmeasured_head(m, whole["error"][m], error_max_pct) + whole["causes"][m]
        whole["notes"] = [f"worker {c['worker']} of {n} (pid {c['pid']}, {c['streams']} streams): {note}"
                          for c in per for note in c["notes"]]
        whole["cpu_frac"] = max(c["cpu_frac"] for c in per)     # the busiest worker's core
        wall = max(s.wall_s for s in shards)
        cores = min(n, cores or n)
        cpu_cores = sum(s.cpu_s for s in shards) / max(wall, 1e-9)
        whole["cpu_cores"] = cpu_cores
        if cpu_cores > cpu_max_frac * cores:
            whole["info"].append(f"client CPU {cpu_cores:.2f} cores of the {cores} its {n} workers run on "
                                 f"> {cpu_max_frac * 100:.0f} %")
        whole["send_late_p99_s"] = percentile([x for s in shards for x in send_lateness_s(s.records)], 99)
        starts = [min((r.t_send_s for r in s.records if r.t_due_s is None), default=None) for s in shards]
        firsts = [f for f in starts if f is not None and not math.isnan(f)]
        whole["start_skew_s"] = max(firsts) - min(firsts) if len(firsts) == n else None
    whole["client_bound"] = bool(whole["notes"])
    whole["workers"] = n
    whole["per_worker"] = per
    return whole


def row_client(per_run: Sequence[Mapping[str, Any]], error_max_pct: float) -> dict[str, Any]:
    """The client's account of a row from its runs' (each run's `client`): the row's bounds
    (records.combine_error_bounds: its numbers are medians over runs, bounded by the medians of
    the runs' ends), each number judged by its own bound (`unmeasured`: metric -> reason, the
    cause taken from the run that bounded it worst), the advice for those, and the runs whose
    sends were late (`late_runs`, 1-based)."""
    clients = [r["client"] for r in per_run]
    error = combine_error_bounds([c["error"] for c in clients])
    over = error_over(error, error_max_pct)
    unmeasured = {}
    for m in over:
        worst = max((c for c in clients if m in (c.get("causes") or {})), key=lambda c: bound_size(c["error"][m]),
                    default=None)
        cause = worst["causes"][m] if worst is not None else ""
        unmeasured[m] = unmeasured_head(m, error[m], error_max_pct) + cause
    advice = [c.get("advice") or {} for c in clients]
    loads = [a["load"] for a in advice if a.get("load") is not None]
    first = advice[0] if advice else {}
    return {"error": error, "unmeasured": unmeasured,
            "advice": client_advice(error, over, workers=first.get("workers_now", 1), cores=first.get("cores"),
                                    load=max(loads, default=None), machine_cores=first.get("machine_cores")),
            "late_runs": [i for i, c in enumerate(clients, 1) if c["client_bound"]]}


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
