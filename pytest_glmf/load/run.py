"""The load runner (a concurrency curve): per users value one discarded warm pass, then R measured runs, each after a
prefix-cache flush, with distinct prompts per run and user, while the client watches itself.

Closed loop by default: all N users send at once (one request each). With `rate_per_s`, the N
requests arrive open loop instead, at that total rate (`arrival`: uniform spacing, or a seeded
Poisson process). A row's streams go round-robin to its server URLs (endpoints.py) and, past what
one client core reads with the self-check green, are read by several worker processes
(`workers`; workers.py), merged into one run's records. Each run returns plain data; the metrics
are pure functions in records.py, the client's self-check in selfcheck.py, seats and KV fit in
seats.py; the settings and the workload in settings.py; a gate's verdicts are its own
(gates/curve/checks.py).
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_glmf.cpus import free_cores_now
from pytest_glmf.engine.timeouts import BETWEEN_TOKENS_S, FIRST_TOKEN_S
from pytest_glmf.load import http as load_http
from pytest_glmf.load.endpoints import (
    CURVE_METRICS,
    GEN_TOKENS,
    QUEUED,
    RUNNING,
    Endpoints,
    Target,
    as_endpoints,
    pick,
    summed,
)
from pytest_glmf.load.records import (
    combine_runs,
    median,
    merge_records,
    run_metrics,
    token_count_check,
)
from pytest_glmf.load.seats import memory_check, seat_check
from pytest_glmf.load.selfcheck import (
    GATED_ERROR_METRICS,
    LABELS,
    SPEED_TTFT,
    bound_size,
    bound_text,
    machine_load,
    row_client,
    workers_check,
)
from pytest_glmf.load.settings import DEFAULTS, LoadSettings, Workload
from pytest_glmf.load.streams import (
    ShardJob,
    StreamJob,
    event_loop_factory,
    stream_shard,
)
from pytest_glmf.load.workers import WorkerPool, arrival_offsets, auto_workers, available_cores, deal
from pytest_glmf.load.workload import context_check

perf = time.perf_counter
Progress = Callable[[str], None]
SHOWN_BOUNDS = ("per_user_tok_s", "ttft_p50_s", "itl_p95_s")   # in each run's progress line


@dataclass
class ClientCost:
    """What reading cost the client on the last measured pass: the auto worker count's input."""

    events_per_stream_s: float | None = None
    cpu_per_event_s: float | None = None
    busy_cores: float = 0.0       # the client's CPU s per s on that pass: its own share of the load average

    def update(self, out: Mapping[str, Any]) -> None:
        rates = [(len(r.chunk_times_s) - 1) / (r.t_last_token_s - r.t_first_token_s) for r in out["records"]
                 if r.ok and len(r.chunk_times_s) > 1 and r.t_last_token_s > r.t_first_token_s]
        per = out["client"]["per_worker"]
        events = sum(c["token_events"] for c in per)
        if rates and events:
            self.events_per_stream_s = median(rates)
            self.cpu_per_event_s = sum(c["cpu_s"] for c in per) / events
            wall = max(c.get("wall_s") or 0.0 for c in per)
            self.busy_cores = sum(c["cpu_s"] for c in per) / wall if wall > 0 else 0.0


# -- one run ---------------------------------------------------------------------------------------------

class MetricsSampler:
    """The server's running and queued gauges every `every_s` during a run, read off the event loop
    that timestamps the streams: a thread with its own connections (blocking socket calls release
    the GIL), parsing only the lines it needs (introspect.parse_metrics with names). Done on the
    loop, fetching and parsing a GPU vLLM's ~55 KB /metrics (prometheus_client: ~15 ms of Python)
    every 0.2 s delayed reads by 5-14 ms and merged 3-6 % of token events on an H200 (docs/gpu.md)."""

    NAMES = RUNNING + QUEUED

    def __init__(self, endpoints: Endpoints, every_s: float):
        self.endpoints, self.every_s = endpoints, every_s
        self.samples: list[tuple[float, float | None, float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="glmf-metrics-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            each = [t.metrics_blocking(self.NAMES) for t in self.endpoints.targets]
            m = summed(each)
            if m is None:
                return
            self.samples.append((perf(), pick(m, RUNNING), pick(m, QUEUED)))
            self._stop.wait(self.every_s)

    def __enter__(self) -> "MetricsSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def measure_run(target: Target | Endpoints, bodies: Sequence[dict[str, Any]], settings: LoadSettings,
                      path: str, pool: WorkerPool | None = None, seed: int = DEFAULTS.seed) -> dict[str, Any]:
    """Send every body (all at once, or at settings.rate_per_s) and return records plus the client
    self-check and the server's /metrics observations. Body i goes to endpoint i mod K; with a
    pool of N workers, stream i is read by worker i mod N, all starting on one barrier."""
    endpoints = as_endpoints(target)
    offsets = arrival_offsets(len(bodies), settings.rate_per_s, settings.arrival, seed)
    streams = []
    for user, body in enumerate(bodies):
        e = endpoints.of_user(user)
        t = endpoints.targets[e]
        streams.append(StreamJob(user=user, endpoint=e, due_s=None if offsets is None else offsets[user],
                                 request=load_http.build_request(t.host, t.port, t.prefix + path, body, t.api_key)))
    workers = pool.size if pool is not None else 1
    jobs = [ShardJob(worker=k, workers=workers, endpoints=[(t.host, t.port, t.https) for t in endpoints.targets],
                     streams=share, kernel_stamps=settings.kernel_stamps, lag_probe_s=settings.lag_probe_s,
                     first_token_timeout_s=_or(settings.first_token_timeout_s, FIRST_TOKEN_S),
                     between_tokens_timeout_s=_or(settings.between_tokens_timeout_s, BETWEEN_TOKENS_S))
            for k, share in enumerate(deal(streams, workers))]
    before = await endpoints.metrics_each(CURVE_METRICS)
    sample = settings.metrics_sample_s and summed(before) is not None
    with (MetricsSampler(endpoints, settings.metrics_sample_s) if sample else contextlib.nullcontext()) as sampler:
        if pool is None:
            shards = [await stream_shard(jobs[0])]
        else:   # the workers stream; this process only waits for them
            shards = await asyncio.get_running_loop().run_in_executor(None, pool.run, jobs)
    samples = sampler.samples if sampler is not None else []
    load, machine_cores = machine_load()     # did the machine starve the client? (the advice says so)
    after = await endpoints.metrics_each(CURVE_METRICS)
    records = merge_records(s.records for s in shards)
    per_endpoint: list[dict[str, Any]] = []
    for e, (b, a) in enumerate(zip(before, after)):
        gen = (pick(a, GEN_TOKENS), pick(b, GEN_TOKENS)) if a is not None and b is not None else (None, None)
        per_endpoint.append({"url": endpoints.targets[e].url, "streams": sum(1 for s in streams if s.endpoint == e),
                             "metrics_delta": int(gen[0] - gen[1]) if gen[0] is not None and gen[1] is not None
                             else None})
    deltas = [p["metrics_delta"] for p in per_endpoint if p["metrics_delta"] is not None]
    delta = sum(deltas) if len(deltas) == len(per_endpoint) else None
    running = [s[1] for s in samples if s[1] is not None]
    queued = [s[2] for s in samples if s[2] is not None]
    server: dict[str, Any] = {"metrics_delta": delta, "max_running": int(max(running)) if running else None,
                              "max_queued": int(max(queued)) if queued else None, "samples": len(samples)}
    if len(endpoints) > 1:
        server["per_endpoint"] = per_endpoint
    return {"records": records,
            "client": workers_check(shards, lag_p99_max_s=settings.lag_p99_max_s, cpu_max_frac=settings.cpu_max_frac,
                                    cores=available_cores(), error_max_pct=settings.error_max_pct, load=load,
                                    machine_cores=machine_cores),
            "server": server}


# -- a row and the curve -------------------------------------------------------------------------------------

def _plan(settings: LoadSettings, users: int, cost: ClientCost) -> tuple[int, str]:
    if settings.workers is not None:
        return settings.workers, "set"
    free = free_cores_now(own_load=cost.busy_cores)      # the cores others leave free (pytest_glmf/cpus.py)
    n, why = auto_workers(users, cost.events_per_stream_s, cost.cpu_per_event_s, cores=free.count)
    return n, f"{why}; {free.why}"


async def run_row(target: Target | Endpoints, users: int, workload: Workload, settings: LoadSettings,
                  facts: Mapping[str, Any] | None, progress: Progress | None = None,
                  run_offset: int = 0, cost: ClientCost | None = None, pool: WorkerPool | None = None) -> dict[str, Any]:
    """One users value: warm pass, then `settings.runs` measured runs. `cost` carries the client's
    measured cost per event from row to row (auto workers without a warm pass). `pool`: worker
    processes the caller owns and keeps (e.g. a search over many rows); else the row plans its
    workers (settings.workers, or auto) and closes them at its end."""
    endpoints = as_endpoints(target)
    # a workload the server's context cannot hold is refused before a request is sent
    refused = context_check(workload.prompt_tokens, workload.estimated_prompt_tokens(), workload.max_tokens,
                            (facts or {}).get("context_len"))
    if refused is not None:
        raise refused
    say = progress or (lambda line: None)
    cost = cost if cost is not None else ClientCost()
    owned = pool is None
    if owned:
        workers, plan = _plan(settings, users, cost)
        pool = WorkerPool(workers) if workers > 1 else None
    else:
        workers, plan = pool.size, "the caller's pool"   # type: ignore[union-attr]
    try:
        prompt_tokens: float | None = None
        if settings.warmup:
            t0 = perf()
            warm = await measure_run(endpoints, [workload.body(f"warm{users}", u, u) for u in range(users)],
                                     settings, workload.path, pool, seed=settings.seed - 1)
            wm = run_metrics(warm["records"])
            prompt_tokens = wm["prompt_tokens_p50"]
            say(f"curve users={users} warm pass (discarded): {perf() - t0:.1f} s, ttft p50 "
                f"{_s(wm['ttft_p50_s'])}, {wm['errors']} errors"
                + (f" ({wm['error_examples'][0]})" if wm["error_examples"] else ""))
            cost.update(warm)
            if owned and settings.workers is None:   # auto: size the measured runs by what the warm pass cost
                workers, plan = _plan(settings, users, cost)
                if workers != (pool.size if pool else 1):
                    if pool is not None:
                        pool.close()
                    pool = WorkerPool(workers) if workers > 1 else None
        if workers > 1 or settings.workers is not None or not owned:
            say(f"curve users={users} client workers: {workers} ({plan})")
        per_run: list[dict[str, Any]] = []
        flushed = None
        replaced: list[str] = []

        async def measure(run: int, label: str) -> dict[str, Any]:
            nonlocal flushed, prompt_tokens
            if settings.flush_cache:
                flushed = await endpoints.flush()
            tag = f"r{run_offset + run}"
            out = await measure_run(endpoints, [workload.body(tag, u, u + run + 1) for u in range(users)],
                                    settings, workload.path, pool, seed=settings.seed + run_offset + run)
            cost.update(out)
            m = run_metrics(out["records"])
            m["client"] = out["client"]
            m["server"] = out["server"]
            m["token_count"] = token_count_check(out["records"], out["server"]["metrics_delta"])
            m["records"] = [r.to_dict() for r in out["records"]]
            prompt_tokens = prompt_tokens or m["prompt_tokens_p50"]
            c = out["client"]
            # two lines, each within 120 columns: what was measured, then the client's own account
            said = [LABELS[k] for k in c["unmeasured"] if k in GATED_ERROR_METRICS]
            say(f"curve users={users} {label}: aggregate {_n(m['aggregate_tok_s'])} tok/s, "
                f"per-user {_n(m['per_user_tok_s'])} tok/s, ttft p50 {_s(m['ttft_p50_s'])} p95 {_s(m['ttft_p95_s'])}"
                + (f", {m['errors']} errors ({m['error_examples'][0]})" if m["errors"] else "")
                + (", client-bound" if c["client_bound"] else "")
                + (f", {' and '.join(said)} not measured" if said else ""))
            say(f"  client: error bound {bound_text(c['error'], SHOWN_BOUNDS)}"
                + (f" ({c['error'].get('shared_events', 0)} of {c['token_events']} token events shared a read; "
                   "kernel stamps)" if c["stamps"] == "kernel" else " (user-space stamps)")
                + f", lag p99 {_ms(c['lag_p99_s'])}"
                + (f", cpu {c['cpu_frac'] * 100:.0f} %" if c["workers"] == 1 else
                   f", cpu {c['cpu_frac'] * 100:.0f} % on the busiest of {c['workers']} workers"))
            return m

        for run in range(settings.runs):
            per_run.append(await measure(run, f"run {run + 1}/{settings.runs}"))
        # A row the client could not measure (a number a gate can bound whose error bound, over the
        # runs, is over what the row allows; or a run whose open-loop sends were late) measured the
        # client, or the machine's other load, not the server: its worst run is replaced by a fresh
        # one, at most `client_retries` times per row (as the capacity search measures a probe
        # again). A run with failed requests is not: the server's failure is its verdict, and
        # measuring it again only waits out the same timeouts once more.
        for extra in range(1, settings.client_retries + 1):
            redo = _run_to_redo(per_run, settings.error_max_pct)
            if redo is None:
                break
            i, why = redo
            replaced.append(f"run {i + 1}: {why}")
            per_run[i] = await measure(settings.runs + extra - 1,
                                       f"run {i + 1} measured again ({extra}/{settings.client_retries}"
                                       f" retries: the client did not measure it)")
    finally:
        if owned and pool is not None:
            pool.close()
    row: dict[str, Any] = {"users": users, **combine_runs(per_run), "runs": len(per_run),
                           "spread_max_pct": settings.spread_max_pct,
                           "flush_endpoint": flushed if settings.flush_cache else "off",
                           "max_tokens": workload.max_tokens, "workers": workers, "workers_plan": plan,
                           "urls": endpoints.urls,
                           # what was sent, so two rows are known to measure the same workload (compare/)
                           "shared_prefix": workload.shared_prefix, "rate_per_s": settings.rate_per_s,
                           "arrival": settings.arrival if settings.rate_per_s else "closed", "path": workload.path}
    observed = {"max_running": _max(r["server"]["max_running"] for r in per_run),
                "max_queued": _max(r["server"]["max_queued"] for r in per_run)}
    row["seat"] = seat_check(users, facts, observed, decode_steps=workload.max_tokens)
    row["seats"] = row["seat"]["seats"]
    prompt_tokens = prompt_tokens or workload.estimated_prompt_tokens()
    row["memory"] = memory_check(users, (facts or {}).get("kv_tokens"), prompt_tokens, workload.max_tokens,
                                 shared_tokens=workload.shared_tokens(prompt_tokens))
    # each number judged by its own bound: one the client did not measure within the allowed error
    # is None, with the reason (its estimate and interval stay in client_error); the others stand
    client = row_client(per_run, settings.error_max_pct)
    row["client_error"], row["unmeasured"], row["client_advice"] = client["error"], client["unmeasured"], client["advice"]
    for metric in row["unmeasured"]:
        row[metric] = None
    late = bool(client["late_runs"])
    # what a service level speaks of (speed, TTFT) not measured, or a run's load not the one asked for
    row["client_bound"] = late or any(m in row["unmeasured"] for m in SPEED_TTFT)
    row["count_mismatch"] = any(not r["token_count"]["ok"] for r in per_run)
    row["noisy"] = row["spread_pct"] is not None and row["spread_pct"] > settings.spread_max_pct
    row["valid"] = not (late or row["count_mismatch"] or any(r["errors"] for r in per_run))
    row["per_run"] = per_run
    row["replaced_runs"] = len(replaced)
    row["replaced_why"] = replaced
    return row


def _run_to_redo(per_run: Sequence[Mapping[str, Any]], error_max_pct: float) -> tuple[int, str] | None:
    """The run to measure again in place (index, why), or None: a run whose open-loop sends were
    late first, else the run that bounds worst a number the row did not measure (runs with failed
    requests are never redone)."""
    free = [i for i, r in enumerate(per_run) if not r["errors"]]
    for i in free:
        c = per_run[i]["client"]
        if c["client_bound"]:
            return i, c["notes"][0] if c["notes"] else "client-bound"
    over = [m for m in row_client(per_run, error_max_pct)["unmeasured"] if m in GATED_ERROR_METRICS]
    if not over or not free:
        return None
    m = over[0]
    i = max(free, key=lambda k: bound_size(per_run[k]["client"]["error"].get(m)))
    why = per_run[i]["client"]["unmeasured"].get(m) or f"{LABELS[m]} not measured"
    return i, why


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _max(values: Any) -> int | None:
    xs = [v for v in values if v is not None]
    return max(xs) if xs else None


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} s"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f} ms"


def run_rows(base_url: str | Sequence[str], workload: Workload, settings: LoadSettings,
             facts: Mapping[str, Any] | None = None, progress: Progress | None = None,
             on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run every users value of `settings.users` (sync entry point; owns its event loop).
    `base_url`: one server (or router) URL, or several replicas' URLs the streams are dealt over.
    `on_row`: called with each row as it finishes (a Ctrl-C'd `glmf curve` keeps them)."""
    async def go() -> list[dict[str, Any]]:
        endpoints = Endpoints.from_urls(base_url, workload.api_key)
        if workload.model is None:
            workload.model = await endpoints.served_model()
        rows = []
        cost = ClientCost()
        for i, users in enumerate(settings.users):
            rows.append(await run_row(endpoints, users, workload, settings, facts, progress,
                                      run_offset=i * settings.runs, cost=cost))
            if on_row is not None:
                on_row(rows[-1])
        return rows

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(go())


def strip_records(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row without per-request records (for headline summaries)."""
    out = dict(row)
    out["per_run"] = [{k: v for k, v in r.items() if k != "records"} for r in row.get("per_run", [])]
    return out
