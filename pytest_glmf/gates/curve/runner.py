"""The async curve runner: per users value one discarded warm pass, then R measured runs, each after a
prefix-cache flush, with distinct prompts per run and user, while the client watches itself.

Closed loop by default: all N users send at once (one request each). With `rate_per_s`, the N
requests arrive at a fixed interval instead (open loop). Each run returns plain data; the metrics
are pure functions in load_records, the verdicts in load_checks.
"""
from __future__ import annotations

import asyncio
import gc
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_glmf.engine.client import Timeouts
from pytest_glmf.gates.curve import http as load_http
from pytest_glmf.gates.curve.checks import client_check, memory_check, seat_check
from pytest_glmf.gates.curve.records import (
    combine_runs,
    merged_events,
    record_from_lines,
    run_metrics,
    token_count_check,
)
from pytest_glmf.gates.curve.spec import DEFAULTS

perf = time.perf_counter
Progress = Callable[[str], None]


@dataclass
class Workload:
    """What every user sends. Prompts are variants; each request also starts with a unique session
    line so no two requests (in a run or across runs) share a cacheable prefix beyond the template."""

    prompts: list[str]
    max_tokens: int = DEFAULTS.max_tokens
    path: str = DEFAULTS.path
    model: str | None = DEFAULTS.model
    system: str | None = None
    extra_body: dict[str, Any] = field(default_factory=lambda: {"ignore_eos": True, "temperature": 0.0})
    continuous_usage: bool = DEFAULTS.continuous_usage   # vLLM: usage on every chunk, makes chunk counts exact
    api_key: str | None = None

    def body(self, tag: str, user: int, variant: int) -> dict[str, Any]:
        text = f"Session {tag}-u{user}.\n\n{self.prompts[variant % len(self.prompts)]}"
        opts: dict[str, Any] = {"include_usage": True}
        if self.continuous_usage:
            opts["continuous_usage_stats"] = True
        body: dict[str, Any] = {"model": self.model or "default", "max_tokens": self.max_tokens,
                                "stream": True, "stream_options": opts, **self.extra_body}
        if self.path.endswith("chat/completions"):
            msgs = ([{"role": "system", "content": self.system}] if self.system else [])
            body["messages"] = msgs + [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        return body

    def estimated_prompt_tokens(self) -> int:
        return max(len(p) for p in self.prompts) // 4 + 16  # ~4 characters per token until usage says


@dataclass
class CurveSettings:
    """How the runner measures (defaults: the gate's settings in spec.py, the client's timeouts)."""

    users: list[int]
    runs: int = DEFAULTS.runs
    warmup: bool = DEFAULTS.warmup
    rate_per_s: float | None = DEFAULTS.rate_per_s
    flush_cache: bool = True
    spread_max_pct: float = DEFAULTS.spread_max_pct
    lag_p99_max_s: float = DEFAULTS.lag_p99_max_s
    cpu_max_frac: float = DEFAULTS.cpu_max_frac
    first_token_timeout_s: float = Timeouts.first_token_s
    between_tokens_timeout_s: float = Timeouts.between_tokens_s
    metrics_sample_s: float = 0.2         # /metrics running/queued sampling during a run (0: off)
    lag_probe_s: float = 0.005
    kernel_stamps: bool = True            # kernel receive times where available (load_http)


# -- server side helpers (not in the timed path) -------------------------------------------------------

_METRIC_RE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+([-+0-9.eEinfaN]+)", re.M)
GEN_TOKENS = ("sglang:generation_tokens_total", "vllm:generation_tokens_total")
RUNNING = ("sglang:num_running_reqs", "vllm:num_requests_running")
QUEUED = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")


def parse_metrics(text: str) -> dict[str, float]:
    """Sum each metric over its label sets (one value per name)."""
    out: dict[str, float] = {}
    for name, _, value in _METRIC_RE.findall(text):
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            pass
    return out


def _pick(metrics: Mapping[str, float], names: Sequence[str]) -> float | None:
    return next((metrics[n] for n in names if n in metrics), None)


class Target:
    def __init__(self, base_url: str, api_key: str | None = None):
        self.host, self.port, self.https, self.prefix = load_http.split_url(base_url)
        self.api_key = api_key
        self.flush_endpoint: str | None = None

    async def call(self, path: str, method: str = "GET") -> tuple[int, bytes]:
        return await load_http.http_call(self.host, self.port, self.https, self.prefix + path, method,
                                         api_key=self.api_key)

    async def metrics(self) -> dict[str, float] | None:
        try:
            status, body = await self.call("/metrics")
        except (TimeoutError, OSError):
            return None
        return parse_metrics(body.decode("utf-8", "replace")) if status == 200 else None

    async def served_model(self) -> str | None:
        """The first model id of /v1/models (vLLM rejects any other name; SGLang accepts any)."""
        try:
            status, body = await self.call("/v1/models")
            return json.loads(body)["data"][0]["id"] if status == 200 else None
        except (TimeoutError, OSError, ValueError, KeyError, IndexError, TypeError):
            return None

    async def flush(self) -> str | None:
        """SGLang /flush_cache; vLLM /reset_prefix_cache (dev mode). Returns the endpoint that worked."""
        for path in ([self.flush_endpoint] if self.flush_endpoint else ["/flush_cache", "/reset_prefix_cache"]):
            try:
                status, _ = await self.call(path, "POST")
            except (TimeoutError, OSError):
                continue
            if status == 200:
                self.flush_endpoint = path
                return path
        return None


# -- one run ---------------------------------------------------------------------------------------------

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


async def _sample_server(target: Target, samples: list[tuple[float, float | None, float | None]],
                         stop: asyncio.Event, every_s: float) -> None:
    while not stop.is_set():
        m = await target.metrics()
        if m is None:
            return
        samples.append((perf(), _pick(m, RUNNING), _pick(m, QUEUED)))
        try:
            await asyncio.wait_for(stop.wait(), every_s)
        except TimeoutError:
            pass


async def measure_run(target: Target, bodies: Sequence[dict[str, Any]], settings: CurveSettings,
                      path: str) -> dict[str, Any]:
    """Send every body (all at once, or at settings.rate_per_s) and return records plus the client
    self-check and the server's /metrics observations."""
    loop = asyncio.get_running_loop()
    _raise_fd_limit(len(bodies) + 64)
    requests = [load_http.build_request(target.host, target.port, target.prefix + path, b, target.api_key)
                for b in bodies]
    protos = await asyncio.gather(*(load_http.open_stream(target.host, target.port, target.https,
                                                          settings.kernel_stamps) for _ in requests))
    before = await target.metrics()
    stop = asyncio.Event()
    samples: list[tuple[float, float | None, float | None]] = []
    probes = []
    if settings.metrics_sample_s and before is not None:
        probes.append(asyncio.ensure_future(_sample_server(target, samples, stop, settings.metrics_sample_s)))
    # No garbage collection inside the timed window: a full pass over a big heap holds the GIL
    # for tens of ms and would delay every timestamp (records are built after the window).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    with LagProbe(loop, settings.lag_probe_s) as lag:
        cpu0, wall0 = time.process_time(), perf()
        if settings.rate_per_s:
            t0 = loop.time() + 0.001
            for i, (proto, req) in enumerate(zip(protos, requests)):
                loop.call_at(t0 + i / settings.rate_per_s, proto.send, req)
        else:
            for proto, req in zip(protos, requests):
                proto.send(req)
        timed_out = await _wait_all(protos, settings)
        cpu_frac = (time.process_time() - cpu0) / max(perf() - wall0, 1e-9)
    if gc_was_enabled:
        gc.enable()
    lags = lag.lags_s
    stop.set()
    await asyncio.gather(*probes, return_exceptions=True)
    for p in protos:
        if p.transport is not None:
            p.transport.close()
    after = await target.metrics()
    records = []
    for user, p in enumerate(protos):
        status, lines, error = load_http.decode_reads(p.reads) if p.reads else (None, [], "no response")
        if user in timed_out:
            error = timed_out[user]
        records.append(record_from_lines(user, p.t_send_s if p.t_send_s is not None else math.nan,
                                         status, lines, error))
    delta = None
    if before is not None and after is not None:
        a, b = _pick(after, GEN_TOKENS), _pick(before, GEN_TOKENS)
        delta = int(a - b) if a is not None and b is not None else None
    running = [s[1] for s in samples if s[1] is not None]
    queued = [s[2] for s in samples if s[2] is not None]
    stamps = "kernel" if protos and all(p.stamps == "kernel" for p in protos) else "user"
    return {"records": records,
            "client": client_check(lags, cpu_frac, lag_p99_max_s=settings.lag_p99_max_s,
                                   cpu_max_frac=settings.cpu_max_frac, stall_max_s=lag.stall_max_s,
                                   stamps=stamps,
                                   merged_events=sum(merged_events(r) for r in records),
                                   token_events=sum(len(r.chunk_times_s) for r in records)),
            "server": {"metrics_delta": delta, "max_running": int(max(running)) if running else None,
                       "max_queued": int(max(queued)) if queued else None, "samples": len(samples)}}


def _raise_fd_limit(needed: int) -> None:
    """One socket per user: lift the soft open-files limit toward the hard one when a row needs it."""
    try:
        import resource
    except ImportError:   # not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(hard, max(needed, soft))
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


async def _wait_all(protos: Sequence[load_http.StreamProtocol], settings: CurveSettings) -> dict[int, str]:
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
            if last is None and now - p.t_send_s > settings.first_token_timeout_s:
                timed_out[i] = f"no token within {settings.first_token_timeout_s:g} s"
            elif last is not None and now - last > settings.between_tokens_timeout_s:
                timed_out[i] = f"stream stalled for {settings.between_tokens_timeout_s:g} s"
            if i in timed_out:
                del pending[i]
    return timed_out


# -- a row and the curve -------------------------------------------------------------------------------------

async def run_row(target: Target, users: int, workload: Workload, settings: CurveSettings,
                  facts: Mapping[str, Any] | None, progress: Progress | None = None,
                  run_offset: int = 0) -> dict[str, Any]:
    say = progress or (lambda line: None)
    prompt_tokens: float | None = None
    if settings.warmup:
        t0 = perf()
        warm = await measure_run(target, [workload.body(f"warm{users}", u, u) for u in range(users)],
                                 settings, workload.path)
        wm = run_metrics(warm["records"])
        prompt_tokens = wm["prompt_tokens_p50"]
        say(f"curve users={users} warm pass (discarded): {perf() - t0:.1f} s, ttft p50 "
            f"{_s(wm['ttft_p50_s'])}, {wm['errors']} errors")
    per_run = []
    flushed = None
    for run in range(settings.runs):
        if settings.flush_cache:
            flushed = await target.flush()
        tag = f"r{run_offset + run}"
        out = await measure_run(target, [workload.body(tag, u, u + run + 1) for u in range(users)],
                                settings, workload.path)
        m = run_metrics(out["records"])
        m["client"] = out["client"]
        m["server"] = out["server"]
        m["token_count"] = token_count_check(out["records"], out["server"]["metrics_delta"])
        m["records"] = [r.to_dict() for r in out["records"]]
        prompt_tokens = prompt_tokens or m["prompt_tokens_p50"]
        per_run.append(m)
        c = out["client"]
        say(f"curve users={users} run {run + 1}/{settings.runs}: aggregate {_n(m['aggregate_tok_s'])} tok/s, "
            f"per-user {_n(m['per_user_tok_s'])} tok/s, ttft p50 {_s(m['ttft_p50_s'])} p95 {_s(m['ttft_p95_s'])}, "
            f"client lag p99 {_ms(c['lag_p99_s'])}"
            + (f" ({c['merged_events']} of {c['token_events']} token events merged; kernel stamps)"
               if c["stamps"] == "kernel" else " (user-space stamps)")
            + f" cpu {c['cpu_frac'] * 100:.0f} %"
            + (f", {m['errors']} errors" if m["errors"] else ""))
    row: dict[str, Any] = {"users": users, **combine_runs(per_run), "runs": len(per_run),
                           "spread_max_pct": settings.spread_max_pct,
                           "flush_endpoint": flushed if settings.flush_cache else "off",
                           "max_tokens": workload.max_tokens}
    observed = {"max_running": _max(r["server"]["max_running"] for r in per_run),
                "max_queued": _max(r["server"]["max_queued"] for r in per_run)}
    row["seat"] = seat_check(users, facts, observed)
    row["seats"] = row["seat"]["seats"]
    row["memory"] = memory_check(users, (facts or {}).get("kv_tokens"),
                                 prompt_tokens or workload.estimated_prompt_tokens(), workload.max_tokens)
    row["client_bound"] = any(r["client"]["client_bound"] for r in per_run)
    row["count_mismatch"] = any(not r["token_count"]["ok"] for r in per_run)
    row["noisy"] = row["spread_pct"] is not None and row["spread_pct"] > settings.spread_max_pct
    row["valid"] = not (row["client_bound"] or row["count_mismatch"] or any(r["errors"] for r in per_run))
    row["per_run"] = per_run
    return row


def _max(values: Any) -> int | None:
    xs = [v for v in values if v is not None]
    return max(xs) if xs else None


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} s"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f} ms"


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (it comes with uvicorn[standard]): lower per-read cost than asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_rows(base_url: str, workload: Workload, settings: CurveSettings, facts: Mapping[str, Any] | None = None,
             progress: Progress | None = None) -> list[dict[str, Any]]:
    """Run every users value of `settings.users` (sync entry point; owns its event loop)."""
    async def go() -> list[dict[str, Any]]:
        target = Target(base_url, workload.api_key)
        if workload.model is None:
            workload.model = await target.served_model()
        rows = []
        for i, users in enumerate(settings.users):
            rows.append(await run_row(target, users, workload, settings, facts, progress,
                                      run_offset=i * settings.runs))
        return rows

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(go())


def strip_records(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row without per-request records (for headline summaries)."""
    out = dict(row)
    out["per_run"] = [{k: v for k, v in r.items() if k != "records"} for r in row.get("per_run", [])]
    return out
