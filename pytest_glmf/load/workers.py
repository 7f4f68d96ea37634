"""Load past one client core: a row's streams dealt over N worker processes that start on a common
barrier and return typed results (streams.ShardResult) for one merged row.

Why processes: one Python event loop reads ~50,000 token events per second on one core with the
self-check green (bench/README.md); a row of 1,000 streams at 100 tok/s is 100,000. Each worker is
the same lean reader as the one-worker path (streams.stream_shard), with kernel receive times;
every worker stamps with perf_counter, which is CLOCK_MONOTONIC on Linux and shared by every
process on the host, so merged records compare as if one process had taken them.

The pool is the standard library's (multiprocessing, forkserver start method where the platform
has it: a fork of a clean server process, never of the multi-threaded test process): N processes,
a pipe each for jobs and results, and one `multiprocessing.Barrier` of N + 1 parties (the workers,
each once its connections are open, and the parent). The barrier's action, run once when the last
party arrives, stamps the common start (`now + START_LEAD_S`) into shared memory; each worker then
sleeps until just before it and spins to it, so the workers' first sends are within tens of
microseconds of each other on an idle box.

Arrivals (open loop) are one process at the total rate, drawn once in the parent and dealt to the
workers with the streams (`arrival_offsets`, `deal`): never N processes at rate/N, whose sum would
only be Poisson if each kept its own clock and whose uniform variant would drift in phase.
"""
from __future__ import annotations

import asyncio
import functools
import math
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import random
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

from pytest_glmf.cpus import affinity_cores as available_cores  # the load package's name for it
from pytest_glmf.load.settings import ARRIVALS, DEFAULTS
from pytest_glmf.load.streams import ShardJob, ShardResult, StreamJob, event_loop_factory, stream_shard

perf = time.perf_counter
START_LEAD_S = 0.02          # from the barrier to the common start: every worker is awake by then
SPIN_S = 0.002               # the last stretch before the start is a busy wait (timers are ~1 ms coarse)
CONNECT_TIMEOUT_S = 120.0    # every worker's streams connected, or the run fails naming the late one
WORKER_BUSY_FRAC = 0.5       # auto: the share of a core one worker is planned to use
ONE_CORE_EVENTS_S = 5_000    # auto: below this many token events/s one worker, whatever a small pass cost


class WorkerError(RuntimeError):
    """A worker failed or died; the message names it."""


# -- the plan: how many workers, which streams each, when each stream starts -----------------------

def auto_workers(users: int, events_per_stream_s: float | None, cpu_per_event_s: float | None,
                 cores: int | None = None, busy_frac: float = WORKER_BUSY_FRAC) -> tuple[int, str]:
    """(workers, why): enough workers that each is planned at `busy_frac` of a core for `users`
    streams at the measured events per stream and CPU per event, capped by the cores; one when
    nothing was measured yet, and one below ONE_CORE_EVENTS_S (a tenth of what one core reads:
    there a small pass's CPU per event is mostly fixed costs, the lag probe and the setup, and
    would overstate the need)."""
    cores = cores or available_cores()
    if not events_per_stream_s or not cpu_per_event_s:
        return 1, "auto: 1 (no measured client cost yet; set workers to shard)"
    rate = users * events_per_stream_s
    if rate < ONE_CORE_EVENTS_S:
        return 1, f"auto: 1 ({users} streams x {events_per_stream_s:,.0f} events/s = {rate:,.0f} token events/s)"
    need = rate * cpu_per_event_s
    n = max(1, min(cores, math.ceil(need / busy_frac)))
    capped = " (capped by the cores)" if math.ceil(need / busy_frac) > cores else ""
    return n, (f"auto: {users} streams x {events_per_stream_s:,.0f} events/s x {cpu_per_event_s * 1e6:.0f} us "
               f"= {need:.2f} cores at {busy_frac:.0%} per worker -> {n} of {cores} cores{capped}")


def arrival_offsets(n: int, rate_per_s: float | None, process: str = DEFAULTS.arrival, seed: int = DEFAULTS.seed) -> list[float] | None:
    """Open loop: each request's arrival time after the start, for one process at the total rate
    (uniform: every 1/rate s; poisson: exponential gaps with mean 1/rate, seeded). None: closed
    loop (all at once)."""
    if not rate_per_s:
        return None
    if process == "uniform":
        return [i / rate_per_s for i in range(n)]
    if process != "poisson":
        raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, got {process!r}")
    rng = random.Random(seed)
    out, t = [], 0.0
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate_per_s)
    return out


def deal(streams: Sequence[StreamJob], workers: int) -> list[list[StreamJob]]:
    """Round-robin in arrival order: worker k gets streams k, k + N, k + 2N...; every worker sees
    the whole run's span and about 1/N of each burst."""
    return [list(streams[k::workers]) for k in range(workers)]


# -- the pool ---------------------------------------------------------------------------------------

def _context() -> Any:
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["pytest_glmf.load.workers"])
    return ctx


def _stamp_start(start: Any, lead_s: float) -> None:
    """Barrier action (runs once, in whichever party arrives last)."""
    start.value = perf() + lead_s


async def _await_barrier(barrier: Any, start: Any) -> float:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, functools.partial(barrier.wait, CONNECT_TIMEOUT_S))
    t0 = float(start.value)
    await asyncio.sleep(max(0.0, t0 - perf() - SPIN_S))
    while perf() < t0:      # spin the last ~2 ms: a timer would wake up to 1 ms late
        pass
    return t0


def _worker_main(conn: Any, barrier: Any, start: Any) -> None:
    """A worker process: run each ShardJob it is sent, answer ("ok", ShardResult) or ("error", text)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the parent's to handle; it closes the pool
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        while True:
            try:
                job = conn.recv()
            except (EOFError, OSError):
                return
            if job is None:
                return
            try:
                result = runner.run(stream_shard(job, functools.partial(_await_barrier, barrier, start)))
                conn.send(("ok", result))
            except threading.BrokenBarrierError:
                conn.send(("stopped", "stopped at the start barrier (another worker failed first)"))
            except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent, named
                barrier.abort()          # the others stop waiting for this one
                conn.send(("error", f"{type(exc).__name__}: {exc}"))


class WorkerPool:
    """N worker processes for the runs of one row (started once, reused by the warm pass and the
    measured runs). `with WorkerPool(4) as pool: results = pool.run(jobs)`."""

    def __init__(self, workers: int):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        ctx = _context()
        self.size = workers
        self._start = ctx.Value("d", 0.0, lock=False)
        self._barrier = ctx.Barrier(workers + 1, action=functools.partial(_stamp_start, self._start, START_LEAD_S))
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        self._idle = threading.Event()      # cleared while run() waits for the workers
        self._idle.set()
        try:
            for k in range(workers):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_worker_main, args=(child, self._barrier, self._start),
                                   name=f"glmf-curve-worker-{k + 1}", daemon=True)
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
        except BaseException:
            self.close()
            raise
        self.pids = [p.pid for p in self._procs]

    def name(self, k: int) -> str:
        return f"worker {k + 1} of {self.size} (pid {self.pids[k]})"

    def run(self, jobs: Sequence[ShardJob], timeout_s: float | None = None) -> list[ShardResult]:
        """Send job k to worker k, stand at the barrier with them, and collect every result.
        Raises WorkerError naming each worker that failed or died."""
        if len(jobs) != self.size:
            raise ValueError(f"{len(jobs)} jobs for {self.size} workers")
        if not self._procs:
            raise WorkerError("the worker pool is closed")
        self._idle.clear()
        try:
            return self._run(list(self._conns), list(self._procs), jobs, timeout_s)
        finally:
            self._idle.set()

    def _run(self, conns: list[Any], procs: list[Any], jobs: Sequence[ShardJob],
             timeout_s: float | None) -> list[ShardResult]:
        for conn, job in zip(conns, jobs):
            conn.send(job)
        barrier_note = None
        try:
            self._barrier.wait(CONNECT_TIMEOUT_S)
        except threading.BrokenBarrierError:
            # a worker failed before the start (its answer says why), or not every one connected in time
            barrier_note = f"not every worker had its streams connected within {CONNECT_TIMEOUT_S:g} s"
        answers: dict[int, tuple[str, Any]] = {}
        waiting = dict(enumerate(conns))
        deadline = None if timeout_s is None else perf() + timeout_s
        while waiting:
            left = None if deadline is None else max(0.0, deadline - perf())
            sentinels = {procs[k].sentinel: k for k in waiting}
            ready = mp_connection.wait(list(waiting.values()) + list(sentinels), left)
            if not ready:
                for k in waiting:
                    answers[k] = ("error", f"no result within {timeout_s:g} s")
                break
            for obj in ready:
                k = sentinels[obj] if obj in sentinels else next(i for i, c in waiting.items() if c is obj)
                if k not in waiting:
                    continue
                answers[k] = self._answer(waiting.pop(k), procs[k])
        if self._barrier.broken:
            self._barrier.reset()
        failed = [f"{self.name(k)}: {answers[k][1]}" for k in sorted(answers) if answers[k][0] == "error"]
        failed += [f"{self.name(k)}: {answers[k][1]}" for k in sorted(answers) if answers[k][0] == "stopped"]
        if barrier_note and not any(answers[k][0] == "error" for k in answers):
            failed.insert(0, barrier_note)
        if failed:
            raise WorkerError("; ".join(failed))
        return [answers[k][1] for k in range(self.size)]

    @staticmethod
    def _answer(conn: Any, proc: Any) -> tuple[str, Any]:
        try:
            if conn.poll():
                return conn.recv()
        except (EOFError, OSError):
            pass
        proc.join(1)
        code = proc.exitcode
        why = f"exited with code {code} during the run" if code is not None else "closed its pipe during the run"
        if code == 1:   # the usual cause: a script without the main guard, re-run by the worker
            why += (" (a script that runs the curve with workers > 1 must start it under "
                    "`if __name__ == \"__main__\":`; each worker process imports the main module)")
        return ("error", why)

    def close(self) -> None:
        """Stop the workers: after their current job, or at once when a run is still going (Ctrl-C,
        a failed test): the run() still waiting then returns with a WorkerError."""
        self._barrier.abort()
        if not self._idle.is_set():
            for proc in self._procs:
                proc.terminate()
            self._idle.wait(10)          # the run sees its workers gone and returns
        for conn in self._conns:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        for proc in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
        for conn in self._conns:
            conn.close()
        self._conns, self._procs = [], []

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
