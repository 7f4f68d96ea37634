"""The session object: one per pytest process, created and registered with the plugin manager only
when a lane is selected (pytest-xdist's `DSession` pattern: hooks as methods of one object). It holds the session's state (the lane,
its run, plugin/run.py: server launched once, result recorder, result file; the thresholds) and every hook that needs a lane,
so the plugin's entry point stays a few lines and no hook asks whether there is a session.

Session model: one server per test session. Without xdist the session-scoped `glmf_server`
fixture launches it on first use and stops it at the end. With xdist (`-n N`) the controller
launches it before the workers start, hands its address to every worker through
`pytest_configure_node`, and stops it after all workers are done; workers only attach.

Several lanes (`--glmf-lane a --glmf-lane b`, `--glmf-lane all`): the tests that use `glmf_lane`
are parametrized by lane (session scope, so pytest runs one lane's tests together), and the
session object holds one lane's run (`LaneRun`) at a time: before the first test of the next lane
it finishes the previous one (stops its server, writes its result file, baseline, history) and
starts a new run (its own session id `<id>-<lane>`, its own result file and ledger lines). With xdist the
controller does that when the scheduler has seen the previous lane's last test complete, and the
workers wait for the next lane's server (plugin/lanesched.py). At the end the lanes are compared
(compare/report.py): the terminal tables and `<results>/compare-<id>.md`.
"""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.config.thresholds import Thresholds
from pytest_glmf.launch import cleanup, launch_lane, server_from_dict, server_to_dict
from pytest_glmf.plugin import bookkeeping, faults, history, hooks, lanesched
from pytest_glmf.plugin.run import LaneRun
from pytest_glmf.plugin.serial import serial_lock_path, server_lock
from pytest_glmf.text import fold

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.launch.base import Server
    from pytest_glmf.plugin.options import Settings
    from pytest_glmf.results.recorder import SessionRecorder


SESSION_KEY = pytest.StashKey["GlmfSession"]()
PLUGIN_NAME = "glmf_session"


def session_of(config: pytest.Config) -> "GlmfSession | None":
    """This process's glmf session, None when no lane is selected."""
    return config.stash.get(SESSION_KEY, None)


def _xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.hasplugin("dsession")


def item_lane(item: pytest.Item) -> str | None:
    """The lane a test is parametrized with (several lanes), or None."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("glmf_lane") if callspec is not None else None


def _uses_server(item: pytest.Item) -> bool:
    return "glmf_server" in getattr(item, "fixturenames", ())


@dataclass(eq=False)  # identity semantics: registered with the plugin manager
class GlmfSession:
    """Per-process session state and the hooks that use it (registered as "glmf_session"). What
    belongs to one lane's run (its server, recorder, result file, notes) is `run` (plugin/run.py),
    replaced whole when several lanes switch."""

    settings: Settings                             # resolved once, frozen (several lanes: `lane` is the first)
    run: LaneRun                                   # the current lane's run
    worker: str                                    # "main", or the xdist worker id
    owner: bool                                    # this process starts/stops the server
    thresholds: Thresholds | None = None
    base_session_id: str = ""                      # several lanes: each lane's session id is `<this>-<lane>`
    recovered: list[str] = field(default_factory=list)   # partial result files of killed earlier sessions
    ending_abruptly: bool = False                  # SIGTERM or an exit: no last probe of the server
    finished_lanes: list[LaneRun] = field(default_factory=list)   # several lanes: their runs, in order
    comparison: tuple[str, Path, list[Path]] | None = None   # several lanes: (terminal text, Markdown file, inputs)
    comparison_html: Path | None = None
    comparison_error: str | None = None
    hook_errors: list[str] = field(default_factory=list)   # a pytest_glmf_update_result that raised (plugin/hooks.py)
    _forget_cleanup: Any = None
    config: pytest.Config | None = None

    @classmethod
    def start(cls, config: pytest.Config, settings: "Settings", thresholds: Thresholds | None) -> "GlmfSession":
        """The session of this process (an xdist worker's, or the owner's), registered with the
        plugin manager; the owner's result file is written even when SIGTERM or an exit ends it."""
        workerinput = getattr(config, "workerinput", None)
        several = len(settings.lanes) > 1
        if several:
            settings = replace(settings, lane=settings.lanes[0])
            dist = config.getoption("dist", "no")
            if workerinput is None and dist not in ("no", "load", "loadgroup"):
                raise pytest.UsageError(
                    f"--dist {dist}: several lanes ({', '.join(lane.name for lane in settings.lanes)}) under xdist "
                    "run with --dist load or loadgroup (one lane's server at a time, its tests spread over the "
                    "workers); drop --dist, or test one lane per session")
        if workerinput is not None:
            session_id = workerinput.get("glmf_session_id", "worker")
            base = workerinput.get("glmf_base_session_id", session_id)
            worker = workerinput["workerid"]
            run = LaneRun(settings, session_id, worker, remote_server=workerinput.get("glmf_server"),
                          boot_error=workerinput.get("glmf_boot_error"))
            session = cls(settings, run, worker, owner=False, thresholds=thresholds, base_session_id=base)
        else:
            session_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)
            run = LaneRun(settings, f"{session_id}-{settings.lanes[0].name}" if several else session_id)
            session = cls(settings, run, "main", owner=True, thresholds=thresholds, base_session_id=session_id)
            session._forget_cleanup = cleanup.register(f"glmf session {session_id}", session.end_abruptly, first=True)
        session.config = config
        config.stash[SESSION_KEY] = session
        config.pluginmanager.register(session, PLUGIN_NAME)
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            # `pytest --glmf-lane batch` from any directory runs the ready-made suites shipped in the package
            config.args = [str(resources.files("pytest_glmf.suites"))]
        if _xdist_controller(config) and config.getoption("dist", "no") == "load":
            config.option.dist = "loadgroup"  # keep glmf_serial tests together on one worker
        return session

    # ------------------------------------------------------------------------ state

    @property
    def several(self) -> bool:
        """Several lanes in this session (one server at a time)."""
        return len(self.settings.lanes) > 1

    def lane_session_id(self, name: str) -> str:
        """Several lanes: the session id of lane `name` (its result file, parts, locks)."""
        return f"{self.base_session_id}-{name}"

    def switch_lane(self, name: str) -> None:
        """Several lanes: make `name` the current lane; the previous one is finished first (its
        server stopped before the next one can start). An xdist worker only forgets the previous
        lane's server: the controller finishes lanes (`xdist_next_lane`)."""
        if name == self.lane.name and not self.finished(name):
            return
        if self.owner:
            self.finish_lane()
        lane = next(lane for lane in self.settings.lanes if lane.name == name)
        self.run = LaneRun(replace(self.settings, lane=lane), self.lane_session_id(name), self.worker)
        if self.owner:
            bookkeeping.claim_results(self.run)

    def finished(self, name: str) -> bool:
        """Several lanes: lane `name`'s run is finished (its result file written)."""
        return any(f.lane.name == name for f in self.finished_lanes)

    def xdist_next_lane(self, name: str) -> None:
        """xdist controller, several lanes: every test of the current lane has completed (or none
        ran yet): finish it, boot lane `name` and hand it to the workers waiting for it."""
        self.switch_lane(name)
        _progress(self, f"glmf: lane {name}: booting (lane {self.lane_index(name) + 1} of {len(self.settings.lanes)})")
        try:
            self.get_server()
        except pytest.fail.Exception:
            pass   # boot_error goes to the workers; each of the lane's tests fails with it
        lanesched.publish(self.settings.results_dir, self.run.session_id, name, server=self.run.server,
                          boot_error=self.run.boot_error)

    def xdist_stopping(self, why: str) -> None:
        """xdist controller: the session stops (-x, --maxfail): workers waiting for a later lane
        skip its tests instead of waiting for a server that is never booted."""
        for lane in self.settings.lanes:
            sid = self.lane_session_id(lane.name)
            if not lanesched.handoff_path(self.settings.results_dir, sid).exists():
                lanesched.publish(self.settings.results_dir, sid, lane.name,
                                  skip=f"lane {lane.name} not launched: the session is stopping ({why})")

    def lane_index(self, name: str) -> int:
        return [lane.name for lane in self.settings.lanes].index(name)

    def finish_lane(self, exitstatus: int | None = None) -> int | None:
        """Several lanes: stop the current lane's server and write its result file (with the lane's
        own exit status: 1 when one of its tests failed), once."""
        run = self.run
        if self.finished(run.lane.name):
            return None
        self.stop()
        if exitstatus in (None, pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):   # not interrupted: its own
            exitstatus = pytest.ExitCode.TESTS_FAILED if run.failed else pytest.ExitCode.OK
        status = bookkeeping.finish_session(self, exitstatus)
        run.exitstatus = int(exitstatus)
        self.finished_lanes.append(run)
        return status

    @property
    def lane(self) -> "LaneConfig":
        return self.run.lane

    def get_recorder(self) -> "SessionRecorder":
        return self.run.get_recorder()

    def baseline_doc(self) -> dict[str, Any] | None:
        return self.run.baseline_doc()

    def get_server(self) -> "Server":
        run = self.run
        if run.boot_error is not None:
            pytest.fail(run.boot_error, pytrace=False)
        if run.server is None:
            if run.remote_server is None and not self.owner and self.several:
                # the controller boots the lane when the last one is done
                handed = lanesched.wait_published(self.settings.results_dir, run.session_id, run.lane.name, self.worker)
                if "skip" in handed:
                    pytest.skip(handed["skip"])
                run.remote_server, run.boot_error = handed.get("server"), handed.get("boot_error")
                if run.boot_error is not None:
                    pytest.fail(run.boot_error, pytrace=False)
            if run.remote_server is not None:
                run.server = server_from_dict(run.remote_server)
            else:
                run.server_started = time.time()     # the server's GPU time counts from here (boot included)
                try:
                    run.server = launch_lane(run.lane, self.settings.results_dir, run.session_id)
                    run.server_ready = time.time()
                except Exception as exc:  # BootError, docker errors...: the message is for the user
                    run.boot_error = f"{type(exc).__name__}: {exc}"
                    bookkeeping.ledger_line(run, "boot", run.boot_error, getattr(exc, "cause", "configuration"))
                else:
                    bookkeeping.enrich_provenance(run.server, run.lane)
                    self.update_provenance(run)
                if run.boot_error is not None:   # outside the except: no "During handling..." echo
                    pytest.fail(run.boot_error, pytrace=False)
        assert run.server is not None
        return run.server

    def update_provenance(self, run: LaneRun) -> None:
        """Other plugins' facts in the provenance (pytest_glmf_update_provenance); one that raises
        fails the lane's tests with its line, as a server that did not come up would."""
        assert run.server is not None and self.config is not None
        try:
            hooks.update_provenance(self.config, run.lane, run.server.provenance)
        except hooks.HookFailed as exc:
            run.boot_error = f"the lane's provenance is not complete: {exc}"
            bookkeeping.ledger_line(run, "provenance", run.boot_error)

    def stop(self) -> None:
        run = self.run
        if run.server is not None and self.owner and not run.stopped:
            run.note_if_exited()
            if run.gone is None and not self.ending_abruptly:
                from pytest_glmf.engine.surface import record_at_end

                record_at_end(run.server)   # the served surface's generation part: every gate has run
            run.stopped = True
            run.server.stop()

    def end_abruptly(self, urgent: bool) -> None:
        """The process ends before the session did (SIGTERM: CI cancelled the job; or an exit):
        what was recorded goes to the result file with the reason, then the server stops."""
        reason = "terminated by SIGTERM" if urgent else "the process exited before the session ended"
        self.ending_abruptly = True     # no last probe of the server: just stop it
        try:
            bookkeeping.write_results(self, [reason])
        finally:
            self.stop()

    # ------------------------------------------------------------------------ hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Finish the result files of killed earlier sessions; under xdist the controller launches
        before the workers start (it owns the server)."""
        if self.owner:
            history.check_store(self.run)
            bookkeeping.recover_killed(self)
            bookkeeping.claim_results(self.run)
        if not _xdist_controller(session.config) or self.several:   # several: booted lane by lane (scheduler)
            return
        try:
            self.get_server()
        except pytest.fail.Exception:
            pass  # boot_error is handed to the workers; each test that needs the server fails with it

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Several lanes: every test that uses the lane (its server, client, results...) once per
        lane, at session scope, so pytest runs one lane's tests together (one server at a time)."""
        if self.several and "glmf_lane" in metafunc.fixturenames:
            names = [lane.name for lane in self.settings.lanes]
            metafunc.parametrize("glmf_lane", names, indirect=True, scope="session", ids=names)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:  # xdist hook: runs on the controller per worker

        node.workerinput["glmf_session_id"] = self.run.session_id
        node.workerinput["glmf_base_session_id"] = self.base_session_id
        if self.run.server is not None:
            node.workerinput["glmf_server"] = server_to_dict(self.run.server)
        if self.run.boot_error is not None:
            node.workerinput["glmf_boot_error"] = self.run.boot_error

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """xdist controller, several lanes: work units go out lane by lane (plugin/lanesched.py)."""
        if not self.several:
            return None
        results, base = self.settings.results_dir, self.base_session_id
        return lanesched.make_scheduler(config, log, [lane.name for lane in self.settings.lanes],
                                        lambda worker: lanesched.read_items(results, base, worker),
                                        self.xdist_next_lane, self.xdist_stopping)

    @pytest.hookimpl(tryfirst=True)   # before xdist sends the collection to the controller
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.several and not self.owner:
            lanes = {item.nodeid: lane for item in session.items if (lane := item_lane(item)) is not None}
            lanesched.write_items(self.settings.results_dir, self.base_session_id, self.worker, lanes)

    def pytest_report_header(self, config: pytest.Config) -> str | list[str]:
        s, lane = self.settings, self.lane
        if self.several:
            return _folded([f"glmf: lanes={','.join(x.name for x in s.lanes)} (one server at a time) "
                            f"lanes_file={s.lanes_file or 'built-in'} "
                            f"thresholds={s.thresholds_file or 'built-in thresholds.yaml'} results={s.results_dir}",
                            *(preflight_header(x) for x in s.lanes)])
        where = (f"url={lane.url}" + (f" image={lane.image}" if lane.image else "") if lane.launcher == "attach"
                 else f"image={lane.image}" if lane.launcher == "docker" else f"lanes={s.lanes_file or 'built-in'}")
        thresholds = str(s.thresholds_file or "built-in thresholds.yaml")
        if self.thresholds is not None and not self.thresholds.has_lane(lane.name):
            # a lane name the thresholds file does not know gates nothing: say so before the skips pile up
            thresholds += (f" (NO SECTION for lane {lane.name!r}: nothing is gated; the session fails unless "
                           "--glmf-allow-unverified)")
        line = (f"glmf: lane={lane.name} launcher={lane.launcher} {where} thresholds={thresholds} "
                f"baseline={s.baseline or ('history' if s.history and s.history.baseline_runs else '-')} "
                f"results={s.results_dir}")
        doc = self.baseline_doc()
        warning = bookkeeping.baseline_warning(s, doc) if doc is not None else None
        return _folded([line, preflight_header(lane), warning, s.history.header() if s.history else None])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        """xdist workers: glmf_serial tests hold the server alone, the others share it."""
        if self.several and (name := item_lane(item)) is not None:
            self.switch_lane(name)   # before the lock: it is the lane's
        if self.owner or not _uses_server(item):
            return (yield)
        with server_lock(serial_lock_path(self.run), exclusive=item.get_closest_marker("glmf_serial") is not None):
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """A gone server: the first test to notice fails with the cause and the log tail, later tests
        skip with a reason (never hang on a dead address, never pass silently)."""
        if self.several and (name := item_lane(item)) is not None:
            self.switch_lane(name)   # before the test's fixtures: the previous lane's server stops first
        if _uses_server(item):
            faults.before_test(item, self.run)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        """The lane's `timeouts.gate_s` bounds the test; a broken server turns the failure into one
        sentence with the server's log tail (no retry anywhere); then what the test recorded is
        judged against the baseline."""
        if not _uses_server(item):
            return (yield)
        result = yield from faults.guard_call(item, self.run)
        bookkeeping.judge_recorded(item, self)
        return result

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect every process's reasons the session's results are incomplete (xdist: they
        arrive on the controller with the reports' user_properties)."""
        props = getattr(report, "user_properties", ())
        reasons = [v for k, v in props if k == "glmf_incomplete"]
        run = self.run
        run.incomplete.extend(r for r in reasons if r not in run.incomplete)
        if report.failed and self.owner:
            run.failed = True
        gate = next((v for k, v in props if k == "glmf_gate"), None)
        if self.owner and gate is not None:
            run.gate_wall_s[str(gate)] = run.gate_wall_s.get(str(gate), 0.0) + float(report.duration or 0.0)
        if not self.owner or not any(k == "glmf_test" for k, _ in props):
            return
        bookkeeping.ledger_failure(run, report)
        if report.when == "teardown" and not run.stopped:
            bookkeeping.checkpoint(run)

    @pytest.hookimpl(trylast=True)  # after xdist has torn its workers down: nobody uses the server any more
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.owner:
            return
        try:
            # session.exitstatus, not the argument: an earlier hook may have failed the session
            # (plugin/verified.py: nothing was verified), and such a run is not blessed as a baseline
            if self.several:
                status = self.finish_lane(session.exitstatus)
                bookkeeping.write_comparison(self)
            else:
                status = bookkeeping.finish_session(self, session.exitstatus)
            if status is not None:
                session.exitstatus = status   # a store fault under --glmf-history-required
            if self.hook_errors and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED   # a result file short of a plugin's fields
        finally:
            self.stop()
            serial_lock_path(self.run).unlink(missing_ok=True)  # the workers are gone: nobody holds it
            if self.several:
                for lane in self.settings.lanes:
                    serial_lock_path(self.run, self.lane_session_id(lane.name)).unlink(missing_ok=True)
                lanesched.cleanup(self.settings.results_dir, self.base_session_id)

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        """The recipe-style tables of everything measured, then where the files are."""
        if self.several:
            bookkeeping.write_comparison_summary(terminalreporter, self)
        else:
            bookkeeping.write_summary(terminalreporter, self)
        for error in self.hook_errors:
            terminalreporter.write_line(f"glmf: {error} (the result file was written, this line in its incomplete)",
                                        red=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._forget_cleanup is not None:
            self._forget_cleanup()
        config.pluginmanager.unregister(self)


def _progress(state: GlmfSession, line: str) -> None:
    """A line on the controller's terminal between the workers' progress (lane switches)."""
    reporter = state.config.pluginmanager.get_plugin("terminalreporter") if state.config is not None else None
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(line)


def _folded(lines: list[str | None]) -> list[str]:
    """The header's lines, each folded at 120 columns (`fold`: continued four spaces in); a path
    too long for a line of its own stays beside its label ("glmf: history=/a/long/path")."""
    out = []
    for x in filter(None, lines):
        parts = fold(x).splitlines()
        if len(parts) > 1 and " " not in parts[0].strip():
            parts[:2] = [f"{parts[0]} {parts[1].strip()}"]
        out += parts
    return out


def preflight_header(lane: "LaneConfig") -> str | None:
    """The header's preflight line of a lane that runs an engine command line; sim and attach lanes
    have none, and do not load preflight (nor the docker SDK it imports)."""
    if lane.launcher not in ("docker", "process"):
        return None
    from pytest_glmf.launch.preflight import header_line

    return header_line(lane)
