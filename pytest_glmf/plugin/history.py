"""The plugin's use of the history store (results/history/), as plain functions its hooks call.

  * `resolve_history`: --glmf-history, --glmf-history-drift, --glmf-history-required and the
    `history[:K]` form of --glmf-baseline, validated into one `HistorySettings`;
  * `check_store`: with --glmf-history-required, a store that cannot be opened stops the session
    before anything starts;
  * `mark_pending` / `store_session`: every final result file is queued (a marker file under
    `<results>/.history-pending/`), and the session's end stores the queue: its own run, killed
    sessions recovered at its start, and runs an earlier session could not store (store down).
    A fault is one line at the end; the JSON files stay, nothing is lost, no test fails for it
    unless --glmf-history-required;
  * `baseline_doc`: the history baseline (`--glmf-baseline history:K`), made once per process when
    the first test needs it (the lane key needs the running server's provenance);
  * `drift_findings`: the slow-drift test of what a test recorded: a `GlmfDriftWarning`, or with
    `--glmf-history-drift fail` a failure of that test.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.gates.registry import GATES, metric_directions
from pytest_glmf.results.recorder import write_atomic

if TYPE_CHECKING:
    from pytest_glmf.plugin.run import LaneRun
    from pytest_glmf.results.history.store import Location

DEFAULT_BASELINE_RUNS = 5      # --glmf-baseline history: the median of the last 5 passing runs
DEFAULT_DRIFT_WINDOW = 5       # --glmf-history-drift MODE: the last 5 runs against the 5 before (drift.py)
DRIFT_MODES = ("warn", "fail", "off")
PENDING_DIR = ".history-pending"


class GlmfDriftWarning(UserWarning):
    """A metric drifted slowly over the last runs (pytest_glmf.plugin.history). Turn it into an
    error with `-W error::pytest_glmf.plugin.history.GlmfDriftWarning`, or use
    --glmf-history-drift fail."""


@dataclass(frozen=True)
class HistorySettings:
    location: "Location | None"       # None: the store is off
    baseline_runs: int | None = None  # --glmf-baseline history[:K]
    drift_mode: str = "warn"
    drift_window: int = DEFAULT_DRIFT_WINDOW
    required: bool = False

    def header(self) -> str | None:
        if self.location is None:
            return None
        bits = [f"glmf: history={self.location.display}"]
        if self.baseline_runs:
            bits.append(f"baseline=median of the last {self.baseline_runs} passing runs")
        bits.append(f"slow drift={self.drift_mode}" + (f" over {self.drift_window} runs" if self.drift_mode != "off" else ""))
        if self.required:
            bits.append("required")
        return " ".join(bits)


def parse_history_baseline(value: str | None, where: str) -> int | None:
    """`history` -> 5, `history:K` -> K, a file path -> None."""
    if value is None or not (value == "history" or value.startswith("history:")):
        return None
    k = value.partition(":")[2] or str(DEFAULT_BASELINE_RUNS)
    if not k.isdigit() or int(k) < 1:
        raise pytest.UsageError(f"{where}: {value!r}: the history form is history or history:K with K >= 1 "
                                "(the number of passing runs whose median is the baseline), e.g. history:5")
    return int(k)


def resolve_history(history: tuple[str | None, Path, str], drift: tuple[str | None, Path, str], required: bool,
                    baseline: tuple[str | None, Path, str], results_dir: Path) -> HistorySettings:
    """The history options, each given as (value, base dir, where it came from); raises UsageError."""
    from pytest_glmf.results.history.drift import MIN_WINDOW
    from pytest_glmf.results.history.store import parse_location

    value, base, where = history
    try:
        location = parse_location(value, base, results_dir)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None
    mode, _, window = (drift[0] or "warn").strip().lower().partition(":")
    if mode not in DRIFT_MODES or (window and (not window.isdigit() or int(window) < MIN_WINDOW)):
        raise pytest.UsageError(f"{drift[2]}: {drift[0]!r} is not one of {', '.join(DRIFT_MODES)}, optionally with "
                                f":K, the number of runs compared with the K before (K >= {MIN_WINDOW}), e.g. fail:6")
    baseline_runs = parse_history_baseline(baseline[0], baseline[2])
    if location is None and (baseline_runs or required):
        what = f"{baseline[2]} {baseline[0]}" if baseline_runs else "--glmf-history-required"
        raise pytest.UsageError(f"{what} needs a history store, but {where} is off")
    return HistorySettings(location, baseline_runs, mode, int(window or DEFAULT_DRIFT_WINDOW), required)


def _settings(run: "LaneRun") -> HistorySettings | None:
    hs = getattr(run.settings, "history", None)
    return hs if hs is not None and hs.location is not None else None


def check_store(run: "LaneRun") -> None:
    """--glmf-history-required: the store must open (and migrate) before anything is launched."""
    from pytest_glmf.results.history import HistoryError, open_store

    hs = _settings(run)
    if hs is None or not hs.required:
        return
    try:
        store = open_store(hs.location)  # type: ignore[arg-type]
    except HistoryError as exc:
        raise pytest.UsageError(f"--glmf-history-required: {exc}") from None
    if store is not None:
        store.close()


# ---------------------------------------------------------------------------- storing


def mark_pending(run: "LaneRun", result_file: Path | None) -> None:
    """Queue a final result file for the store (stored at this session's end, or a later one's)."""
    if result_file is None or _settings(run) is None:
        return

    marker = Path(run.settings.results_dir) / PENDING_DIR / f"{Path(result_file).stem}.json"
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(marker, json.dumps({"result_file": str(Path(result_file).resolve())}))


def _pending(results_dir: Path) -> list[tuple[Path, Path]]:
    out = []
    for marker in sorted((Path(results_dir) / PENDING_DIR).glob("*.json")):
        try:
            out.append((marker, Path(json.loads(marker.read_text())["result_file"])))
        except (OSError, ValueError, KeyError, TypeError):
            marker.unlink(missing_ok=True)   # not ours (markers are written whole): nothing to store
    return out


def store_session(run: "LaneRun") -> int | None:
    """Store every queued result file (this session's first). Returns an exit status to end with
    when the store failed and --glmf-history-required, else None; the outcome is one line in
    `run.history_note` for the terminal summary."""
    from pytest_glmf.results.history import HistoryError, open_store
    from pytest_glmf.results.history.schema import NotAResultFile

    hs = _settings(run)
    if hs is None or run.settings.lane is None:
        return None
    own = run.result_file
    queue = sorted(_pending(run.settings.results_dir), key=lambda mp: mp[1] != (Path(own).resolve() if own else None))
    if not queue:
        return None
    stored, verdict = 0, None
    try:
        with open_store(hs.location) as store:  # type: ignore[arg-type, union-attr]
            for marker, path in queue:
                try:
                    doc = json.loads(path.read_text())
                    row = store.add_run(doc, source=str(path))
                except (OSError, ValueError, NotAResultFile):
                    marker.unlink(missing_ok=True)   # deleted or not a result file: nothing to store
                    continue
                marker.unlink(missing_ok=True)
                stored += 1
                if own and path == Path(own).resolve():
                    verdict = row["verdict"]
    except HistoryError as exc:
        where = f"the results are in {own}" if own else "the result files are kept"
        run.history_note = (f"glmf: history NOT stored: {exc}; {where}, queued for the next session "
                           f"(or: glmf history import {run.settings.results_dir})")
        return int(pytest.ExitCode.TESTS_FAILED) if hs.required else None
    display = hs.location.display   # type: ignore[union-attr]
    if verdict is None:
        if stored:
            run.history_note = f"glmf: history: {stored} queued run(s) of earlier sessions stored in {display}"
        return None
    earlier = stored - 1
    run.history_note = (f"glmf: history: run {run.session_id} ({verdict}) stored in {display}"
                       + (f" (+{earlier} earlier run(s) that were queued)" if earlier else ""))
    return None


# ---------------------------------------------------------------------------- reading


def _lane_key(run: "LaneRun") -> Any:
    from pytest_glmf.results.history.schema import LaneKey

    assert run.settings.lane is not None and run.server is not None
    prov = {"engine": run.settings.lane.engine, **run.server.provenance}
    return LaneKey.from_provenance(prov, run.settings.lane.name)


def _read(run: "LaneRun", what: str, read: Any) -> Any:
    """Run `read(store)` on the store (not created if missing); a fault is noted once per process
    and gives None (with --glmf-history-required the calling test fails with it)."""
    from pytest_glmf.results.history import HistoryError, open_store

    hs = _settings(run)
    assert hs is not None and hs.location is not None
    try:
        store = open_store(hs.location, create=False)
        if store is None:
            return None
        with store:
            return read(store)
    except HistoryError as exc:
        line = f"glmf: {what} unavailable: {exc}"
        run.history_read_errors.append(line)
        if hs.required:
            pytest.fail(f"{line} (--glmf-history-required)", pytrace=False)
        return None


def baseline_doc(run: "LaneRun") -> dict[str, Any] | None:
    """The history baseline of this lane key, once per process; None before the server runs, or
    when no passing run is stored yet (the summary says so)."""
    hs = _settings(run)
    if hs is None or not hs.baseline_runs or run.server is None or run.settings.lane is None:
        return None
    if not run.history_baseline_read:
        from pytest_glmf.results.history import queries

        key = _lane_key(run)
        doc = _read(run, "history baseline", lambda store: queries.history_baseline(store, key, hs.baseline_runs))
        run.history_baseline, run.history_baseline_read = doc, True
        if doc is None and not run.history_read_errors:
            run.history_baseline_note = (f"glmf: history baseline: no passing run stored yet on {key.describe()}: "
                                         "nothing to compare against (this run starts the history)")
    return run.history_baseline


def drift_findings(run: "LaneRun", captured: list[tuple[str, str, Any]], tolerance_for: Any) -> str | None:
    """The slow-drift test of what one test recorded, against the stored complete runs of the same
    lane key: the message naming each drifted metric, or None. A warning by default
    (`warn_drift`), the test's failure with --glmf-history-drift fail (bookkeeping.judge_recorded)."""
    hs = _settings(run)
    if hs is None or hs.drift_mode == "off" or not captured or run.server is None or run.settings.lane is None:
        return None
    from pytest_glmf.results.baseline import numeric_metrics
    from pytest_glmf.results.history import drift, queries

    current = {(gate, key, m): v for gate, key, data in captured for m, v in numeric_metrics(gate, data).items()}
    if not current:
        return None
    if not run.history_series_read:
        key = _lane_key(run)
        run.history_series = _read(run, "slow-drift check",
                                   lambda store: queries.metric_series(store, key, 2 * hs.drift_window))
        run.history_series_read = True
    series = run.history_series
    if not series:
        return None
    directions = {gate: metric_directions(gate) for gate in GATES}
    found = drift.find_drifts(series, current, directions, hs.drift_window, tolerance_for, run.session_id)
    if not found:
        return None
    return drift.drift_message(found, hs.drift_window, _lane_key(run).describe())


def drift_fails(run: "LaneRun") -> bool:
    hs = _settings(run)
    return hs is not None and hs.drift_mode == "fail"


def warn_drift(message: str) -> None:
    warnings.warn(GlmfDriftWarning(message + "\n(a failure instead: --glmf-history-drift fail)"), stacklevel=2)


def prepare_compared_with(run: "LaneRun") -> None:
    """Make the history baseline in the owner too (under xdist only workers judged), so the result
    file can say which runs it was compared with. Never fails the session."""
    try:
        run.baseline_doc()
    except pytest.fail.Exception:
        pass


def compared_with(run: "LaneRun") -> dict[str, Any] | None:
    """Which baseline the session was compared with, for its result file (what is already known:
    this may run in a SIGTERM handler, where nothing may block on a store)."""
    hs = _settings(run)
    if hs is not None and hs.baseline_runs:
        doc = run.history_baseline
        return dict(doc["made_of"]) if doc else None
    if run.settings.baseline is not None and run.baseline_doc() is not None:
        return {"label": str(run.settings.baseline)}
    return None   # no baseline yet (a first --glmf-update-baseline): compared with nothing


def summary_lines(run: "LaneRun") -> list[str]:
    """What the terminal summary says about the history (after the results tables)."""
    lines = [*dict.fromkeys(run.history_read_errors)]
    return lines + [note for note in (run.history_baseline_note, run.history_note) if note is not None]
