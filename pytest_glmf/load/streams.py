"""One worker's share of a run: open its streams, start them at the common start time, read them
with the lean reader (http.py: kernel receive timestamps) while watching its own event loop, and
turn what it read into typed records. The same coroutine runs in the test process (one worker, the
default for rows one core can feed) and in each worker process of a sharded run (workers.py); the
merge of several workers' results is in records.merge_records and selfcheck.workers_check.

Times are perf_counter (CLOCK_MONOTONIC on Linux: one clock for every process on the host), so
the send and receive times of every worker, the common start and the truth server's send times
compare directly.
"""
from __future__ import annotations

import asyncio
import gc
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from pytest_glmf.engine.timeouts import BETWEEN_TOKENS_S, FIRST_TOKEN_S
from pytest_glmf.load import http as load_http
from pytest_glmf.load.records import RequestRecord, record_from_lines
from pytest_glmf.load.settings import DEFAULTS

perf = time.perf_counter


@dataclass
class StreamJob:
    """One request of a run: who sends it, to which endpoint, and when."""

    user: int
    endpoint: int
    request: bytes
    due_s: float | None = None      # open loop: seconds after the common start; None: at the start


@dataclass
class ShardJob:
    """What one worker runs: its streams and the endpoints they go to (host, port, https)."""

    worker: int
    workers: int
    endpoints: list[tuple[str, int, bool]]
    streams: list[StreamJob]
    kernel_stamps: bool = True
    lag_probe_s: float = DEFAULTS.lag_probe_s
    first_token_timeout_s: float = FIRST_TOKEN_S
    between_tokens_timeout_s: float = BETWEEN_TOKENS_S


@dataclass
class ShardResult:
    """What one worker measured: its records and what its own self-check needs."""

    worker: int
    workers: int
    pid: int
    records: list[RequestRecord]
    lags_s: list[float] = field(default_factory=list)
    stall_max_s: float = 0.0
    cpu_s: float = 0.0              # process CPU (user + sys) inside the timed window
    wall_s: float = 0.0             # the timed window: common start to the last stream's end
    t_start_s: float = math.nan     # the common start (perf_counter)
    stamps: str = "user"
    lag_probe_s: float = 0.005      # the lag probe's interval (a shorter stall can fall between probes)

    @property
    def cpu_frac(self) -> float:
        return self.cpu_s / max(self.wall_s, 1e-9)


class LagProbe:
    """Event-loop lag as a socket read would feel it. A helper thread wakes the loop every
    `interval_s` (call_soon_threadsafe: the same wake-up path as arriving data) and the callback
    records (thread oversleep + time for the loop to run it). The oversleep term catches stalls the
    loop cannot see itself: the whole process descheduled, or the GIL held (a GC pass). A stall of
    X s also stands for the probes that would have fired during it (X - interval, X - 2 interval...,
    the coordinated-omission correction), so one long stall weighs like the samples it swallowed.
    Timer-based probes are quantized to the loop's 1 ms timer resolution; this one is not."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval_s: float):
        self.loop, self.interval_s = loop, interval_s
        self.lags_s: list[float] = []
        self.stall_max_s = 0.0          # the longest time the probe thread itself could not run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="glmf-lag-probe", daemon=True)

    def _record(self, t_wake: float, oversleep_s: float) -> None:
        lag = oversleep_s + (perf() - t_wake)
        self.stall_max_s = max(self.stall_max_s, oversleep_s)
        self.lags_s.append(lag)
        missed = lag - self.interval_s
        while missed > 0:
            self.lags_s.append(missed)
            missed -= self.interval_s

    def _run(self) -> None:
        due = perf() + self.interval_s
        while not self._stop.wait(max(0.0, due - perf())):
            now = perf()
            try:
                self.loop.call_soon_threadsafe(self._record, now, max(0.0, now - due))
            except RuntimeError:   # loop closed
                return
            due = now + self.interval_s

    def __enter__(self) -> "LagProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (it comes with uvicorn[standard]): lower per-read cost than asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def start_now() -> float:
    """The start of a run with one worker: at once."""
    return perf()


async def stream_shard(job: ShardJob, start: Callable[[], Awaitable[float]] = start_now) -> ShardResult:
    """Open every stream of `job`, await `start()` (the common start time, once every worker is
    connected), send each request at start + its due time (closed loop: all at once) and read
    until every stream ends or times out. Records are built after the timed window."""
    loop = asyncio.get_running_loop()
    raise_fd_limit(len(job.streams) + 64)
    protos = await asyncio.gather(*(load_http.open_stream(*job.endpoints[s.endpoint], job.kernel_stamps)
                                    for s in job.streams))
    try:
        t0 = await start()
    except BaseException:
        _close(protos)
        raise
    # No garbage collection inside the timed window: a full pass over a big heap holds the GIL
    # for tens of ms and would delay every timestamp (records are built after the window).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with LagProbe(loop, job.lag_probe_s) as lag:
            cpu0, wall0 = time.process_time(), perf()
            for proto, s in zip(protos, job.streams):
                if s.due_s is None:
                    proto.send(s.request)
                else:
                    loop.call_later(max(0.0, t0 + s.due_s - perf()), proto.send, s.request)
            timed_out = await wait_all(protos, job.first_token_timeout_s, job.between_tokens_timeout_s)
            cpu_s, wall_s = time.process_time() - cpu0, perf() - wall0
    finally:
        if gc_was_enabled:
            gc.enable()
        _close(protos)
    records = []
    for i, (p, s) in enumerate(zip(protos, job.streams)):
        status, lines, error = load_http.decode_reads(p.reads, True, p.read_user_s) if p.reads else (None, [], "no response")
        if i in timed_out:
            error = timed_out[i]
        rec = record_from_lines(s.user, p.t_send_s if p.t_send_s is not None else math.nan, status, lines, error)
        rec.endpoint, rec.worker = s.endpoint, job.worker
        rec.t_due_s = None if s.due_s is None else t0 + s.due_s
        records.append(rec)
    stamps = "kernel" if protos and all(p.stamps == "kernel" for p in protos) else "user"
    return ShardResult(worker=job.worker, workers=job.workers, pid=os.getpid(), records=records, lags_s=lag.lags_s,
                       stall_max_s=lag.stall_max_s, cpu_s=cpu_s, wall_s=wall_s, t_start_s=t0, stamps=stamps,
                       lag_probe_s=job.lag_probe_s)


def _close(protos: Sequence[load_http.StreamProtocol]) -> None:
    for p in protos:
        if p.transport is not None:
            p.transport.close()


def raise_fd_limit(needed: int) -> None:
    """One socket per user: lift the soft open-files limit toward the hard one when a row needs it."""
    try:
        import resource
    except ImportError:   # not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(hard, max(needed, soft))
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


async def wait_all(protos: Sequence[load_http.StreamProtocol], first_token_timeout_s: float,
                   between_tokens_timeout_s: float) -> dict[int, str]:
    """Wait for every stream; one watchdog enforces first-token and between-token timeouts (cheaper
    than a timer per read)."""
    pending = {i: p for i, p in enumerate(protos)}
    timed_out: dict[int, str] = {}
    while pending:
        await asyncio.wait([p.done for p in pending.values()], timeout=1.0)
        now = perf()
        for i, p in list(pending.items()):
            if p.done.done():
                del pending[i]
                continue
            if p.t_send_s is None:
                continue
            last = p.reads[-1][0] if len(p.reads) > 1 else None
            if last is None and now - p.t_send_s > first_token_timeout_s:
                timed_out[i] = f"no token within {first_token_timeout_s:g} s"
            elif last is not None and now - last > between_tokens_timeout_s:
                timed_out[i] = f"stream stalled for {between_tokens_timeout_s:g} s"
            if i in timed_out:
                del pending[i]
    return timed_out
