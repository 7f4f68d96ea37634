"""The plugin's server-fault handling around each test that uses `glmf_server`, as plain functions
its hooks call; the sentences themselves live in `health`.

A gone server: the first test to notice fails with the cause and the log tail, later tests skip
with a reason (never hang on a dead address, never pass silently). A broken request while the
server lives fails its test with one sentence (no retry anywhere). The lane's `timeouts.gate_s`
bounds each test's call. Every such fault marks the session's results incomplete.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.launch import health
from pytest_glmf.results.ledger import CAUSE_PROPERTY

if TYPE_CHECKING:
    from pytest_glmf.plugin.run import LaneRun


def mark_incomplete(item: pytest.Item, reason: str, cause_class: str = "server") -> None:
    # user_properties travel with the report to the xdist controller, which writes the result file
    # and the failure ledger (a server fault is the server's, or the network's: results/ledger.py)

    item.user_properties.append(("glmf_incomplete", reason))
    item.user_properties.append((CAUSE_PROPERTY, cause_class))


def fail_if_gone(item: pytest.Item, run: "LaneRun", when: str) -> None:
    """Fail this test if the server died `when` (it remembers why, so later tests skip)."""
    __tracebackhide__ = True
    if run.server is None or run.stopped:
        return
    message = health.gone_message(run.server, when)
    if message is not None:
        run.gone = message
        mark_incomplete(item, message.splitlines()[0])
        pytest.fail(message, pytrace=False)


def before_test(item: pytest.Item, run: "LaneRun") -> None:
    """Setup of a test on the server: tag it as a glmf test, start capturing what it records,
    and skip or fail it when the server is gone."""
    __tracebackhide__ = True
    item.user_properties.append(("glmf_test", run.lane.name))
    run.get_recorder().capture = []   # what this test records (also in its fixtures)
    if run.gone is not None:
        pytest.skip(f"glmf: {run.gone.splitlines()[0].rstrip('.')}; not run")
    fail_if_gone(item, run, "after the previous test and before this one")


def guard_call(item: pytest.Item, run: "LaneRun") -> Generator[None, Any, Any]:
    """The body of the `pytest_runtest_call` wrapper (`yield from` it): the lane's gate time
    limit around the test, and a failure that names the broken server or request."""
    lane = run.lane
    limit_s = lane.timeouts.get("gate_s", health.DEFAULT_GATE_S)
    try:
        with health.gate_timer(limit_s, f"test {item.nodeid}"):
            result = yield
    except (pytest.skip.Exception, KeyboardInterrupt):
        raise
    except BaseException as exc:
        server = run.server
        first = (str(exc).strip().splitlines() or [""])[0][:200].rstrip(".")
        if server is not None and health.wait_gone(server, 1.0):
            message = health.gone_message(server, f"during this test ({type(exc).__name__}: {first})")
            run.gone = message
            mark_incomplete(item, (message or "").splitlines()[0])
            if isinstance(exc, pytest.fail.Exception):  # keep the gate's own table below
                message = f"{message}\n\nthe test's own failure:\n{str(exc)[:3000]}"
            raise pytest.fail.Exception(message, pytrace=False) from None
        message = health.broken_request_message(exc, server, lane.name, item.config.rootpath)
        if message is not None:
            mark_incomplete(item, f"{item.nodeid}: {message.splitlines()[0]}", health.cause_class(exc))
            raise pytest.fail.Exception(message, pytrace=False) from None   # the sentence says it all
        raise
    fail_if_gone(item, run, "during this test (the test itself passed)")
    return result
