"""The plugin's bookkeeping of what a session measured, as plain functions its hooks call.

  * the result file: `checkpoint` after every test (a session killed without any chance to clean
    up still leaves a readable, incomplete file), `write_results` at the end, `recover_killed`
    at the start for earlier sessions that never got to their end;
  * provenance the launcher could not know (`enrich_provenance`);
  * the failure ledger next to the results (`ledger_line`, `ledger_failure`);
  * the baseline: `judge_recorded` fails the test that measured a regression,
    `update_baseline` blesses a whole, passing run, `baseline_warning` flags a baseline from
    another setup;
  * the end-of-session tables (`write_summary`: rendering only, verdicts were given in the tests).

Heavy modules (results, baseline, report, provenance) are imported on first use so `pytest --help`
stays fast.
"""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.plugin import history, hooks
from pytest_glmf.plugin.verified import PLUGIN_NAME as VERIFICATION
from pytest_glmf.redact import Redactor
from pytest_glmf.results import ledger
from pytest_glmf.results import recorder as results
from pytest_glmf.results.cost import cost_block
from pytest_glmf.results.ledger import cause_of
from pytest_glmf.results.recorder import RUNNING, SessionRecorder
from pytest_glmf.text import clip, fold

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.launch.base import Server
    from pytest_glmf.plugin.options import Settings
    from pytest_glmf.plugin.run import LaneRun
    from pytest_glmf.plugin.session import GlmfSession


def enrich_provenance(server: "Server", lane: "LaneConfig") -> None:
    """What the launcher could not know: the engine's version, the model directory (process
    and sim lanes), the host's GPUs and the repository under test."""
    from pytest_glmf.results import provenance

    prov = server.provenance
    prov.setdefault("lane", lane.name)
    prov.setdefault("engine", lane.engine)
    prov.setdefault("launcher", lane.launcher)
    if lane.image:
        prov.setdefault("image", lane.image)
    if lane.launcher == "sim":
        prov.setdefault("time_scale", lane.time_scale)
    if lane.launcher in ("process", "sim"):
        for k, v in provenance.model_provenance(lane.model).items():
            prov.setdefault(k, v)
    version = provenance.engine_version(server.base_url)
    if version:
        prov.setdefault("engine_version", version)
    for k, v in provenance.host_provenance(Path.cwd()).items():
        prov.setdefault(k, v)


# ---------------------------------------------------------------------------- failure ledger


def ledger_line(run: "LaneRun", what: str, cause: str, cause_class: str = "configuration") -> None:
    """One line in the failure ledger next to the results (owner process only)."""

    lane = run.lane
    argv = (run.server.provenance.get("argv") if run.server is not None else None) or [*lane.extra]
    redact = Redactor.from_environment(lane.env)
    ledger.append(run.settings.results_dir, lane=lane.name, image=lane.image, what=what,
                  flags=redact.argv([str(a) for a in argv]), cause=redact.text(cause), cause_class=cause_class)


def ledger_failure(run: "LaneRun", report: pytest.TestReport) -> None:
    """A failed glmf test is one ledger line: its name and the line that names the threshold or
    regression (else the first line of the failure). A failed setup after a failed boot is not a
    new line: the boot already has one."""
    if report.failed and report.when in ("setup", "call") and not (run.boot_error and report.when == "setup"):
        lines = [ln.strip() for ln in (report.longreprtext or "").splitlines() if ln.strip()]
        cause = next((ln for ln in lines if "threshold" in ln or "regression" in ln), lines[0] if lines else "")

        ledger_line(run, report.nodeid.split("::")[-1], cause, cause_of(report.user_properties))
        # the result file names each failed test with its table (the HTML report's verdict shows them)
        run.failed_tests.append(
            {"test": report.nodeid, "when": report.when, "cause_class": cause_of(report.user_properties),
             "message": failure_text(report.longreprtext or "")})


def failure_text(longrepr: str, limit: int = 6000) -> str:
    """What a failure says, without the traceback: pytest's `E   ` lines (a helper's table and
    the knob to turn), else the report's last lines."""
    said = [ln[4:] if ln.startswith("E   ") else ln[1:].lstrip() for ln in longrepr.splitlines()
            if ln.startswith("E ") or ln == "E"]
    text = "\n".join(said).strip() or "\n".join(longrepr.strip().splitlines()[-30:])
    return clip(text, limit)


# ---------------------------------------------------------------------------- result file


def _provenance(run: "LaneRun") -> dict[str, Any]:
    return dict(run.server.provenance) if run.server is not None else {}


def checkpoint(run: "LaneRun") -> None:
    """Rewrite the result file with what is recorded so far, marked as not finished: a session
    killed without any chance to clean up still leaves a readable, incomplete file."""

    recorder = SessionRecorder(run.settings.results_dir, run.session_id, run.lane.name)
    recorder.write(lane=run.lane.to_dict(), provenance=_provenance(run),
                   extra={"incomplete": [RUNNING, *run.incomplete]}, final=False)


def write_results(state: "GlmfSession", reasons: Sequence[str] = (), exitstatus: int | None = None) -> None:
    """The session's result file: everything recorded so far, with `incomplete` listing why
    the session did not run to its end (empty when it did), pytest's exit status, and which
    baseline it was compared with; then queued for the history store."""

    run = state.run
    if run.result_file is not None:
        return
    if run.boot_error is not None:
        reasons = [f"the server did not boot: {run.boot_error.splitlines()[0]}", *reasons]
    run.note_if_exited()
    incomplete = list(dict.fromkeys([*run.incomplete, *reasons]))
    recorder = SessionRecorder(run.settings.results_dir, run.session_id, run.lane.name)
    extra: dict[str, Any] = {"incomplete": incomplete, "exitstatus": exitstatus,
                             "failed_tests": list(run.failed_tests)}
    verification = state.config.pluginmanager.get_plugin(VERIFICATION) if state.config is not None else None
    if verification is not None:   # which gates verified something, and why the others did not
        extra["verified"] = verification.gates_of(run.lane.name)
    compared = history.compared_with(run)
    if compared is not None:
        extra["compared_with"] = compared
    # a user's own test that called a gate helper (assert_boot, ...) verified something even when
    # no gate fixture recorded numbers: its session has results (and may be blessed)
    checked = verification is not None and verification.checks_of(run.lane.name) > 0
    extra["cost"] = cost_block(run.lane, _provenance(run), run.gate_wall_s, run.server_started, run.server_ready,
                               time.time())
    update = hooks.result_updater(state.config, run.lane, state.hook_errors.append) if state.config is not None else None
    out = recorder.write(lane=run.lane.to_dict(), provenance=_provenance(run), extra=extra, keep=checked,
                         update=update)
    if out is not None:
        run.result_file = out
        history.mark_pending(run, out)


def recover_killed(state: "GlmfSession") -> None:
    """Finish the result files of earlier sessions that were killed (one ledger line each), then
    claim the results directory for this session so a later one can tell if this one dies."""

    for sid, lane, out in results.recover_killed_sessions(state.settings.results_dir):
        ledger.append(state.settings.results_dir, lane=lane.get("name", "?"), image=lane.get("image"),
                      what="killed", flags=[*(lane.get("extra") or [])], cause_class="interrupted",
                      cause=f"session {sid} was killed before it ended; partial results: {out}")
        state.recovered.append(str(out))
        history.mark_pending(state.run, out)


def claim_results(run: "LaneRun") -> None:
    """Claim the results directory for this session (its lane, with several lanes) so a later
    session can tell if this one dies."""

    results.mark_owner(run.settings.results_dir, run.session_id, run.lane.to_dict())


def finish_session(state: "GlmfSession", exitstatus: int) -> int | None:
    """The owner's last word: the result file, the baseline when --glmf-update-baseline, the run
    into the history store. Returns the exit status to end with when that differs (a store fault
    under --glmf-history-required), else None."""

    reasons = []
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        reasons.append("the session was interrupted (Ctrl-C / SIGINT, or -x / --maxfail)")
    run = state.run
    history.prepare_compared_with(run)
    write_results(state, reasons, int(exitstatus))
    if state.hook_errors and exitstatus == pytest.ExitCode.OK:   # short of a plugin's fields: not a baseline
        exitstatus = pytest.ExitCode.TESTS_FAILED
    if run.settings.html and run.result_file:
        try:
            write_html(state)
        except Exception as exc:  # noqa: BLE001 - a page that cannot be rendered must not cost the session its results
            run.html_error = f"glmf: the HTML report was NOT written: {type(exc).__name__}: {exc}"
    blessed = update_baseline(run, exitstatus) if run.settings.update_baseline else True
    status = history.store_session(run)
    if exitstatus != pytest.ExitCode.OK:
        return None
    if not blessed:   # asked to bless and nothing was: CI must not read that as done
        return pytest.ExitCode.TESTS_FAILED
    return status


def write_html(state: "GlmfSession") -> None:
    """--glmf-html: the result file as one page, <results>/<lane>-latest.html, with the lane's
    bounds, its baseline and this session's ledger lines (results/html.py)."""
    from pytest_glmf.results.html import lane_bounds, session_ledger, session_report
    from pytest_glmf.results.html_blocks import write_page

    run = state.run
    assert run.result_file is not None
    doc = json.loads(Path(run.result_file).read_text())
    page = session_report(doc, baseline=run.baseline_doc(), bounds=lane_bounds(state.thresholds, run.lane.name),
                          ledger_lines=session_ledger(doc, run.settings.results_dir))
    run.html_file = write_page(page, run.settings.results_dir / f"{run.lane.name}-latest.html")


# ---------------------------------------------------------------------------- baseline


def judge_recorded(item: pytest.Item, state: "GlmfSession") -> None:
    """What the test recorded goes into JUnit XML (record_property; xdist carries it to the
    controller) and, with --glmf-baseline, is compared with the baseline: a regression fails
    the test that measured it, with the table metric | baseline | now | change | allowed. With a
    history store, the slow-drift test runs on the same numbers (plugin/history.py): a warning,
    or with --glmf-history-drift fail a failure of this test."""
    __tracebackhide__ = True
    from pytest_glmf.results import baseline

    run = state.run
    recorder = run.recorder
    captured = (recorder.capture or []) if recorder is not None else []
    if recorder is not None:
        recorder.capture = None
    for gate, key, data in captured:
        for metric, value in baseline.numeric_metrics(gate, data).items():
            item.user_properties.append((f"glmf.{gate}.{key}.{metric}", value))
    if not captured:
        return

    lane_name, thresholds = run.lane.name, state.thresholds

    def tolerance_for(gate: str) -> Any:
        return thresholds.for_gate(lane_name, gate).get("baseline") if thresholds is not None else None

    doc = run.baseline_doc()
    failures: list[str | None] = []
    if doc is not None:
        label = baseline.baseline_label(doc, run.settings.baseline)
        failures.append(baseline.regression_message(baseline.compare_records(captured, doc, tolerance_for), label))
    drift = history.drift_findings(run, captured, tolerance_for)
    if drift and history.drift_fails(run):
        failures.append(drift + "\n(--glmf-history-drift fail; a warning only: --glmf-history-drift warn)")
    elif drift:
        history.warn_drift(drift)
    messages = [f for f in failures if f]
    if messages:
        pytest.fail("\n\n".join(messages), pytrace=False)


def update_baseline(run: "LaneRun", exitstatus: int) -> bool:
    """--glmf-update-baseline: bless this run, only when it is whole and every test passed, into
    the baseline path (its folders made). Whether it was blessed; the note says so either way."""

    out = run.result_file
    target = Path(run.settings.baseline or run.settings.results_dir / f"{run.lane.name}-baseline.json")
    if exitstatus != pytest.ExitCode.OK or out is None:
        why = ("the session recorded no results (no gate measured or checked anything), so there is nothing "
               "to bless" if out is None else f"the session did not pass (exit {int(exitstatus)})")
        run.baseline_note = f"glmf: baseline NOT updated: {why}; {target} unchanged"
        return False
    compared = run.baseline_doc() is not None   # looked for before the copy: the new file is not a comparison
    first = not target.exists()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, target)
    except OSError as exc:
        run.baseline_note = f"glmf: baseline NOT updated: cannot write {target}: {exc.strerror or exc}"
        return False
    if compared:
        run.baseline_note = f"glmf: baseline updated: {target} (from {out})"
    elif first:
        run.baseline_note = (f"glmf: first baseline blessed: {target} (from {out}); this run was compared with "
                             "nothing (no baseline existed)")
    else:
        run.baseline_note = (f"glmf: baseline replaced: {target} (from {out}); this run was compared with nothing "
                             "(no --glmf-baseline)")
    return True


def baseline_warning(settings: "Settings", doc: dict[str, Any]) -> str | None:
    """A header line when the baseline was measured on another setup (GPU, engine, launcher,
    time scale): its differences may not be regressions."""
    from pytest_glmf.results.baseline import machine_differences
    from pytest_glmf.results.provenance import gpu_info

    lane = settings.lane
    assert lane is not None
    now = {"lane": lane.name, "engine": lane.engine, "launcher": lane.launcher, **gpu_info()}
    if lane.launcher == "sim":
        now["time_scale"] = lane.time_scale
    diffs = machine_differences({"provenance": now}, doc)
    if not diffs:
        return None
    return ("glmf: WARNING: the baseline comes from a different setup, changes may not be regressions: "
            + "; ".join(diffs))


# ---------------------------------------------------------------------------- end of session


def write_summary(terminalreporter: Any, state: "GlmfSession") -> None:
    """The recipe-style tables of everything measured (rendering only: verdicts were given in
    the tests), then where the files are."""
    run = state.run
    for path in state.recovered:
        terminalreporter.write_line(f"glmf: an earlier session was killed; its partial results: {path}")
    if run.server is not None and run.lane.launcher == "attach":
        from pytest_glmf.launch.attach import missing_boot_log

        if (missing := missing_boot_log(run.server)) is not None:
            terminalreporter.write_line(fold(f"glmf: {missing}"), yellow=True)

    out = run.result_file
    if out is None:
        if run.baseline_note is not None:
            terminalreporter.write_line(run.baseline_note, red=True)
        for line in history.summary_lines(run):
            terminalreporter.write_line(line)
        return
    from pytest_glmf.results import report

    try:
        doc = json.loads(Path(out).read_text())
        text = report.terminal_report(doc, run.baseline_doc())
    except (OSError, ValueError) as exc:
        text = f"(cannot render {out}: {exc})"
    terminalreporter.write_sep("=", "glmf results")
    terminalreporter.write_line(text)
    terminalreporter.write_line(f"glmf: results written to {out}")
    terminalreporter.write_line(f"  render: glmf report {out} --markdown R.md --plot R.png")
    if run.html_file is not None:
        terminalreporter.write_line(f"glmf: the report as one HTML page: {run.html_file}")
    if run.html_error is not None:
        terminalreporter.write_line(run.html_error)
    if run.baseline_note is not None:
        terminalreporter.write_line(run.baseline_note)
    for line in history.summary_lines(run):
        terminalreporter.write_line(line)


# ---------------------------------------------------------------------------- several lanes


def write_comparison(state: "GlmfSession") -> None:
    """Several lanes: the comparison of the lanes' result files, as Markdown beside them
    (`<results>/compare-<id>.md`) and as text for the terminal summary."""
    from pytest_glmf.compare.report import comparison_markdown, comparison_report

    files = [f.result_file for f in state.finished_lanes if f.result_file is not None]
    docs = []
    for path in files:
        try:
            docs.append(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            state.comparison_error = f"glmf: cannot read {path} for the comparison: {exc}"
    if len(docs) < 2:
        return
    out = state.run.settings.results_dir / f"compare-{state.base_session_id}.md"
    out.write_text(comparison_markdown(docs))
    if state.run.settings.html:
        from pytest_glmf.results.html_blocks import write_page
        from pytest_glmf.results.html_pages import comparison_page

        try:
            state.comparison_html = write_page(comparison_page(docs), out.with_suffix(".html"))
        except Exception as exc:  # noqa: BLE001 - as write_html: the session's results come first
            state.comparison_error = f"glmf: the comparison's HTML page was NOT written: {exc}"
    state.comparison = (comparison_report(docs), out, files)


def write_comparison_summary(terminalreporter: Any, state: "GlmfSession") -> None:
    """Several lanes: per lane where its result file is (and its notes), then the comparison."""
    for path in state.recovered:
        terminalreporter.write_line(f"glmf: an earlier session was killed; its partial results: {path}")
    terminalreporter.write_sep("=", "glmf results by lane")
    for f in state.finished_lanes:
        where = f.result_file or "no results recorded"
        terminalreporter.write_line(f"glmf: lane {f.lane.name}: {where} (exit {f.exitstatus})")
        for note in (f.baseline_note, f.history_note, f.history_baseline_note):
            if note is not None:
                terminalreporter.write_line("  " + note)
        if f.html_file is not None:
            terminalreporter.write_line(f"  the report as one HTML page: {f.html_file}")
        if f.html_error is not None:
            terminalreporter.write_line("  " + f.html_error)
    if state.comparison_error is not None:
        terminalreporter.write_line(state.comparison_error)
    if state.comparison is not None:
        text, out, files = state.comparison
        terminalreporter.write_sep("=", "glmf comparison")
        terminalreporter.write_line(text)
        terminalreporter.write_line(f"glmf: comparison written to {out} (again: glmf compare {' '.join(map(str, files))})")
        if state.comparison_html is not None:
            terminalreporter.write_line(f"glmf: the comparison as one HTML page: {state.comparison_html}")
