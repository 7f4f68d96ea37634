"""The client's self-check: how far each of a run's numbers can be from the times its events really
arrived (records.error_bounds), and each number judged by its own bound: one the client did not
measure within `client_error_max_pct` is "not measured", with the reason, and the row's others
stand (issue 40). With the advice that fits the machine (a client starved by the machine's load is
told so, never to add processes), naming the client's settings as the reader sets them. Pure
functions over plain data (a run's records and lags, its workers' ShardResults, a row's runs).
Definition: docs/guide/gates/curve.md, "The client self-check".
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pytest_glmf.cpus import load_1m
from pytest_glmf.load.records import (
    ERROR_METRICS,
    combine_error_bounds,
    error_bounds,
    merged_events,
    percentile,
    send_lateness_s,
)
from pytest_glmf.load.settings import DEFAULTS

MERGED_MAX_FRAC = 0.01      # info only: share of token events that shared a socket read with a later one


def late_max_s(lags_s: Sequence[float], stall_max_s: float | None, probe_s: float) -> float:
    """How late the loop can have been to make a read: the longest measured loop lag or process
    stall, plus the probe interval (a stall shorter than it can fall between two probes)."""
    return max(max(lags_s, default=0.0), stall_max_s or 0.0) + probe_s


LABELS = {"per_user_tok_s": "per-user tok/s", "per_user_tok_s_p5": "p5 tok/s", "ttft_p50_s": "TTFT p50",
          "ttft_p95_s": "TTFT p95", "ttft_p99_s": "TTFT p99", "itl_p50_s": "ITL p50", "itl_p95_s": "ITL p95",
          "itl_p99_s": "ITL p99"}
# Of the bounded numbers, those a gate can set a threshold on (the curve's metrics, gates/curve/spec.py;
# a test holds them equal): a row that could not measure one is measured again (ITL p50 and the p99s
# are only marked "not measured").
GATED_ERROR_METRICS = ("per_user_tok_s", "per_user_tok_s_p5", "ttft_p50_s", "ttft_p95_s", "itl_p95_s")
# The numbers a service level speaks of (speed and TTFT): a row that could not measure one of them is
# `client_bound` (the capacity search then has no verdict for it).
SPEED_TTFT = ("per_user_tok_s", "per_user_tok_s_p5", "ttft_p50_s", "ttft_p95_s")
# The client's settings the advice names: by their thresholds names inside pytest, by the flags `glmf curve`
# and `glmf capacity` keep for them in a shell (cli.CLIENT_ALIASES; a test holds them equal)
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
    return load_1m(), os.cpu_count() or 1


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
