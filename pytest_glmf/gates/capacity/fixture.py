"""`glmf_capacity`: the public measurement functions bound to the session's server, its boot facts
and the lane's `capacity` section. A user's own test reads like the suite:

    from pytest_glmf.gates.capacity import SLO, assert_capacity

    def test_chat_capacity(glmf_capacity):
        result = glmf_capacity.measure(SLO(per_user_tok_s=50, ttft_s=1.0), prompt_tokens=4000)
        assert_capacity(result, users={"min": 32})

`measure`, `frontier` and `rate` take a service level (default: the lane's `capacity.slo`) and
settings overrides by name (default: the lane's `capacity.settings`). A measurement is made once
per session: asking again with the same arguments returns the same result, and the frontier
reuses a headline search of the same workload. Every result is recorded in the session's result
file under `gates.capacity` (`key=`, default `users@PROMPT+OUTPUT`, `frontier@CONTEXT`, `rate`),
where `--glmf-baseline` compares it. A test using the fixture runs alone (glmf_serial): capacity
is a speed measurement, and other tests' traffic would be measured with it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.gates.capacity.spec import SPEC, build_slo
from pytest_glmf.plugin.measuring import LaneGates, call_settings

if TYPE_CHECKING:
    from pytest_glmf.gates.capacity.measure import CapacityResult, FrontierResult, RateResult
    from pytest_glmf.gates.capacity.spec import SLO, CapacitySettings
    from pytest_glmf.load import Progress

SERIAL = ("glmf_capacity",)   # a speed measurement: the test measures alone


@dataclass
class LaneCapacity:
    base_url: str | list[str]
    settings: "CapacitySettings"
    slo: "SLO | None" = None
    facts: Mapping[str, Any] | None = None
    time_scale: float = 1.0
    timeouts: Mapping[str, float] | None = None
    source: str = "capacity"                       # where slo and settings came from, for messages
    progress: "Progress | None" = None
    api_key: str | None = None
    recorder: Any = None                           # the session's results (glmf_results): every result recorded
    lane: Any = None                               # the LaneConfig: its engine flags trim the seat hint
    _done: dict[str, Any] = field(default_factory=dict, repr=False)

    def _slo(self, slo: "SLO | None") -> "SLO":
        slo = slo or self.slo
        if slo is None:
            raise ValueError(f"{self.source}: no service level: pass one (SLO(per_user_tok_s=..., ttft_s=...)) or "
                             "add `slo: {per_user_tok_s: 50, ttft_s: 1.0}` to the lane's capacity section")
        return slo

    def _settings(self, overrides: Mapping[str, Any], method: str) -> "CapacitySettings":
        """capacity.settings with the call's `overrides` on top: the one merge of every gate's
        fixtures (plugin/measuring.py), a bad key or value failing the test in one line."""
        __tracebackhide__ = True
        return call_settings(SPEC, self.settings, overrides, f"glmf_capacity.{method}")

    def _kw(self) -> dict[str, Any]:
        return {"facts": self.facts, "time_scale": self.time_scale, "timeouts": self.timeouts,
                "progress": self.progress, "api_key": self.api_key, "lane": self.lane}

    def _record(self, key: str, data: dict[str, Any]) -> None:
        if self.recorder is not None:
            self.recorder.record("capacity", key, data)

    def measure(self, slo: "SLO | None" = None, *, key: str | None = None, **overrides: Any) -> "CapacityResult":
        """The most concurrent users meeting the service level (capacity.settings with `overrides`),
        recorded under `key` (default `users@PROMPT+OUTPUT`)."""
        from pytest_glmf.gates.capacity.measure import measure_capacity
        from pytest_glmf.gates.capacity.table import users_key

        __tracebackhide__ = True
        settings = self._settings(overrides, "measure")
        slo = self._slo(slo)
        done = f"users {slo!r} {settings!r}"
        if done not in self._done:
            self._done[done] = measure_capacity(self.base_url, slo, settings, **self._kw())
        result = self._done[done]
        self._record(key or users_key(result.workload), result.to_record())
        return result

    def frontier(self, slo: "SLO | None" = None, contexts: list[int] | None = None, **overrides: Any) -> "FrontierResult":
        """Capacity at each context length (settings.frontier.contexts unless given)."""
        from pytest_glmf.gates.capacity.measure import frontier_settings, measure_frontier
        from pytest_glmf.gates.capacity.table import frontier_entries

        __tracebackhide__ = True
        settings = self._settings(overrides, "frontier")
        slo = self._slo(slo)
        contexts = list(contexts if contexts is not None else settings.frontier.contexts)
        known = {}
        for context in contexts:    # a headline search of the same workload is not measured again
            same = f"users {slo!r} {frontier_settings(settings, context)!r}"
            if same in self._done:
                known[context] = self._done[same]
        key = f"frontier {slo!r} {settings!r} {contexts!r}"
        if key not in self._done:
            self._done[key] = measure_frontier(self.base_url, slo, settings, contexts=contexts, known=known,
                                               **self._kw())
            for point in self._done[key].points:
                cs = replace(settings, prompt_tokens=point.workload["prompt_tokens"],
                             max_tokens=point.workload["max_tokens"], runs=point.workload["runs"])
                self._done.setdefault(f"users {slo!r} {cs!r}", point)
        frontier = self._done[key]
        for entry_key, entry in frontier_entries(frontier, self.facts).items():
            self._record(entry_key, entry)
        return frontier

    def rate(self, slo: "SLO | None" = None, **overrides: Any) -> "RateResult":
        """The highest Poisson request rate meeting the service level; starts from a users capacity
        of the same workload when one was measured in this session."""
        from pytest_glmf.gates.capacity.measure import measure_rate_capacity

        __tracebackhide__ = True
        settings = self._settings(overrides, "rate")
        slo = self._slo(slo)
        key = f"rate {slo!r} {settings!r}"
        if key not in self._done:
            users = self._done.get(f"users {slo!r} {settings!r}")
            self._done[key] = measure_rate_capacity(self.base_url, slo, settings, users_capacity=users, **self._kw())
        self._record("rate", self._done[key].to_record())
        return self._done[key]


@pytest.fixture(scope="session")
def glmf_capacity(_glmf_gates: LaneGates) -> LaneCapacity:
    """Capacity measurements on the session's server (see LaneCapacity); the lane's `capacity`
    section gives the default service level and settings. On the simulator, numbers are in the
    units of the GPU it models (its time scale applied)."""
    from pytest_glmf.load import server_endpoints

    gate = _glmf_gates.gate("capacity", "glmf_capacity")
    section, source = gate.section(), gate.source()
    slo = build_slo(section["slo"], f"{source}.slo") if "slo" in section else None
    urls, facts = server_endpoints(gate.server)    # replicas: streams dealt over them, seats summed
    return LaneCapacity(base_url=urls if len(urls) > 1 else urls[0], settings=gate.settings(), slo=slo, facts=facts,
                        time_scale=gate.time_scale, timeouts=gate.timeouts, source=source, progress=gate.progress(),
                        recorder=gate.results, lane=gate.lane)
