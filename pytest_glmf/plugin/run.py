"""One lane's run: everything the plugin knows about the lane being tested in this process (its
settings, session id, server, recorder, result file and the notes the terminal summary prints).

The session object (plugin/session.py) holds session-wide state and one `LaneRun` at a time,
replaced (never reset field by field) when several lanes switch: a field added here starts
afresh for every lane. Bookkeeping, history and faults take the run, and the session only where
they need what outlives a lane (the thresholds, the recovered files, the plugin manager).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_glmf.plugin import history
from pytest_glmf.results.recorder import SCHEMA, SessionRecorder

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.launch.base import Server
    from pytest_glmf.plugin.options import Settings

SERVER_EXITED = "the server exited before the end of the session"


@dataclass(eq=False)
class LaneRun:
    """What one lane's run knows, in this process (the owner's, or an xdist worker's)."""

    settings: "Settings"                           # this lane's resolved settings (frozen; `lane` is the lane)
    session_id: str                                # several lanes: `<base id>-<lane>`
    worker: str = "main"                           # "main", or the xdist worker id (its recorder's part file)
    server: "Server | None" = None
    remote_server: dict[str, Any] | None = None    # worker: the controller's server, serialized
    boot_error: str | None = None
    gone: str | None = None                        # why the server is gone (later tests skip)
    stopped: bool = False
    incomplete: list[str] = field(default_factory=list)   # why the result file is incomplete
    failed: bool = False                           # one of the lane's tests failed (owner)
    recorder: SessionRecorder | None = None        # this process's `glmf_results`
    failed_tests: list[dict[str, Any]] = field(default_factory=list)   # each failed test with its message
    result_file: Path | None = None                # written at the end (or on SIGTERM)
    exitstatus: int | None = None                  # the lane's own exit status, once finished
    file_baseline: dict[str, Any] | None = None    # --glmf-baseline FILE, loaded once
    file_baseline_read: bool = False               # looked for once: a file blessed later was compared with nothing
    history_baseline: dict[str, Any] | None = None
    history_baseline_read: bool = False            # `history_baseline` was asked of the store (None: none stored)
    history_series: Any = None                     # the stored runs the slow-drift check compares with
    history_series_read: bool = False
    history_read_errors: list[str] = field(default_factory=list)
    history_baseline_note: str | None = None       # the summary's lines, in the order it prints them
    history_note: str | None = None
    baseline_note: str | None = None
    html_file: Path | None = None
    html_error: str | None = None
    # what the verdict cost (results/cost.py): the launch's start and answer (time.time()), and
    # each gate's tests' wall time, summed from their reports (owner; xdist: the controller)
    server_started: float | None = None
    server_ready: float | None = None
    gate_wall_s: dict[str, float] = field(default_factory=dict)

    @property
    def lane(self) -> "LaneConfig":
        assert self.settings.lane is not None   # a run exists only when a lane is selected
        return self.settings.lane

    def get_recorder(self) -> SessionRecorder:
        if self.recorder is None:
            self.recorder = SessionRecorder(self.settings.results_dir, self.session_id, self.lane.name, self.worker)
        return self.recorder

    def baseline_doc(self) -> dict[str, Any] | None:
        """The --glmf-baseline result file (validated at configure), or None; with `history[:K]`
        the median of the last K passing runs from the store (plugin/history.py)."""
        if self.settings.history is not None and self.settings.history.baseline_runs:
            return history.baseline_doc(self)
        if not self.file_baseline_read and self.settings.baseline is not None:
            self.file_baseline_read = True   # absent now (a first --glmf-update-baseline): None for good
            if self.settings.baseline.exists():
                from pytest_glmf.results.baseline import load_baseline

                self.file_baseline = load_baseline(self.settings.baseline, SCHEMA)
        return self.file_baseline

    def note_if_exited(self) -> None:
        """A server that died on its own (not stopped by us) makes the results incomplete."""
        if self.server is not None and not self.stopped and self.gone is None and not self.server.is_alive():
            self.gone = SERVER_EXITED
            self.incomplete.append(self.gone)
