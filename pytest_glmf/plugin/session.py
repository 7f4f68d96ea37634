"""Per-process session state: the selected lane, its server (launched once), the thresholds, the result recorder."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.config.thresholds import Thresholds
from pytest_glmf.plugin import bookkeeping as plugin_results

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.launch.base import Server
    from pytest_glmf.plugin.options import Settings
    from pytest_glmf.results.recorder import SessionRecorder


SERVER_EXITED = "the server exited before the end of the session"
SESSION_KEY = pytest.StashKey["GlmfSession"]()


def session_of(config: pytest.Config) -> "GlmfSession | None":
    """This process's glmf session when a lane is selected, else None."""
    session = config.stash.get(SESSION_KEY, None)
    return session if session is not None and session.settings.lane is not None else None


@dataclass(eq=False)  # identity semantics: registered with the plugin manager
class GlmfSession:
    """Per-process session state, registered with the plugin manager as "glmf_session"."""

    settings: Settings
    session_id: str
    worker: str                                    # "main", or the xdist worker id
    owner: bool                                    # this process starts/stops the server
    server: "Server | None" = None
    boot_error: str | None = None
    thresholds: Thresholds | None = None
    remote_server: dict[str, Any] | None = None    # worker: the controller's server, serialized
    extra: dict[str, Any] = field(default_factory=dict)
    gone: str | None = None                        # why the server is gone (later tests skip)
    incomplete: list[str] = field(default_factory=list)  # why the result file is incomplete
    stopped: bool = False
    recorder: "SessionRecorder | None" = None      # this process's `glmf_results`
    _baseline_doc: dict[str, Any] | None = None

    @property
    def lane(self) -> "LaneConfig":
        assert self.settings.lane is not None
        return self.settings.lane

    def get_recorder(self) -> "SessionRecorder":
        from pytest_glmf.results.recorder import SessionRecorder

        if self.recorder is None:
            assert self.settings.lane is not None
            self.recorder = SessionRecorder(self.settings.results_dir, self.session_id,
                                            self.settings.lane.name, self.worker)
        return self.recorder

    def baseline_doc(self) -> dict[str, Any] | None:
        """The --glmf-baseline result file (validated at configure), or None."""
        if self._baseline_doc is None and self.settings.baseline is not None and self.settings.baseline.exists():
            from pytest_glmf.results.baseline import load_baseline
            from pytest_glmf.results.recorder import SCHEMA

            self._baseline_doc = load_baseline(self.settings.baseline, SCHEMA)
        return self._baseline_doc

    def get_server(self) -> "Server":
        from pytest_glmf.launch import launch_lane, server_from_dict

        if self.boot_error is not None:
            pytest.fail(self.boot_error, pytrace=False)
        if self.server is None:
            if self.remote_server is not None:
                self.server = server_from_dict(self.remote_server)
            else:
                assert self.settings.lane is not None
                try:
                    self.server = launch_lane(self.settings.lane, self.settings.results_dir, self.session_id)
                except Exception as exc:  # BootError, docker errors...: the message is for the user
                    self.boot_error = f"{type(exc).__name__}: {exc}"
                    plugin_results.ledger_line(self, "boot", self.boot_error)
                else:
                    plugin_results.enrich_provenance(self.server, self.settings.lane)
                if self.boot_error is not None:   # outside the except: no "During handling..." echo
                    pytest.fail(self.boot_error, pytrace=False)
        return self.server

    def note_if_exited(self) -> None:
        """A server that died on its own (not stopped by us) makes the results incomplete."""
        if self.server is not None and not self.stopped and self.gone is None and not self.server.is_alive():
            self.gone = SERVER_EXITED
            self.incomplete.append(self.gone)

    def stop(self) -> None:
        if self.server is not None and self.owner and not self.stopped:
            self.note_if_exited()
            self.stopped = True
            self.server.stop()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect every process's reasons the session's results are incomplete (xdist: they
        arrive on the controller with the reports' user_properties)."""
        props = getattr(report, "user_properties", ())
        reasons = [v for k, v in props if k == "glmf_incomplete"]
        self.incomplete.extend(r for r in reasons if r not in self.incomplete)
        if not self.owner or self.settings.lane is None or not any(k == "glmf_test" for k, _ in props):
            return
        plugin_results.ledger_failure(self, report)
        if report.when == "teardown" and not self.stopped:
            plugin_results.checkpoint(self)
