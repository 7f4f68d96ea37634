"""The measuring fixtures' shared part, written once for every gate's `gates/<gate>/fixture.py`.

A gate's fixture is a function the test calls with explicit arguments; it hands off to the plain
function of `pytest_glmf.gates.<gate>` (which scripts call the same way) with what the session
knows: the server's URL, the lane's boot facts, timeouts and simulator time scale, and how the lane
is measured (its gate's `settings:` in the thresholds file); the call's arguments come on top.
What it measured goes to the session's result file (so baselines compare it and the end-of-session
tables show it); `result.table()` is the gate's table. The shared part, here:

- `call_settings`, the one merge point of settings: the lane's (or the call's `settings=`) with the
  call's keyword arguments on top, through the gate's `GateSpec.build`, a bad key or value failing
  the test with the same line in every gate;
- `_glmf_gates`, the session's lane as every measuring fixture starts from it (server, lane,
  thresholds, recorder), and `LaneGate`, one gate on it: its settings and section, the call that
  fails the test with one line when a setting or file cannot be used, a measurement made once per
  lane, the record in the result file;
- the serial marking: a test using a fixture that a gate's module names in its `SERIAL` (speed, or
  exact numerics) measures alone (it is marked `glmf_serial`).

The gates' assertion helpers count every check they evaluate (gates/verdict.py), which is what the
session's "nothing was verified" rule reads (plugin/verified.py).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

from pytest_glmf.config.yamlfile import ConfigError, allowed
from pytest_glmf.gates.bounds import caller_source
from pytest_glmf.gates.registry import gate_spec
from pytest_glmf.plugin import FIXTURE_MODULES  # the plugin's one list (it imports no fixture module)
from pytest_glmf.plugin.progress import live_progress

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.config.thresholds import Thresholds
    from pytest_glmf.gates.spec import GateSpec
    from pytest_glmf.launch.base import Server
    from pytest_glmf.results.recorder import SessionRecorder

T = TypeVar("T")


class Laned(Protocol):
    lane: str | None                               # every gate's result: the lane it was measured on


R = TypeVar("R", bound=Laned)


def serial_fixtures(modules: tuple[str, ...]) -> tuple[str, ...]:
    """The fixtures whose tests measure alone: each fixture module's `SERIAL`, in the list's order."""
    return tuple(name for module in modules for name in getattr(importlib.import_module(module), "SERIAL", ()))


@pytest.hookimpl(tryfirst=True)  # before the plugin turns glmf_serial into an xdist group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    serial = serial_fixtures(FIXTURE_MODULES)
    for item in items:
        names = getattr(item, "fixturenames", ())
        if item.get_closest_marker("glmf_serial") is None and any(f in names for f in serial):
            item.add_marker(pytest.mark.glmf_serial)


def setup_error(fixture: str, source: str | None, exc: Exception) -> str:
    """A setting the measurement cannot use: named where it was set (a thresholds file's section,
    else the test line that called the fixture)."""
    if source:
        return f"{source}: {exc}"
    return f"{fixture}() at {caller_source()}: {exc}"


def call_settings(spec: "GateSpec", base: Any, overrides: Mapping[str, Any] | None, fixture: str,
                  source: str | None = None, only: tuple[str, ...] | None = None) -> Any:
    """The settings of one fixture call: `base` (the lane's settings of the gate, or the settings
    object the call passed) with the call's keyword `overrides` on top, built and checked by the
    gate's declaration (`GateSpec.build`). Every gate's fixture merges here, so a misspelled key or
    a value out of range fails the test with the same line in every gate, naming the key, what is
    allowed and the test line (or `source`, where the settings were written):

        glmf_capacity.measure() at test_mine.py:7: settings.runs: expected an integer >= 1, got 0

    `only`: the settings a call may set, where some are the suite's alone (drift's `regenerate`)."""
    __tracebackhide__ = True

    def build() -> Any:
        if only is not None:
            unknown = [k for k in overrides or {} if k not in only]
            if unknown:
                raise ConfigError(f"settings: unknown key {unknown[0]!r}; allowed: {allowed(only)}")
        return spec.build(base, "settings", overrides or None)

    return fail_unless_measured(build, fixture, source)


def fail_unless_measured(call: Callable[[], T], fixture: str, source: str | None) -> T:
    """The measurement's result; a setting or input file it cannot use fails the test with one
    line naming it (no traceback of the plugin's internals)."""
    __tracebackhide__ = True
    try:
        return call()
    except ConnectionError:   # the server's, not a setting's: the plugin names it (plugin/faults.py)
        raise
    except (ConfigError, OSError, ValueError, KeyError, RuntimeError) as exc:
        message = setup_error(fixture, source, exc)
    pytest.fail(message, pytrace=False)   # outside the except: no "During handling..." echo


@dataclass(eq=False)
class LaneGates:
    """The lane's run as every measuring fixture starts from it (the `_glmf_gates` fixture)."""

    config: pytest.Config
    server: "Server"
    lane: "LaneConfig"
    thresholds: "Thresholds"
    results: "SessionRecorder"

    def gate(self, name: str, fixture: str) -> "LaneGate":
        """Gate `name` on this lane, for the fixture `fixture` (named in its messages)."""
        return LaneGate(self.config, self.server, self.lane, self.thresholds, self.results, name, fixture)


@dataclass(eq=False)
class LaneGate(LaneGates):
    """One gate on the lane's server, as its fixture measures it."""

    name: str                                      # the gate: its thresholds section, its result-file key
    fixture: str                                   # "glmf_<gate>", in the messages
    _done: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        return self.server.base_url

    @property
    def timeouts(self) -> Any:
        return self.lane.timeouts

    @property
    def time_scale(self) -> float:
        """The simulator's time scale (numbers in the units of the GPU it models); 1 elsewhere."""
        return float(self.lane.time_scale) if self.lane.launcher == "sim" else 1.0

    def progress(self) -> Callable[[str], None] | None:
        """Live progress lines for a measurement that takes minutes (plugin/progress.py)."""
        return live_progress(self.config)

    def settings(self) -> Any:
        """The lane's settings of this gate (its `settings:` in the thresholds file, over the defaults)."""
        return self.thresholds.settings(self.lane.name, self.name)

    def call_settings(self, overrides: Mapping[str, Any] | None, *, base: Any = None, spec: "GateSpec | None" = None,
                      source: str | None = None, only: tuple[str, ...] | None = None) -> Any:
        """The settings of one call of the fixture: `base` (default: the lane's) with the call's
        `overrides` on top, checked by the gate's spec (or `spec`: a block of its own, agents'
        replay); a bad key or value fails the test in one line (`call_settings`)."""
        __tracebackhide__ = True
        return call_settings(spec or gate_spec(self.name), self.settings() if base is None else base, overrides,
                             self.fixture, source, only)

    def section(self) -> dict[str, Any]:
        """The lane's section of this gate in the thresholds file ({} when it has none)."""
        return self.thresholds.for_gate(self.lane.name, self.name)

    def source(self) -> str:
        """Where the section is written, for messages ("thresholds.yaml: lanes.daily.curve")."""
        return self.thresholds.source(self.lane.name, self.name)

    def call(self, call: Callable[[], T], source: str | None) -> T:
        """`call()`; a setting or file it cannot use fails the test with one line (fail_unless_measured)."""
        __tracebackhide__ = True
        return fail_unless_measured(call, self.fixture, source)

    def measure(self, call: Callable[[], R], source: str | None) -> R:
        """`call()` as `call` does it, the result marked with the lane's name."""
        __tracebackhide__ = True
        result = self.call(call, source)
        result.lane = self.lane.name
        return result

    def once(self, key: Hashable, call: Callable[[], R], source: str | None) -> R:
        """`measure(call)` made once per lane for `key`: a later call with the same key returns it."""
        __tracebackhide__ = True
        if key not in self._done:
            self._done[key] = self.measure(call, source)
        result: R = self._done[key]
        return result

    def record(self, key: str, data: Any) -> None:
        """`data` into the session's result file, under this gate and `key`."""
        self.results.record(self.name, key, data)


@pytest.fixture(scope="session")
def _glmf_gates(pytestconfig: pytest.Config, glmf_server: "Server", glmf_lane: "LaneConfig",
                glmf_thresholds: "Thresholds", glmf_results: "SessionRecorder") -> LaneGates:
    """The lane's run as every measuring fixture starts from it (one per lane)."""
    return LaneGates(pytestconfig, glmf_server, glmf_lane, glmf_thresholds, glmf_results)
