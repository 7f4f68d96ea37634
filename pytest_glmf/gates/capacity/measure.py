"""Capacity on a running server: plain functions that take a base URL and explicit arguments and
return typed results (the suite's fixture, `glmf capacity` and a user's own script call these).

    from pytest_glmf.gates.capacity.measure import measure_capacity
    from pytest_glmf.gates.capacity.spec import SLO
    result = measure_capacity("http://127.0.0.1:30000", SLO(per_user_tok_s=50, ttft_s=1.0), facts=boot_facts)
    print(result.users, result.stopped_by)

Every probe is a curve row measured by gates/curve (the same load generator, records and client
self-check): one short discarded warm pass at the probe's shape (the first hit of a batch shape is
autotune), then `runs` measured runs after a prefix-cache flush, with prompts no other request
shares (unless `shared_prefix`). The search (search.py) decides which users values to probe, from
what the probes so far say (model.py); the boot facts bound it (bounds.py); the interval
(interval.py) is a bootstrap over the records of the probes next to the answer. Open loop (`measure_rate_capacity`): the same, with `requests`
requests per run arriving as a Poisson process of the probed rate.
"""
from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_glmf.gates.capacity.bounds import kv_users, users_bound
from pytest_glmf.gates.capacity.interval import boundary_estimate, capacity_interval
from pytest_glmf.gates.capacity.search import Bound, SearchResult, rate_step, search, users_step
from pytest_glmf.gates.capacity.slo import Probe, judge
from pytest_glmf.gates.capacity.spec import DEFAULTS, SLO, CapacitySettings
from pytest_glmf.load import (
    ClientCost,
    Endpoints,
    LoadSettings,
    Progress,
    Workload,
    available_cores,
    context_check,
    event_loop_factory,
    fit_prompts,
    load_prompt_variants,
    measure_run,
    run_row,
)

SCHEMA = 1
TEMPLATE_TOKENS = 32       # chat template and session line around the fitted prompt, until usage says
DEFAULT_START_USERS = 8


class SearchAnswer:
    """What a capacity answer (users or rate) says of its search: why it stopped, the boundary's
    interval, what left it undecided, and how far the answer may move between sessions."""

    search: SearchResult

    @property
    def stopped_by(self) -> str:
        """"slo" (a failing probe above the answer), "floor", or the bound that ended the search."""
        return self.search.stopped_by

    @property
    def boundary_ci95(self) -> list[float] | None:
        return self.search.boundary_ci95

    @property
    def undecided(self) -> str:
        return self.search.undecided

    def spread_pct(self) -> float | None:
        """How far the answer may move between sessions, as a baseline spread (spread_pct_of)."""
        return spread_pct_of(self.search)


@dataclass
class CapacityResult(SearchAnswer):
    """The capacity for one workload under one service level, and the evidence."""

    users: int | None                      # the most users that met the service level (None: not even min_users,
    #                                        or undecided: a probe the client could not measure)
    slo: SLO
    workload: dict[str, Any]               # prompt_tokens, max_tokens, shared_prefix, path
    search: SearchResult
    bounds: list[Bound]                    # every bound that applied (search.bound is the binding one)
    time_scale: float = 1.0

    @property
    def last_pass(self) -> Probe | None:
        return self.search.last_pass

    @property
    def first_fail(self) -> Probe | None:
        return self.search.first_fail

    @property
    def probes(self) -> list[Probe]:
        return self.search.probes

    @property
    def wall_s(self) -> float:
        return self.search.wall_s

    @property
    def boundary_x(self) -> float | None:
        return self.search.boundary_x

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "users": self.users, "stopped_by": self.stopped_by, "undecided": self.undecided,
                "slo": self.slo.to_dict(), "workload": self.workload, "time_scale": self.time_scale,
                "search": self.search.to_dict(), "bounds": [vars(b) for b in self.bounds],
                "boundary_users": self.boundary_x, "boundary_ci95": self.boundary_ci95, "cost": self.search.cost()}

    def to_record(self) -> dict[str, Any]:
        """The result file's entry: `users` compares like any metric, with spread_pct as its spread."""
        spread = self.spread_pct()
        return {"users": self.users, "stopped_by": self.stopped_by, "undecided": self.undecided,
                "workload": self.workload, "slo": self.slo.to_dict(), "time_scale": self.time_scale,
                "spread_by_metric_pct": {"users": spread} if spread is not None else {},
                "boundary_users": self.boundary_x, "boundary_ci95": self.boundary_ci95, "cost": self.search.cost(),
                "bound": vars(self.search.bound), "probes": len(self.probes), "requests": self.search.requests,
                "wall_s": round(self.wall_s, 1), "search": self.search.to_dict()}


def spread_pct_of(search: SearchResult) -> float | None:
    """How far the answer (the last pass) may move between sessions, in % of it: one resolution
    step (the search stops anywhere within one), or as far as the noise moves the boundary (its 95 %
    interval's width) when that is wider. A baseline comparison allows this much."""
    if not search.value:
        return None
    width = (search.boundary_ci95[1] - search.boundary_ci95[0]) if search.boundary_ci95 else 0.0
    return 100.0 * max(search.step, width) / search.value


@dataclass
class FrontierResult:
    """Capacity at several context lengths per user, with the server's bounds beside it."""

    points: list[CapacityResult]
    slo: SLO
    seats: int | None = None
    kv_tokens: int | None = None

    @property
    def wall_s(self) -> float:
        return sum(p.wall_s for p in self.points)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "slo": self.slo.to_dict(), "seats": self.seats, "kv_tokens": self.kv_tokens,
                "points": [p.to_dict() for p in self.points]}


@dataclass
class RateResult(SearchAnswer):
    """Open-loop capacity: the highest Poisson arrival rate that met the service level."""

    rate_per_s: float | None
    slo: SLO
    workload: dict[str, Any]
    search: SearchResult
    time_scale: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "rate_per_s": self.rate_per_s, "stopped_by": self.stopped_by,
                "undecided": self.undecided, "slo": self.slo.to_dict(), "workload": self.workload,
                "time_scale": self.time_scale, "search": self.search.to_dict(), "boundary_per_s": self.search.boundary_x,
                "boundary_ci95": self.boundary_ci95, "cost": self.search.cost()}

    def to_record(self) -> dict[str, Any]:
        spread = self.spread_pct()
        return {"rate_per_s": self.rate_per_s, "stopped_by": self.stopped_by, "undecided": self.undecided,
                "workload": self.workload, "slo": self.slo.to_dict(), "time_scale": self.time_scale,
                "probes": len(self.search.probes), "requests": self.search.requests,
                "wall_s": round(self.search.wall_s, 1),
                "spread_by_metric_pct": {"rate_per_s": spread} if spread is not None else {},
                "boundary_per_s": self.search.boundary_x, "boundary_ci95": self.boundary_ci95,
                "cost": self.search.cost(), "search": self.search.to_dict()}


@dataclass
class _Session:
    """One event loop, one target and the fitted prompts, for every probe of a measurement."""

    base_url: str | Sequence[str]           # one server (or router), or replicas the streams are dealt over
    settings: CapacitySettings
    slo: SLO
    facts: Mapping[str, Any] | None = None
    time_scale: float = 1.0
    timeouts: Mapping[str, float] | None = None
    progress: Progress | None = None
    api_key: str | None = None
    lane: Any = None                        # a LaneConfig: its engine flags trim the seat hint (boot/hints.py)
    runner: asyncio.Runner = field(init=False)
    target: Endpoints = field(init=False)
    cost: ClientCost = field(init=False, default_factory=ClientCost)   # sizes the client's worker processes
    model: str | None = field(init=False, default=None)
    prompts: dict[tuple[int, bool], list[str]] = field(init=False, default_factory=dict)
    counted: dict[tuple[int, bool], int] = field(init=False, default_factory=dict)   # /tokenize: the longest
    tags: int = field(init=False, default=0)
    workers: int | None = field(init=False, default=None)   # raised when a probe was client-bound: kept for the rest

    def __enter__(self) -> "_Session":
        self.runner = asyncio.Runner(loop_factory=event_loop_factory())
        self.target = Endpoints.from_urls(self.base_url, self.api_key)
        self.model = self.settings.model or self.runner.run(self.target.served_model())
        return self

    def __exit__(self, *exc: object) -> None:
        self.runner.close()

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    # -- what users send ------------------------------------------------------------------------
    def workload(self, settings: CapacitySettings) -> Workload:
        key = (settings.prompt_tokens or 0, settings.shared_prefix)
        if key not in self.prompts:
            variants = load_prompt_variants(settings.prompt_file)
            if settings.shared_prefix:
                variants = variants[:1]
            if settings.prompt_tokens is None:
                self.prompts[key] = variants
            else:
                t0 = time.perf_counter()
                try:
                    fitted, counts = fit_prompts(self.target.urls[0], variants, settings.prompt_tokens, self.model,
                                                 lengthen=True)
                except ValueError:
                    raise ValueError(f"capacity settings.prompt_tokens: {self.target.urls[0]} has no /tokenize "
                                     "endpoint to fit prompts to a token count (prompt_tokens: null, or glmf "
                                     "capacity --prompt-tokens 0, sends the prompt file as it is)") from None
                self.prompts[key] = fitted
                self.counted[key] = max(counts)
                self.say(f"capacity: {len(fitted)} prompt(s) of {min(counts):,}-{max(counts):,} tokens "
                         f"({time.perf_counter() - t0:.1f} s to fit them with /tokenize)")
        return self.load_settings(settings, 0).workload(self.prompts[key], api_key=self.api_key,
                                                        prompt_tokens=self.counted.get(key))

    def load_settings(self, settings: CapacitySettings, users: int, **kw: Any) -> LoadSettings:
        """One probe's load run, from the gate's settings (the one place they become one): the
        settings named like the load engine's are its, the served model, the client processes a
        client-bound probe asked for, no warm pass (the probe's own is shorter: `_measure`)."""
        workers = max(settings.workers or 0, self.workers or 0) or None
        return LoadSettings.of(settings, [users], timeouts=self.timeouts, model=self.model, workers=workers,
                               warmup=False, **kw)

    # -- one probe ------------------------------------------------------------------------------
    async def _measure(self, n: int, workload: Workload, run_settings: LoadSettings, settings: CapacitySettings,
                       label: str) -> dict[str, Any]:
        """A short discarded pass at this shape, then the measured runs (a curve row). A run the
        client's self-check marks (the client, not the server, set its pace) is measured again, up
        to `client_retries` extra runs, and left out of the numbers."""
        self.tags += 1
        # a workload the server's context cannot hold is refused before even the warm pass is sent
        refused = context_check(workload.prompt_tokens, workload.estimated_prompt_tokens(), workload.max_tokens,
                                (self.facts or {}).get("context_len"), gate="capacity")
        if refused is not None:
            raise refused
        warm = replace(workload, max_tokens=min(settings.warm_tokens, workload.max_tokens))
        t0 = time.perf_counter()
        await measure_run(self.target, [warm.body(f"w{self.tags}", u, u) for u in range(n)], run_settings,
                          workload.path)
        self.say(f"capacity {label}: warm pass (discarded) {time.perf_counter() - t0:.1f} s")
        return await run_row(self.target, n, workload, run_settings, self.facts, self.progress,
                             run_offset=self.tags * 1000, cost=self.cost)

    def _probe(self, x: float, n: int, run_settings: LoadSettings, settings: CapacitySettings, label: str,
               open_loop: bool = False) -> Probe:
        t0 = time.perf_counter()
        row = self.runner.run(self._measure(n, self.workload(settings), run_settings, settings, label))
        # Client-bound: the client, not the server, set the pace. Not a miss: measured again with
        # twice the client processes while the cores allow (and kept for the probes after it).
        while row.get("client_bound") and not any(r.get("errors") for r in row.get("per_run", [])):
            used = int(row.get("workers") or 1)
            more = min(available_cores(), 2 * used)
            if more <= used:
                break
            self.say(f"capacity {label}: client-bound with {used} client process(es): measured again with {more}")
            self.workers = more
            run_settings = replace(run_settings, workers=more)
            row = self.runner.run(self._measure(n, self.workload(settings), run_settings, settings, label))
        if open_loop:    # n is requests over time here, not concurrent users
            for key in ("seat", "memory"):
                (row.get(key) or {})["notes"] = []
        probe = judge(x, row, self.slo, self.time_scale, wall_s=time.perf_counter() - t0)
        probe.replaced_runs = row.get("replaced_runs", 0)     # the row's flags say why (load: describe_flags)
        self._said(label, probe)
        return probe

    def probe_users(self, users: int, settings: CapacitySettings) -> Probe:
        return self._probe(users, users, self.load_settings(settings, users), settings, f"users={users}")

    def probe_rate(self, rate: float, settings: CapacitySettings) -> Probe:
        n = settings.rate.requests
        # the simulator runs 1 / time_scale times faster: the same load is that many times the rate
        run_settings = self.load_settings(settings, n, rate_per_s=rate / self.time_scale, arrival="poisson",
                                           seed=settings.rate.seed)
        return self._probe(rate, n, run_settings, settings, f"rate={rate:.3g}/s", open_loop=True)

    def _undecided_hint(self, result: SearchResult) -> str:
        """The setting to change when the client could not keep up (nothing otherwise)."""
        last = result.probes[-1] if result.probes else None
        if result.stopped_by != "undecided" or last is None or "client self-check" not in last.unmeasured:
            return ""
        return (f"; {last.workers or 1} client process(es) is as many as this machine's {available_cores()} core(s) "
                "allow: measure from a machine with more cores or less other load (capacity settings.workers, "
                "glmf capacity --workers)")

    def _said(self, label: str, probe: Probe) -> None:
        verdict = "meets the service level" if probe.passed else \
            f"not measured: {probe.unmeasured}" if probe.unmeasured else \
            "misses " + "; ".join(m.text() for m in probe.misses)
        self.say(f"capacity {label}: {verdict} ({probe.wall_s:.1f} s)")

    # -- searches -------------------------------------------------------------------------------
    def capacity(self, settings: CapacitySettings, start: int | None = None,
                 prior_slope: float | None = None) -> CapacityResult:
        prompt_est = (settings.prompt_tokens + TEMPLATE_TOKENS if settings.prompt_tokens is not None
                      else self.workload(settings).estimated_prompt_tokens())
        shared = max(0.0, prompt_est - TEMPLATE_TOKENS) if settings.shared_prefix else 0.0
        bound, bounds = users_bound(self.facts, prompt_tokens=prompt_est, max_tokens=settings.max_tokens,
                                    shared_tokens=shared, max_users=settings.max_users,
                                    allow_queueing=self.slo.allow_queueing, lane=self.lane)
        first = start or settings.start_users or DEFAULT_START_USERS
        # the search's own clamp (search.py): never below the floor, never above the bound
        first = min(max(first, settings.min_users), math.floor(bound.value))
        probe_first = f"first probe {first}" if first >= settings.min_users else "nothing to probe"
        self.say(f"capacity: {workload_text(_workload_dict(settings))} per user, {self.slo.describe()}; "
                 f"at most {bound.value:g} users ({bound.detail}); {probe_first}")
        result = search(lambda x: self.probe_users(int(x), settings), start=first, floor=settings.min_users,
                        bound=bound, step=users_step(settings.resolution_users, settings.resolution_pct),
                        guided=settings.guided, prior_slope=prior_slope)
        result.boundary_x = boundary_estimate(result)
        result.boundary_ci95 = capacity_interval(result, self.slo)
        result.undecided += self._undecided_hint(result)
        value = None if result.value is None else int(result.value)
        return CapacityResult(users=value, slo=self.slo, workload=_workload_dict(settings), search=result,
                              bounds=bounds, time_scale=self.time_scale)

    def rate_capacity(self, settings: CapacitySettings, start: float | None = None) -> RateResult:
        rs = settings.rate
        bound = Bound(rs.max_per_s, "max_rate", f"the search's ceiling, settings.rate.max_per_s = {rs.max_per_s:g}",
                      "raise capacity settings.rate.max_per_s")
        first = start or rs.start_per_s or 1.0
        self.say(f"capacity (open loop): {rs.requests} requests per run, Poisson arrivals, {self.slo.describe()}; "
                 f"first rate {first:.3g}/s")
        result = search(lambda x: self.probe_rate(x, settings), start=first, floor=min(first, 0.01), bound=bound,
                        step=rate_step(settings.resolution_pct), integer=False, guided=settings.guided)
        result.boundary_x = boundary_estimate(result)
        result.boundary_ci95 = capacity_interval(result, self.slo)
        result.undecided += self._undecided_hint(result)
        return RateResult(rate_per_s=result.value, slo=self.slo, workload=_workload_dict(settings), search=result,
                          time_scale=self.time_scale)


def workload_text(w: Mapping[str, Any]) -> str:
    """'2,400 prompt + 384 output tokens' (the prompt file's own size when not fitted)."""
    prompt = "the prompt file's" if w.get("prompt_tokens") is None else f"{w['prompt_tokens']:,}"
    return f"{prompt} prompt + {w['max_tokens']} output tokens" + (", shared prefix" if w.get("shared_prefix") else "")


def _workload_dict(settings: CapacitySettings) -> dict[str, Any]:
    return {"prompt_tokens": settings.prompt_tokens, "max_tokens": settings.max_tokens,
            "shared_prefix": settings.shared_prefix, "path": settings.path, "runs": settings.runs}


def measure_capacity(base_url: str | Sequence[str], slo: SLO, settings: CapacitySettings = DEFAULTS, *,
                     facts: Mapping[str, Any] | None = None, start_users: int | None = None, time_scale: float = 1.0,
                     timeouts: Mapping[str, float] | None = None, progress: Progress | None = None,
                     api_key: str | None = None, lane: Any = None) -> CapacityResult:
    """The most concurrent users meeting `slo` with `settings`' workload. `base_url`: a server (or a
    router), or several replicas' URLs the streams are dealt over; `facts`: the boot facts
    (BootFacts.to_dict(): seats, KV pool; summed over replicas) that bound the search;
    `time_scale`: a simulator's; `lane`: the LaneConfig measured, whose engine flags trim the seat
    hint (advice it already follows is left out)."""
    with _Session(base_url, settings, slo, facts, time_scale, timeouts, progress, api_key, lane) as session:
        return session.capacity(settings, start_users)


def frontier_settings(settings: CapacitySettings, context: int) -> CapacitySettings:
    """The settings of one frontier point: its context, the frontier's output tokens and runs."""
    fs = settings.frontier
    return replace(settings, prompt_tokens=context, max_tokens=fs.max_tokens or settings.max_tokens,
                   runs=fs.runs or settings.runs)


def measure_frontier(base_url: str | Sequence[str], slo: SLO, settings: CapacitySettings = DEFAULTS, *,
                     contexts: Sequence[int] | None = None, facts: Mapping[str, Any] | None = None,
                     start_users: int | None = None, time_scale: float = 1.0, timeouts: Mapping[str, float] | None = None,
                     progress: Progress | None = None, api_key: str | None = None,
                     known: Mapping[int, CapacityResult] | None = None, lane: Any = None) -> FrontierResult:
    """Capacity at each context length (prompt tokens per user), shortest first. Each search starts
    at the previous context's capacity (capacity falls with context) capped by its own bounds, and
    its model borrows the previous context's slope at the boundary until it has two points of its own.
    `known`: results already measured for some contexts with the same settings (not measured again)."""
    contexts = sorted(set(contexts if contexts is not None else settings.frontier.contexts))
    points: list[CapacityResult] = []
    with _Session(base_url, settings, slo, facts, time_scale, timeouts, progress, api_key, lane) as session:
        start, slope = start_users, None
        for context in contexts:
            cs = frontier_settings(settings, context)
            point = (known or {}).get(context) or session.capacity(cs, start, prior_slope=slope)
            points.append(point)
            if point.users:
                start = point.users
            slope = point.search.slope or slope
    return FrontierResult(points=points, slo=slo, seats=(facts or {}).get("max_running_requests"),
                          kv_tokens=(facts or {}).get("kv_tokens"))


def measure_rate_capacity(base_url: str | Sequence[str], slo: SLO, settings: CapacitySettings = DEFAULTS, *,
                          facts: Mapping[str, Any] | None = None, start_per_s: float | None = None,
                          users_capacity: CapacityResult | None = None, time_scale: float = 1.0,
                          timeouts: Mapping[str, float] | None = None, progress: Progress | None = None,
                          api_key: str | None = None, lane: Any = None) -> RateResult:
    """The highest Poisson request rate meeting `slo`. Without a start, a users capacity gives one
    by Little's law (users / time each request takes at that load), else 1 request/s."""
    if start_per_s is None and users_capacity is not None and users_capacity.last_pass is not None:
        p = users_capacity.last_pass
        if p.per_user_tok_s and p.ttft_s is not None:
            start_per_s = p.users / (p.ttft_s + settings.max_tokens / p.per_user_tok_s)
    with _Session(base_url, settings, slo, facts, time_scale, timeouts, progress, api_key, lane) as session:
        return session.rate_capacity(settings, start_per_s)


def kv_bound_users(result: CapacityResult, facts: Mapping[str, Any] | None) -> int | None:
    """The KV pool's bound for this result's workload, from the measured prompt size when known."""
    prompt = (result.last_pass or result.first_fail or None)
    tokens = prompt.prompt_tokens if prompt and prompt.prompt_tokens else \
        (result.workload["prompt_tokens"] or 0) + TEMPLATE_TOKENS
    shared = max(0.0, tokens - TEMPLATE_TOKENS) if result.workload.get("shared_prefix") else 0.0
    return kv_users(facts, tokens, result.workload["max_tokens"], shared)
