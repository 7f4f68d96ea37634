"""`glmf_agents(conversations=None, **settings) -> AgentsResult`: agents' sessions on the
session's server, and `glmf_replay(trace=None, **settings) -> ReplayResult`: a trace window
replayed open loop. The shared part of every gate's fixture: plugin/measuring.py."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.plugin.measuring import LaneGates

if TYPE_CHECKING:
    from pytest_glmf.gates.agents.api import AgentsResult
    from pytest_glmf.gates.agents.traces import ReplayResult

SERIAL = ("glmf_agents", "glmf_replay")   # speed measurements: the test measures alone


@pytest.fixture
def glmf_agents(request: pytest.FixtureRequest, _glmf_gates: LaneGates) -> Callable[..., "AgentsResult"]:
    """`glmf_agents(conversations=None, *, settings=None, key=None, **settings_kw)` runs agents'
    sessions on the session's server (`pytest_glmf.gates.agents.measure_agents`): your sessions
    YAML, a list of Session, or None (the lane's `agents.settings`: a sessions_file or the
    template). Recorded under `key` (default: the test's name)."""
    from pytest_glmf.gates.agents.api import measure_agents

    gate = _glmf_gates.gate("agents", "glmf_agents")

    def measure(conversations: Any = None, *, settings: Any = None, key: str | None = None,
                source: str | None = None, **settings_kw: Any) -> "AgentsResult":
        __tracebackhide__ = True
        opts = gate.call_settings(settings_kw, base=settings, source=source)
        # `sessions` given with your own sessions cycles them to that count (measure_agents)
        cycled = {"sessions": opts.sessions} if "sessions" in settings_kw else {}
        result = gate.measure(lambda: measure_agents(
            gate.url, conversations, settings=opts, timeouts=gate.timeouts, time_scale=gate.time_scale,
            **cycled), source)
        gate.record(key or request.node.name, result.to_record())
        return result

    return measure


@pytest.fixture
def glmf_replay(request: pytest.FixtureRequest, _glmf_gates: LaneGates) -> Callable[..., "ReplayResult"]:
    """`glmf_replay(trace=None, *, settings=None, key=None, **settings_kw)` replays a trace window
    open loop on the session's server (`pytest_glmf.gates.agents.replay.measure_replay`): a trace
    file, the packaged slice's name, a Trace, or None (the lane's `agents.replay` block; a relative
    trace path there is read beside the thresholds file). Recorded under `key` (default: the
    test's name); judge it with `assert_replay`."""
    from pytest_glmf.gates.agents.replay import measure_replay, trace_path
    from pytest_glmf.gates.agents.spec import REPLAY, replay_parts

    gate = _glmf_gates.gate("agents", "glmf_replay")

    def measure(trace: Any = None, *, settings: Any = None, key: str | None = None, source: str | None = None,
                **settings_kw: Any) -> "ReplayResult":
        __tracebackhide__ = True
        block = gate.section().get("replay")
        where = f"{gate.source()}.replay"
        if settings is None:
            settings = replay_parts(block, where)[0] if block is not None else REPLAY.defaults()
            if block is not None and trace is None:
                trace = trace_path(settings.trace, gate.thresholds.path)
        opts = gate.call_settings(settings_kw, base=settings, spec=REPLAY, source=source)
        result = gate.measure(lambda: measure_replay(
            gate.url, trace, settings=opts, timeouts=gate.timeouts, time_scale=gate.time_scale,
            progress=gate.progress()), source)
        gate.record(key or request.node.name, result.to_record())
        return result

    return measure
