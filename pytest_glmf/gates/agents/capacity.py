"""Capacity of agents: the most concurrent sessions of a conversation workload whose turns meet a
service level, and the frontier as sessions get longer.

    from pytest_glmf.gates.agents.capacity import measure_agents_capacity
    from pytest_glmf.gates.capacity.spec import SLO
    result = measure_agents_capacity(url, SLO(ttft_s=1.0, per_user_tok_s=50), turns=4)
    print(result.table())

A probe at N sessions is one `measure_agents` run of N sessions (the settings' template or file,
cycled to N). It passes when every turn was answered, the client sent turns on time, the
`ttft_pct` percentile of the turns' TTFT is at most `ttft_s` and at least `users_pct` % of the
answers decoded at `per_user_tok_s` or faster (recipe units on the simulator). The search is the
capacity gate's own (gates/capacity/search.py: bracket from the start value, then bisect to
`resolution_sessions`, never above `max_sessions`). Sessions may exceed the server's seats: with
think time between turns not every session is in flight at once, and the service level decides.
The frontier repeats the search at each of `frontier_turns` (longer sessions: longer contexts).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from pytest_glmf.gates.agents.api import AgentsResult, checked_settings, measure_agents
from pytest_glmf.gates.agents.spec import AgentsSettings
from pytest_glmf.gates.bounds import caller_source, checked_bounds, lane_phrase
from pytest_glmf.gates.capacity.search import Bound, SearchResult, search, users_step
from pytest_glmf.gates.capacity.slo import Miss, Probe
from pytest_glmf.gates.capacity.spec import SLO
from pytest_glmf.gates.verdict import Check, failed_checks, failure_message
from pytest_glmf.load import per_user_tok_s, percentile
from pytest_glmf.text import fmt, render_table


def judge_agents(n: int, result: AgentsResult, slo: SLO) -> Probe:
    """The probe at `n` sessions: the service level per turn (module docstring)."""
    scale = result.time_scale
    ok = [t for t in result.turns if t.ok]
    ttfts = [t.ttft_s / scale for t in ok if t.ttft_s is not None]
    speeds = [s * scale for s in (per_user_tok_s(t.request) for t in ok) if s is not None]
    s = result.summary
    misses = []
    if s.get("errors"):
        misses.append(Miss("failed turns", str(s["errors"]), "0"))
    if s.get("sessions_completed") != s.get("sessions"):
        misses.append(Miss("sessions completed", f"{s.get('sessions_completed')}/{s.get('sessions')}", "all"))
    misses += [Miss("client", flag, "turns sent on time") for flag in result.flags if flag.startswith("client")]
    ttft_at = percentile(ttfts, slo.ttft_pct)
    if slo.ttft_s is not None and (ttft_at is None or ttft_at > slo.ttft_s):
        misses.append(Miss(f"turn TTFT p{slo.ttft_pct:g}", fmt(ttft_at) + " s", f"<= {slo.ttft_s:g} s"))
    meeting = None
    at_pct = percentile(speeds, 100.0 - slo.users_pct)
    if slo.per_user_tok_s is not None:
        meeting = 100.0 * sum(1 for v in speeds if v >= slo.per_user_tok_s) / len(speeds) if speeds else 0.0
        if meeting < slo.users_pct:
            misses.append(Miss("answers at per-user tok/s", f"{meeting:.1f} % at >= {slo.per_user_tok_s:g}",
                               f">= {slo.users_pct:g} %"))
    return Probe(x=float(n), passed=not misses, misses=misses, users_meeting_pct=meeting,
                 per_user_tok_s_at_pct=at_pct, per_user_tok_s=percentile(speeds, 50), ttft_s=ttft_at,
                 ttft_p50_s=percentile(ttfts, 50), runs=1, requests=len(result.turns),
                 errors=int(s.get("errors") or 0), prompt_tokens=s.get("prompt_tokens_p50"), flags=list(result.flags))


@dataclass
class AgentsCapacityResult:
    sessions: int | None              # the capacity (None: not even one session met the service level)
    turns: int
    search: SearchResult
    slo: SLO
    settings: AgentsSettings
    frontier: list["AgentsCapacityResult"] = field(default_factory=list)
    lane: str | None = None

    def table(self) -> str:
        rows = [[str(p.users), "pass" if p.passed else "fail", fmt(p.ttft_s), fmt(p.per_user_tok_s_at_pct),
                 fmt(p.prompt_tokens), "; ".join(m.text() for m in p.misses) or "-"] for p in
                sorted(self.search.probes, key=lambda p: p.x)]
        head = (f"agents capacity at {self.turns} turns per session: {self.sessions} sessions "
                f"({self.slo.describe()}; stopped by {self.search.stopped_by})")
        out = head + "\n" + render_table(rows, ["sessions", "slo", f"TTFT p{self.slo.ttft_pct:g} s",
                                                f"tok/s p{100 - self.slo.users_pct:g}", "prompt tok p50", "misses"])
        if self.frontier:
            out += "\n\nfrontier over session length\n" + render_table(
                [[str(f.turns), str(f.sessions), f.search.stopped_by] for f in self.frontier],
                ["turns per session", "sessions", "stopped by"])
        return out

    def to_record(self) -> dict[str, Any]:
        return {"capacity_sessions": self.sessions, "turns": self.turns, "slo": self.slo.to_dict(),
                "search": self.search.to_dict(),
                "spread_by_metric_pct": ({"capacity_sessions": 100.0 * self.search.step / self.sessions}
                                         if self.sessions else {}),
                "frontier": [{"turns": f.turns, "capacity_sessions": f.sessions, "stopped_by": f.search.stopped_by}
                             for f in self.frontier]}


def _search(url: str, slo: SLO, opts: AgentsSettings, start: int, kw: Mapping[str, Any]) -> AgentsCapacityResult:
    def probe(x: float) -> Probe:
        n = int(x)
        return judge_agents(n, measure_agents(url, settings=replace(opts, sessions=n), tag=f"agents-n{n}", **kw), slo)

    bound = Bound(float(opts.max_sessions), "max_sessions", f"settings.max_sessions = {opts.max_sessions}",
                  "raise agents.settings.max_sessions")
    found = search(probe, start=float(start), floor=1.0, bound=bound, step=users_step(opts.resolution_sessions, 10.0))
    return AgentsCapacityResult(sessions=None if found.value is None else int(found.value), turns=opts.turns,
                                search=found, slo=slo, settings=opts)


def measure_agents_capacity(url: str, slo: SLO, *, settings: AgentsSettings | None = None,
                            timeouts: Mapping[str, float] | None = None, time_scale: float = 1.0,
                            start: int | None = None, **overrides: Any) -> AgentsCapacityResult:
    """The capacity in sessions at the settings' turns, and (with `frontier_turns`) at each of
    those; `start`: the first value tried (default: settings.start_sessions, else sessions)."""
    opts = checked_settings(settings, overrides)
    slo = replace(slo, allow_queueing=True)   # sessions past the seats are judged by the service level alone
    kw = {"timeouts": timeouts, "time_scale": time_scale}
    first = start or opts.start_sessions or opts.sessions
    result = _search(url, slo, opts, first, kw)
    for turns in opts.frontier_turns:
        at = result if turns == opts.turns else _search(url, slo, replace(opts, turns=turns),
                                                         result.sessions or first, kw)
        result.frontier.append(at)
    return result


def assert_agents_capacity(result: AgentsCapacityResult, *, source: str | None = None, lane: Any = None,
                           **bounds: Any) -> None:
    """Fail the test unless the capacity (and every frontier point) meets `bounds`
    (`capacity_sessions={"min": 8}`); the failure shows the probes."""
    __tracebackhide__ = True

    source = source or caller_source()
    bounds = checked_bounds("agents", bounds, "assert_agents_capacity", (), source)
    checks = [Check("capacity_sessions", result.sessions, bounds["capacity_sessions"],
                    where=f"@ {result.turns} turns", source=source, cause="server",
                    hint=result.search.bound.hint if result.search.stopped_by == "max_sessions" else "")]
    checks += [Check("capacity_sessions", f.sessions, bounds["capacity_sessions"], where=f"@ {f.turns} turns",
                     source=source, cause="server") for f in result.frontier if f is not result]
    failed = failed_checks(checks)
    if failed:
        pytest.fail(failure_message(failed, f"agents capacity{lane_phrase(lane or result.lane)}", result.table()),
                    pytrace=False)
