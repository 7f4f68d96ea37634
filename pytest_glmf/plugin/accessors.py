"""What a suite, a gate's fixture or another plugin may ask of the glmf session, given pytest's
`config` (pytest-xdist's `is_xdist_worker(request_or_session)` pattern: small functions over the
config, the session object itself staying private to the plugin).

    from pytest_glmf.plugin.accessors import selected_lanes

    def pytest_collection_modifyitems(config, items):
        if any(lane.launcher == "docker" for lane in selected_lanes(config)):
            ...

Each answers as it would without a lane (False, [] or None) when none is selected, so a caller
needs no check of its own. The session object (plugin/session.py) and the lane's run
(plugin/run.py) are the plugin's internals: `tests/test_layout.py` keeps suites and gates to these.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_glmf.plugin.session import session_of

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.config.thresholds import Thresholds


def is_glmf_session(config: pytest.Config) -> bool:
    """A lane is selected: the session launches (or attaches to) a server and measures."""
    return session_of(config) is not None


def selected_lanes(config: pytest.Config) -> list["LaneConfig"]:
    """The lanes this session runs, in their order (one, or each of `--glmf-lane a --glmf-lane b`);
    [] without a lane."""
    session = session_of(config)
    if session is None:
        return []
    return list(session.settings.lanes or [session.lane])


def session_thresholds(config: pytest.Config) -> "Thresholds | None":
    """The session's thresholds file, loaded and validated at configure (None without a lane)."""
    session = session_of(config)
    return session.thresholds if session is not None else None


def lanes_file(config: pytest.Config) -> Path | None:
    """The lanes file the lanes came from (None: the built-in lanes, or no lane)."""
    session = session_of(config)
    return session.settings.lanes_file if session is not None else None


def finished_result_file(config: pytest.Config, lane: str) -> Path | None:
    """The result file of `lane`, a lane of this session that has finished (several lanes run one
    after the other); None while it has not, or when it is no lane of this session."""
    session = session_of(config)
    if session is None:
        return None
    return next((run.result_file for run in session.finished_lanes if run.lane.name == lane), None)
