"""pytest-glmf: options, hooks and fixtures only. Everything that launches, parses or measures
lives in plain modules (config, launch, bootlog, client, gates, results); the hooks' bodies for
server faults are in `plugin_health`, for result files, the ledger and the baseline in
`plugin_results`.

Session model: one server per test session. Without xdist the session-scoped `glmf_server`
fixture launches it on first use and stops it at the end. With xdist (`-n N`) the controller
launches it before the workers start, hands its address to every worker through
`pytest_configure_node`, and stops it after all workers are done; workers only attach.
"""
from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from importlib import resources
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.config.thresholds import Thresholds, load_thresholds
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.registry import GATES
from pytest_glmf.plugin import bookkeeping as plugin_results
from pytest_glmf.plugin import faults as plugin_health
from pytest_glmf.plugin.options import OPTIONS, resolve_settings
from pytest_glmf.plugin.serial import serial_lock_path, server_lock
from pytest_glmf.plugin.session import SESSION_KEY, GlmfSession

if TYPE_CHECKING:
    from pytest_glmf.engine.client import Client
    from pytest_glmf.gates.boot.parse import BootFacts
    from pytest_glmf.launch.base import Server
    from pytest_glmf.results.recorder import SessionRecorder

MARKERS = [
    "glmf_lanes(*names): run this test only on the named lanes; skipped with a reason on other lanes",
    "glmf_gate(name): the gate a test belongs to (" + ", ".join(GATES) + ")",
    "glmf_serial: the test measures speed; it runs alone against the server, never beside other "
    "tests (also under xdist)",
]
SERIAL_GROUP = "glmf_serial"


_SESSION = SESSION_KEY


# ---------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("glmf", "LLM-serving acceptance tests (pytest-glmf)")
    for name, (metavar, help_text, default) in OPTIONS.items():
        group.addoption(f"--glmf-{name}", dest=f"glmf_{name}", metavar=metavar, default=None,
                        help=help_text + f" (ini: glmf_{name})")
        parser.addini(f"glmf_{name}", help_text, type="string", default=default)
    help_text = ("Write this session's result file to the --glmf-baseline FILE (default: "
                 "<results>/<lane>-baseline.json) when every test passed")
    group.addoption("--glmf-update-baseline", dest="glmf_update_baseline", action="store_true", default=None,
                    help=help_text + " (ini: glmf_update_baseline)")
    parser.addini("glmf_update_baseline", help_text, type="bool", default=False)


# ---------------------------------------------------------------------------- configure


def pytest_configure(config: pytest.Config) -> None:
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
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        session = GlmfSession(settings, workerinput.get("glmf_session_id", "worker"), workerinput["workerid"],
                              owner=False, thresholds=thresholds,
                              remote_server=workerinput.get("glmf_server"),
                              boot_error=workerinput.get("glmf_boot_error"))
    else:
        session_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)
        session = GlmfSession(settings, session_id, "main", owner=True, thresholds=thresholds)
    config.stash[_SESSION] = session
    config.pluginmanager.register(session, "glmf_session")  # its hooks see the session state
    if session.owner and threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        # CI cancels jobs with SIGTERM, which skips atexit: stop the server first, then die as asked
        def on_sigterm(signum: int, frame: Any) -> None:
            from pytest_glmf.launch import process

            try:
                plugin_results.write_results(session, ["terminated by SIGTERM"])
            finally:
                session.stop()
                process.stop_all()   # a server still booting (launch_lane has not returned yet)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)
        session.extra["sigterm_handler"] = on_sigterm
    if settings.lane is not None and _no_path_args(config):
        # `pytest --glmf-lane batch` from any directory runs the ready-made suites shipped in the package
        config.args = [str(resources.files("pytest_glmf.suites"))]
    if settings.lane is not None and _xdist_controller(config):
        dist = config.getoption("dist", "no")
        if dist == "load":
            config.option.dist = "loadgroup"  # keep glmf_serial tests together on one worker


def _no_path_args(config: pytest.Config) -> bool:
    return config.args_source != pytest.Config.ArgsSource.ARGS


def _xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.hasplugin("dsession")


def _session(config: pytest.Config) -> GlmfSession:
    return config.stash[_SESSION]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Finish the result files of killed earlier sessions; under xdist the controller launches
    before the workers start (it owns the server)."""
    config = session.config
    if _SESSION not in config.stash:
        return
    state = _session(config)
    if state.settings.lane is None:
        return
    if state.owner:
        plugin_results.recover_killed(state)
    if not _xdist_controller(config):
        return
    try:
        state.get_server()
    except pytest.fail.Exception:
        pass  # boot_error is handed to the workers; each test that needs the server fails with it


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # xdist hook: runs on the controller per worker
    if _SESSION not in node.config.stash:
        return
    from pytest_glmf.launch import server_to_dict

    state = _session(node.config)
    node.workerinput["glmf_session_id"] = state.session_id
    if state.server is not None:
        node.workerinput["glmf_server"] = server_to_dict(state.server)
    if state.boot_error is not None:
        node.workerinput["glmf_boot_error"] = state.boot_error


def pytest_report_header(config: pytest.Config) -> str | None:
    if _SESSION not in config.stash:
        return None
    state = _session(config)
    s = state.settings
    if s.lane is None:
        return "glmf: no lane selected (--glmf-lane NAME)"
    where = (f"url={s.lane.url}" if s.lane.launcher == "attach"
             else f"image={s.lane.image}" if s.lane.launcher == "docker" else f"lanes={s.lanes_file or 'built-in'}")
    thresholds = str(s.thresholds_file or "built-in thresholds.yaml")
    if state.thresholds is not None and not state.thresholds.has_lane(s.lane.name):
        # a lane name the thresholds file does not know gates nothing: say so before the skips pile up
        thresholds += f" (NO SECTION for lane {s.lane.name!r}: every gate skips)"
    line = (f"glmf: lane={s.lane.name} launcher={s.lane.launcher} {where} thresholds={thresholds} "
            f"baseline={s.baseline or '-'} results={s.results_dir}")
    doc = state.baseline_doc()
    warning = plugin_results.baseline_warning(s, doc) if doc is not None else None
    return line if warning is None else [line, warning]


# ---------------------------------------------------------------------------- markers


def _marker_lanes(item: pytest.Item) -> tuple[str, ...] | None:
    names: tuple[str, ...] | None = None
    for mark in item.iter_markers("glmf_lanes"):
        if mark.kwargs or not mark.args or not all(isinstance(a, str) and a for a in mark.args):
            raise pytest.UsageError(f"{item.nodeid}: glmf_lanes takes lane names as strings, e.g. "
                                    f"@pytest.mark.glmf_lanes(\"batch\", \"daily\"); got {mark}")
        names = tuple(mark.args) if names is None else tuple(n for n in names if n in mark.args)
    return names


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _SESSION not in config.stash:
        return
    lane = _session(config).settings.lane
    for item in items:
        for mark in item.iter_markers("glmf_gate"):
            if mark.kwargs or len(mark.args) != 1 or mark.args[0] not in GATES:
                raise pytest.UsageError(f"{item.nodeid}: glmf_gate takes one gate name, one of "
                                        f"{', '.join(GATES)}; got {mark}")
        for mark in item.iter_markers("glmf_serial"):
            if mark.args or mark.kwargs:
                raise pytest.UsageError(f"{item.nodeid}: glmf_serial takes no arguments; got {mark}")
            if config.pluginmanager.hasplugin("xdist"):  # the marker only exists with xdist loaded
                item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
        lanes = _marker_lanes(item)
        if lanes is None:
            continue
        if lane is None:
            item.add_marker(pytest.mark.skip(reason=f"glmf_lanes({', '.join(lanes)}): no lane selected "
                                                    "(--glmf-lane NAME)"))
        elif lane.name not in lanes:
            item.add_marker(pytest.mark.skip(reason=f"glmf_lanes({', '.join(lanes)}): not applicable to "
                                                    f"lane {lane.name!r}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    config = item.config
    if (_SESSION not in config.stash or not hasattr(config, "workerinput")
            or "glmf_server" not in getattr(item, "fixturenames", ())):
        return (yield)
    state = _session(config)
    with server_lock(serial_lock_path(state), exclusive=item.get_closest_marker("glmf_serial") is not None):
        return (yield)


# ---------------------------------------------------------------------------- server faults


def _uses_server(item: pytest.Item) -> bool:
    return _SESSION in item.config.stash and "glmf_server" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A gone server: the first test to notice fails with the cause and the log tail, later tests
    skip with a reason (never hang on a dead address, never pass silently)."""
    if _uses_server(item):
        plugin_health.before_test(item, _session(item.config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """The lane's `timeouts.gate_s` bounds the test; a broken server turns the failure into one
    sentence with the server's log tail (no retry anywhere); then what the test recorded is
    judged against the baseline."""
    if not _uses_server(item):
        return (yield)
    state = _session(item.config)
    result = yield from plugin_health.guard_call(item, state)
    plugin_results.judge_recorded(item, state)
    return result


@pytest.hookimpl(trylast=True)  # after xdist has torn its workers down: nobody uses the server any more
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _SESSION not in config.stash:
        return
    state = _session(config)
    if not state.owner or state.settings.lane is None:
        return
    try:
        plugin_results.finish_session(state, exitstatus)
    finally:
        state.stop()
        serial_lock_path(state).unlink(missing_ok=True)  # the workers are gone: nobody holds it


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION not in config.stash:
        return
    if config.pluginmanager.get_plugin("glmf_session") is not None:
        config.pluginmanager.unregister(name="glmf_session")
    handler = _session(config).extra.get("sigterm_handler")
    if handler is not None and signal.getsignal(signal.SIGTERM) is handler:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The recipe-style tables of everything measured, then where the files are."""
    if _SESSION in config.stash:
        plugin_results.write_summary(terminalreporter, _session(config))


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def glmf_lane(pytestconfig: pytest.Config) -> LaneConfig:
    """The selected lane (after --glmf-url / --glmf-image overrides)."""
    lane = _session(pytestconfig).settings.lane
    if lane is None:
        pytest.fail("no lane selected: pass --glmf-lane NAME (built-in lanes: daily, batch) or set "
                    "glmf_lane in the ini file", pytrace=False)
    return lane


@pytest.fixture(scope="session")
def glmf_thresholds(pytestconfig: pytest.Config, glmf_lane: LaneConfig) -> Thresholds:
    """The validated thresholds file; `.for_gate(glmf_lane.name, gate)` gives a gate's section."""
    thresholds = _session(pytestconfig).thresholds
    assert thresholds is not None
    return thresholds


@pytest.fixture(scope="session")
def glmf_server(pytestconfig: pytest.Config, glmf_lane: LaneConfig) -> Iterator["Server"]:
    """The lane's running server, launched once per session (also under xdist)."""
    state = _session(pytestconfig)
    yield state.get_server()
    if not _xdist_controller(pytestconfig) and state.owner:
        state.stop()


@pytest.fixture(scope="session")
def glmf_boot_facts(glmf_server: "Server") -> "BootFacts":
    """Facts parsed from the server's boot log (seats, cap reason, KV pools...)."""
    return glmf_server.boot_facts


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
