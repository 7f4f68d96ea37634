"""The agents gate: N agents' sessions at once, each turn resending the conversation so far.

Public API (import it from here; the modules behind it may move):
    measure_agents(url, conversations=None, **settings) -> AgentsResult    per-turn TTFT, cache hits, sessions
    assert_agents(result, **bounds)                                   the thresholds file's bounds
    load_sessions(path), from_template(**counts) -> Conversations     what the agents send
    AgentsSettings                                                    the settings and their defaults
    measure_replay(url, trace=None, **settings) -> ReplayResult       a trace window replayed open loop
    assert_replay(result, **bounds)                                   the `agents.replay` block's bounds
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.gates.agents.api import AgentsResult, assert_agents, measure_agents
    from pytest_glmf.gates.agents.replay import assert_replay, measure_replay
    from pytest_glmf.gates.agents.sessions import Conversations, Session, Turn, from_template, load_sessions
    from pytest_glmf.gates.agents.spec import AgentsSettings, ReplaySettings
    from pytest_glmf.gates.agents.traces import ReplayResult

__all__ = ["AgentsResult", "AgentsSettings", "Conversations", "ReplayResult", "ReplaySettings", "Session", "Turn",
           "assert_agents", "assert_replay", "from_template", "load_sessions", "measure_agents", "measure_replay"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
