"""pytest-glmf's entry point (`pytest11: glmf = pytest_glmf.plugin`): options, markers, fixtures.

When a lane is selected, `pytest_configure` creates the session object (plugin/session.py) and
registers it with the plugin manager; every hook that needs a lane is a method of it (launching,
server faults, the serial lock, results, the end-of-session tables). Without a lane nothing is
registered: the plugin adds its options, markers and fixtures and stays out of the way.
Everything that launches, parses or measures lives in plain modules (config, launch, engine,
gates, results); each gate's fixtures in its package (`gates/<gate>/fixture.py`, registered
through the one list `FIXTURE_MODULES`, their shared part in `measuring`); the hooks' bodies for
server faults are in `faults`, for result files, the ledger and the baseline in `bookkeeping`.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.config.thresholds import Thresholds, load_thresholds
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.registry import GATES
from pytest_glmf.plugin import hookspecs, verified
from pytest_glmf.plugin.options import OPTIONS, resolve_settings
from pytest_glmf.plugin.session import GlmfSession, item_lane, session_of

if TYPE_CHECKING:
    from pytest_glmf.engine.client import Client
    from pytest_glmf.launch.base import Server
    from pytest_glmf.results.recorder import SessionRecorder

# The fixture modules, one list: each gate's (gates/<gate>/fixture.py, in the registry's order) and
# the comparison's; each names in `SERIAL` its fixtures whose tests measure alone. pytest imports
# them when it registers this plugin (strings: this module imports none of them, so a fixture module
# may import the plugin's modules at its top). plugin/measuring.py is their shared part, registered
# first: they import it, and pytest rewrites the asserts of a module it registers before it is imported.
FIXTURE_MODULES = (*(f"pytest_glmf.gates.{gate}.fixture" for gate in GATES), "pytest_glmf.compare.fixture")
pytest_plugins = ["pytest_glmf.plugin.measuring", *FIXTURE_MODULES]

MARKERS = [
    "glmf_lanes(*names): run this test only on the named lanes; skipped with a reason on other lanes",
    "glmf_gate(name): the gate a test belongs to (" + ", ".join(GATES) + ")",
    "glmf_serial: the test measures speed; it runs alone against the server, never beside other "
    "tests (also under xdist)",
]
SERIAL_GROUP = "glmf_serial"
KNOWN_LANES = pytest.StashKey[list[str]]()
NO_LANE = "no lane selected: pass --glmf-lane NAME (built-in lanes: daily, batch) or set glmf_lane in the ini file"


# ---------------------------------------------------------------------------- options


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks other plugins and conftest.py files implement (plugin/hookspecs.py)."""
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("glmf", "LLM-serving acceptance tests (pytest-glmf)")
    for name, (metavar, help_text, default) in OPTIONS.items():
        group.addoption(f"--glmf-{name.replace('_', '-')}", dest=f"glmf_{name}", metavar=metavar, default=None,
                        action="append" if name == "lane" else "store", help=help_text + f" (ini: glmf_{name})")
        parser.addini(f"glmf_{name}", help_text, type="string", default=default)
    help_text = ("Fail the session when the history store cannot be opened or written (default: one line, "
                 "the result files are kept and queued)")
    group.addoption("--glmf-history-required", dest="glmf_history_required", action="store_true", default=None,
                    help=help_text + " (ini: glmf_history_required)")
    parser.addini("glmf_history_required", help_text, type="bool", default=False)
    help_text = ("Write this session's result file to the --glmf-baseline FILE (default: "
                 "<results>/<lane>-baseline.json) when every test passed")
    group.addoption("--glmf-update-baseline", dest="glmf_update_baseline", action="store_true", default=None,
                    help=help_text + " (ini: glmf_update_baseline)")
    parser.addini("glmf_update_baseline", help_text, type="bool", default=False)
    help_text = ("Also write each lane's result as one self-contained HTML page, <results>/<lane>-latest.html, "
                 "beside its JSON (the page of `glmf report RESULT --html OUT.html`)")
    group.addoption("--glmf-html", dest="glmf_html", action="store_true", default=None,
                    help=help_text + " (ini: glmf_html)")
    parser.addini("glmf_html", help_text, type="bool", default=False)
    verified.addoption(group, parser)


# ---------------------------------------------------------------------------- configure


def pytest_configure(config: pytest.Config) -> None:
    """Options and files are checked before anything starts; with a lane, the session begins."""
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if config.option.help or getattr(config.option, "version", False):
        return
    settings = resolve_settings(config)
    thresholds = None
    if settings.lane is not None or settings.thresholds_file is not None:
        try:
            thresholds = load_thresholds(settings.thresholds_file)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[KNOWN_LANES] = verified.known_lanes(settings)
    verified.required_gates(config)   # a misspelt gate is an error also before a lane is chosen
    if settings.lane is not None:
        verified.Verification.register(config, GlmfSession.start(config, settings, thresholds))


def pytest_report_header(config: pytest.Config) -> str | None:
    # with a lane, the session object writes the header line
    return None if session_of(config) is not None else "glmf: no lane selected (--glmf-lane NAME)"


# ---------------------------------------------------------------------------- markers


def _marker_lanes(item: pytest.Item) -> tuple[str, ...] | None:
    names: tuple[str, ...] | None = None
    for mark in item.iter_markers("glmf_lanes"):
        if mark.kwargs or not mark.args or not all(isinstance(a, str) and a for a in mark.args):
            raise pytest.UsageError(f"{item.nodeid}: glmf_lanes takes lane names as strings, e.g. "
                                    f"@pytest.mark.glmf_lanes(\"batch\", \"daily\"); got {mark}")
        verified.check_marker_lanes(item.nodeid, mark.args, item.config.stash.get(KNOWN_LANES, list(mark.args)))
        names = tuple(mark.args) if names is None else tuple(n for n in names if n in mark.args)
    return names


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = session_of(config)
    for item in items:
        lane_name = item_lane(item) or (session.lane.name if session is not None else None)
        for mark in item.iter_markers("glmf_gate"):
            if mark.kwargs or len(mark.args) != 1 or mark.args[0] not in GATES:
                raise pytest.UsageError(f"{item.nodeid}: glmf_gate takes one gate name, one of "
                                        f"{', '.join(GATES)}; got {mark}")
        for mark in item.iter_markers("glmf_serial"):
            if mark.args or mark.kwargs:
                raise pytest.UsageError(f"{item.nodeid}: glmf_serial takes no arguments; got {mark}")
            if config.pluginmanager.hasplugin("xdist"):  # the marker only exists with xdist loaded
                # several lanes: a group per lane, so each lane's speed tests stay serial on its own server
                lane = item_lane(item)
                item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP if lane is None else f"{SERIAL_GROUP}:{lane}"))
        lanes = _marker_lanes(item)
        if lanes is None:
            continue
        if lane_name is None:
            item.add_marker(pytest.mark.skip(reason=f"glmf_lanes({', '.join(lanes)}): no lane selected "
                                                    "(--glmf-lane NAME)"))
        elif lane_name not in lanes:
            item.add_marker(pytest.mark.skip(reason=f"glmf_lanes({', '.join(lanes)}): not applicable to "
                                                    f"lane {lane_name!r}"))


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def glmf_lane(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> LaneConfig:
    """The selected lane (after --glmf-url / --glmf-image overrides); with several lanes, this
    test's lane (the session switched to it before the test's setup)."""
    session = session_of(pytestconfig)
    if session is None:
        pytest.fail(NO_LANE, pytrace=False)
    name = getattr(request, "param", None)
    if name is not None and name != session.lane.name:
        session.switch_lane(name)   # a test whose setup hook did not switch (e.g. a plugin reordered it)
    return session.lane


@pytest.fixture(scope="session")
def glmf_thresholds(pytestconfig: pytest.Config, glmf_lane: LaneConfig) -> Thresholds:
    """The validated thresholds file; `.for_gate(glmf_lane.name, gate)` gives a gate's section."""
    thresholds = _session(pytestconfig).thresholds
    assert thresholds is not None   # loaded whenever a lane is selected
    return thresholds


@pytest.fixture(scope="session")
def glmf_server(pytestconfig: pytest.Config, glmf_lane: LaneConfig) -> Iterator["Server"]:
    """The lane's running server, launched once per session (also under xdist)."""
    session = _session(pytestconfig)
    yield session.get_server()
    if session.owner and not pytestconfig.pluginmanager.hasplugin("dsession"):
        session.stop()    # under xdist the controller stops it after every worker is done


@pytest.fixture(scope="session")
def glmf_client(glmf_server: "Server", glmf_lane: LaneConfig) -> Iterator["Client"]:
    """A `pytest_glmf.engine.client.Client` on the server, with the lane's timeouts."""
    from pytest_glmf.engine.client import Client, Timeouts

    known = {k: v for k, v in glmf_lane.timeouts.items() if k in Timeouts.__dataclass_fields__}
    with Client(glmf_server.base_url, Timeouts(**known)) as client:
        yield client


@pytest.fixture(scope="session")
def glmf_results(pytestconfig: pytest.Config, glmf_lane: LaneConfig) -> "SessionRecorder":
    """Session recorder: `.record(gate, key, data)` adds JSON-able data to the session's result file."""
    return _session(pytestconfig).get_recorder()


def _session(config: pytest.Config) -> GlmfSession:
    """The session behind a fixture that depends on `glmf_lane` (which fails without a lane)."""
    session = session_of(config)
    assert session is not None
    return session
