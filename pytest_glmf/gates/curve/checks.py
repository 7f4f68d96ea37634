"""Checks around a curve row: seats (the recipe's wrong verdict), KV memory, the client's own health,
and the row's gate rows. Pure functions over plain data (boot facts as a dict, measured rows).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.boot.hints import seat_cap_hint
from pytest_glmf.gates.curve.records import ERROR_METRICS, error_bounds, merged_events, percentile, send_lateness_s
from pytest_glmf.gates.curve.spec import DEFAULTS
from pytest_glmf.gates.verdict import Check, checks_from_bounds

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
          "ttft_p95_s": "TTFT p95", "itl_p50_s": "ITL p50", "itl_p95_s": "ITL p95"}


def bound_text(error: Mapping[str, Any] | None, names: Sequence[str] = ERROR_METRICS) -> str:
    """The bounds in one line, e.g. "per-user tok/s ±0.2 %, TTFT p50 ±0.0 %, ..."."""
    parts = []
    for name in names:
        b = (error or {}).get(name)
        if b and b.get("bound_pct") is not None:
            parts.append(f"{LABELS[name]} ±{_pct(b['bound_pct'])}")
    return ", ".join(parts) or "-"


def _pct(x: float) -> str:
    return "inf %" if math.isinf(x) else f"{x:.1f} %" if x < 10 else f"{x:.0f} %"


def _amount(name: str, x: float) -> str:
    if math.isinf(x):
        return "unbounded"
    return f"{x * 1e3:.2f} ms" if name.startswith(("ttft", "itl")) else f"{x:,.1f} tok/s"


def error_over(error: Mapping[str, Any] | None, max_pct: float) -> list[str]:
    """The metrics whose bound exceeds `max_pct` % of their value."""
    return [m for m in ERROR_METRICS if (error or {}).get(m) and error[m]["bound_pct"] is not None  # type: ignore[index]
            and error[m]["bound_pct"] > max_pct]  # type: ignore[index]


def error_note(error: Mapping[str, Any], over: Sequence[str], max_pct: float, *, workers: int = 1,
               cores: int | None = None, why: str = "") -> str:
    """The flag of a run whose timestamps can be off by more than the row allows: the metric, its
    bound, what caused it, the settings to change and the value of client_error_max_pct that would
    have passed."""
    worst = max(over, key=lambda m: error[m]["bound_pct"])
    b = error[worst]
    need = max(error[m]["bound_pct"] for m in over)
    shared, events = error.get("shared_events", 0), error.get("token_events", 0)
    cause = (f"{shared} of {events} token events shared a socket read with a later one" if shared
             else "reads stamped in user space, as late as the event loop ran")
    remedies = []
    if cores is None or workers < cores:
        remedies.append(f"give the client more processes: --workers {min(cores or 2 * workers, max(2, 2 * workers))} "
                        "(curve setting workers)")
    else:
        remedies.append("the client already has a process per core: run it on a quieter machine")
    if not math.isinf(need):
        remedies.append(f"accept the error: --client-error-max {math.ceil(need * 10) / 10:g} (curve setting "
                        "client_error_max_pct) would have passed")
    value = "-" if math.isinf(b["value"]) else _amount(worst, b["value"])
    return (f"client timestamps can be off by up to {_amount(worst, b['bound'])} on {LABELS[worst]} "
            f"({_pct(b['bound_pct'])} of {value}) > {max_pct:g} % allowed (client_error_max_pct, default spread_max_pct){why}: {cause}; "
            + ", or ".join(remedies))


def client_check(lags_s: Sequence[float], cpu_frac: float | None, *, lag_p99_max_s: float = DEFAULTS.lag_p99_max_s,
                 cpu_max_frac: float = DEFAULTS.cpu_max_frac, stall_max_s: float | None = None, stamps: str = "user",
                 merged_events: int = 0, token_events: int = 0, error: Mapping[str, Any] | None = None,
                 error_max_pct: float = DEFAULTS.spread_max_pct, workers: int = 1,
                 cores: int | None = None) -> dict[str, Any]:
    """Could the client's own lateness have moved this run's numbers by more than the row allows?

    The verdict is the error, not the suspicion: `error` (records.error_bounds) bounds how far
    each of the run's numbers (TTFT p50/p95, per-user tok/s and its p5, ITL p50/p95) can be from
    the times the events really arrived, from the reads that were late or carried several events;
    the run is marked only when a bound exceeds `error_max_pct` % of its number (the spread the
    row accepts, spread_max_pct). The bounds are kept either way. The suspicions (event-loop lag
    p99 over `lag_p99_max_s`, CPU over `cpu_max_frac` of a core, events sharing reads) are kept
    as `info`: they explain a bound, they decide nothing."""
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
    over = error_over(error, error_max_pct)
    notes = [error_note(error, over, error_max_pct, workers=workers, cores=cores, why=why)] if over else []  # type: ignore[arg-type]
    return {"stamps": stamps, "lag_p50_s": percentile(lags_s, 50), "lag_p99_s": lag_p99,
            "lag_max_s": max(lags_s, default=None), "stall_max_s": stall_max_s,
            "merged_events": merged_events, "token_events": token_events,
            "cpu_frac": cpu_frac, "error": dict(error or {}), "error_max_pct": error_max_pct, "error_over": over,
            "info": info, "client_bound": bool(notes), "notes": notes}


def workers_check(shards: Sequence[Any], *, lag_p99_max_s: float = DEFAULTS.lag_p99_max_s,
                  cpu_max_frac: float = DEFAULTS.cpu_max_frac, cores: int | None = None,
                  error_max_pct: float = DEFAULTS.spread_max_pct) -> dict[str, Any]:
    """The self-check of a run over its workers (streams.ShardResult each). The run's error bounds
    come from all its records (each read bounded by its own worker's stamps and lag), and decide;
    every worker's own bounds, lag and CPU are kept in `per_worker`, and a worker whose own
    records are off by more than the row allows is named. Open loop: requests sent later than
    the arrival process said mark the run too (a different error: the load was not the one
    asked for). With one worker the result is that worker's check."""
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
                         workers=n, cores=cores)
        late_p99 = percentile(send_lateness_s(s.records), 99)
        if late_p99 is not None and late_p99 > lag_p99_max_s:
            c["notes"].append(f"open-loop arrivals sent late: p99 {late_p99 * 1e3:.1f} ms after their scheduled "
                              f"times > {lag_p99_max_s * 1e3:g} ms (the arrival process was not kept): "
                              f"give the client more processes (--workers {min(cores or 2 * n, max(2, 2 * n))})")
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
                             error=error_bounds(records, lates, kernel), error_max_pct=error_max_pct, workers=n, cores=cores)
        worst_first = sorted(per, key=lambda c: -max([c["error"][m]["bound_pct"] for m in c["error_over"]] or [0.0]))
        named = [f"worker {c['worker']} of {n} (pid {c['pid']}, {c['streams']} streams): {note}"
                 for c in worst_first for note in c["notes"]]
        whole["notes"] = (whole["notes"] + named) if (whole["notes"] or any("open-loop" in x for x in named)) else []
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


def row_gate_checks(row: Mapping[str, Any], bounds: Mapping[str, Any], *, source: str = "",
                    lane: Any = None) -> list[Check]:
    """Every verdict of one curve row: the metric bounds from thresholds.yaml, then the row's own
    validity (seats, KV fit, client health, token counts, spread), which fail the gate even when
    the numbers look fine, because then the numbers are not the server's at that many users.
    `lane`: the seat hint leaves out advice its engine flags already follow (boot/hints.py)."""
    users = row["users"]
    where = f"@ {users} users"
    hints = {"spread_pct": "noisy runs: check other load on the server, or raise runs",
             "ttft_p95_s": "queueing or prefill: compare with seats and ttft_p50_s"}
    checks = checks_from_bounds("curve", row, bounds, where=where, source=source, hints=hints)
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
    bad_client = [i + 1 for i, r in enumerate(row.get("per_run", []))
                  if r["client"]["client_bound"] and not excused(r["client"], bounds)]
    if bad_client:
        notes = "; ".join(row["per_run"][bad_client[0] - 1]["client"]["notes"])
        checks.append(Check("client-bound runs", len(bad_client), {"max": 0}, where=where,
                            source=f"runs {bad_client}", hint=f"run invalid, not the server's speed: {notes}",
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


def excused(client: Mapping[str, Any], bounds: Mapping[str, Any]) -> bool:
    """A run marked only for its error bounds is excused when, for every metric over the allowed
    error, the row's threshold on that metric gives the same verdict at both ends of the interval
    the true value lies in (the bound is smaller than the threshold's margin)."""
    over = client.get("error_over") or []
    if not over or len(client.get("notes") or []) > 1:
        return False
    for name in over:
        bound, b = bounds.get(name), client["error"][name]
        if not isinstance(bound, Mapping) or not ({"min", "max"} & set(bound)):
            return False
        ends = (b["lo"], b["hi"])
        if "min" in bound and not all(x >= bound["min"] for x in ends):
            return False
        if "max" in bound and not all(x <= bound["max"] for x in ends):
            return False
    return True


def describe_flags(row: Mapping[str, Any]) -> list[str]:
    """Human flags for the table's last column."""
    flags = list((row.get("seat") or {}).get("notes", [])) + list((row.get("memory") or {}).get("notes", []))
    runs = row.get("per_run", [])
    bound = [i for i, r in enumerate(runs, 1) if r["client"]["client_bound"]]
    if bound:
        worst = max((runs[i - 1] for i in bound), key=lambda r: r["client"]["lag_p99_s"] or 0.0)
        flags.append(f"client-bound run(s) {','.join(map(str, bound))} (worst: {worst['client']['notes'][0]})")
    if row.get("replaced_runs"):
        flags.append(f"{row['replaced_runs']} client-bound run(s) measured again ({row['replaced_why'][0]})")
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
