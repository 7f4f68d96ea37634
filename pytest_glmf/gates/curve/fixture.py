"""`glmf_curve(users, **settings) -> CurveResult`: per-user tok/s and TTFT at N users on the
session's server, and the `glmf_users` marker that measures a test at each users value. The
shared part of every gate's fixture: plugin/measuring.py."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.plugin.measuring import LaneGates

if TYPE_CHECKING:
    from pytest_glmf.gates.curve.api import CurveResult

SERIAL = ("glmf_curve",)   # a speed measurement: the test measures alone
USERS_MARKER = ("glmf_users(*users): measure this test's curve at each users value, one test per value "
                "(ids users=N); the glmf_users fixture holds the value and glmf_curve() uses it")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", USERS_MARKER)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker("glmf_users")
    if mark is None:
        return
    users = mark.args
    # a collection error names the test and stops the run before any server boots
    if mark.kwargs or not users or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in users):
        raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: glmf_users takes positive integers, "
                                            f"e.g. @pytest.mark.glmf_users(1, 8, 48); got {mark}")
    if "glmf_users" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: glmf_users marks a test that measures no "
                                            "curve: use the glmf_curve fixture (or glmf_users itself)")
    metafunc.parametrize("glmf_users", list(users), ids=[f"users={u}" for u in users])


@pytest.fixture
def glmf_users(request: pytest.FixtureRequest) -> int | None:
    """The users value of a `@pytest.mark.glmf_users(...)` test (None without the marker)."""
    return getattr(request, "param", None)


@pytest.fixture
def glmf_curve(request: pytest.FixtureRequest, _glmf_gates: LaneGates,
               glmf_users: int | None) -> Callable[..., "CurveResult"]:
    """`glmf_curve(users=None, *, settings=None, key=None, **settings_kw)` measures the curve on the
    session's server (`pytest_glmf.gates.curve.measure_curve`) and returns its rows. `users`: an
    int or a list (default: the test's `glmf_users` marker value). Settings: the lane's
    `curve.settings` (or `settings=`), the keyword arguments on top (`prompt_file=`,
    `max_tokens=`, `runs=`...). Each row is recorded under `key` (default: the test's name and
    the users value)."""
    from pytest_glmf.gates.curve.api import measure_curve
    from pytest_glmf.load import WorkerError, server_endpoints

    gate = _glmf_gates.gate("curve", "glmf_curve")

    def measure(users: int | list[int] | None = None, *, settings: Any = None, key: str | None = None,
                source: str | None = None, **settings_kw: Any) -> "CurveResult":
        __tracebackhide__ = True
        users = glmf_users if users is None else users
        if users is None:
            pytest.fail("glmf_curve() needs users: glmf_curve(8), or mark the test @pytest.mark.glmf_users(8)",
                        pytrace=False)
        opts = gate.call_settings(settings_kw, base=settings, source=source)
        # several replicas: each one's boot facts, seats summed; streams dealt round-robin over their URLs
        urls, facts = server_endpoints(gate.server)

        def run() -> "CurveResult":
            try:
                return measure_curve(urls, users, settings=opts, boot_facts=facts, timeouts=gate.timeouts,
                                     time_scale=gate.time_scale, progress=gate.progress())
            except WorkerError as exc:   # the client failed, not a setting: said as the suite always said it
                pytest.fail(f"curve of lane {gate.lane.name!r} @ {users} users: client workers failed: {exc}",
                            pytrace=False)

        result = gate.measure(run, source)
        node = request.node.name
        for row in result.rows:
            row.lane = gate.lane.name
            if key is not None:
                name = key if len(result.rows) == 1 else f"{key} users={row.users}"
            else:
                name = node if f"users={row.users}" in node else f"{node} users={row.users}"
            gate.record(name, row.to_record())
        return result

    return measure
