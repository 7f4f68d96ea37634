"""Nothing green unless something was verified.

A gate that skips is honest about itself, but a session in which every gate skipped (an attach
run with `-k boot` and no boot log) or whose lane has no thresholds at all must not come back
green: CI would read "passed" where nothing was checked. Three rules, each one line for the user:

  * a session whose lane has no section in the thresholds file fails at its end (`no_section`):
    its gates had no bounds of the user's (a misspelt lane name there, a new lane not written
    down yet); the header says so at the start. What was measured is still recorded and shown;
  * a session that evaluated no check fails at its end (`Verification`). "A check" is a real
    signal, not a guess from outcomes: the assertion helpers of gates/verdict.py count every
    check they evaluate, the plugin sends each test's count with its teardown report (so xdist
    workers' checks reach the controller, and JUnit shows `glmf_checks`), and the session adds
    them up;
  * a `glmf_lanes` marker naming a lane no lanes file defines is a usage error
    (`check_marker_lanes`): a typo there silently skipped the test.

`--glmf-allow-unverified` (ini `glmf_allow_unverified`) lifts the first two, for a user who
means it (a first run of a new lane, an exploratory attach).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_glmf.config.lanes import builtin_lanes, load_lanes
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates import verdict
from pytest_glmf.results.ledger import CAUSE_PROPERTY

if TYPE_CHECKING:
    from pytest_glmf.config.thresholds import Thresholds
    from pytest_glmf.plugin.options import Settings
    from pytest_glmf.plugin.session import GlmfSession

OPTION = "--glmf-allow-unverified"
INI = "glmf_allow_unverified"
OPT_OUT = f"pass {OPTION} (ini: {INI} = true) if that is intended"
CHECKS_PROPERTY = "glmf_checks"        # (name, count) in the teardown report's user_properties (and JUnit)
CHECKS_KEY = pytest.StashKey[int]()    # an item's checks so far (setup, call, teardown)
PLUGIN_NAME = "glmf_verification"


def addoption(group: Any, parser: pytest.Parser) -> None:
    help_text = ("Let a session pass that verified nothing (every gate skipped, or a lane with no "
                 "thresholds section); by default such a session fails")
    group.addoption(OPTION, dest=INI, action="store_true", default=None, help=help_text + f" (ini: {INI})")
    parser.addini(INI, help_text, type="bool", default=False)


def allowed(config: pytest.Config) -> bool:
    return bool(config.getoption(INI) or config.getini(INI))


# ---------------------------------------------------------------------------- the lane and its thresholds


def no_section(lane: str, thresholds: "Thresholds", thresholds_file: Any) -> str | None:
    """Why a lane is not gated by the thresholds file (`thresholds_file` None: the built-in one),
    None when it has a section (an empty one counts: the user wrote it down)."""
    if thresholds.has_lane(lane):
        return None
    where = str(thresholds_file) if thresholds_file else "the built-in thresholds.yaml"
    sections = ", ".join(sorted(thresholds.lanes)) or "none"
    return (f"{where} has no section for lane {lane!r} (sections: {sections}): its gates have no bounds; "
            f"add lanes.{lane} to the thresholds file (--glmf-thresholds FILE), or {OPT_OUT}")


def refuse_ungated_lane(lane: str, thresholds: "Thresholds", thresholds_file: Any) -> None:
    """`glmf lanes --lane NAME --thresholds FILE`: the session's no-section line, as an error."""
    why = no_section(lane, thresholds, thresholds_file)
    if why is not None:
        raise ConfigError(why)


def known_lanes(settings: "Settings") -> list[str]:
    """Lanes a `glmf_lanes` marker may name: the lanes file's, the built-in ones, the selected one."""

    names = list(builtin_lanes())
    if settings.lanes_file is not None:
        names += load_lanes(settings.lanes_file)   # validated already when the options were resolved
    if settings.lane is not None:
        names.append(settings.lane.name)           # e.g. "attach" for --glmf-url without a lane
    return sorted(set(names))


def check_marker_lanes(nodeid: str, names: Iterable[str], known: list[str]) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise pytest.UsageError(f"{nodeid}: glmf_lanes names unknown lane {unknown[0]!r}; known lanes: "
                                f"{', '.join(known)}")


# ---------------------------------------------------------------------------- at the end


@dataclass(eq=False)   # identity semantics: registered with the plugin manager
class Verification:
    """Counts the checks each test evaluated and fails a session that evaluated none, or whose
    lane has no thresholds section (registered beside the session object, only with a lane)."""

    session: "GlmfSession"
    allow: bool
    checks: int = 0                 # evaluated in the whole session (every process)
    _seen: int = field(default_factory=verdict.evaluated_count)   # this process's tally, already reported
    outcomes: dict[str, int] = field(default_factory=dict)
    skip_reasons: list[str] = field(default_factory=list)
    reason: str | None = None

    @classmethod
    def register(cls, config: pytest.Config, session: "GlmfSession") -> "Verification":
        plugin = cls(session, allowed(config))
        config.pluginmanager.register(plugin, PLUGIN_NAME)
        return plugin

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """The test's evaluated checks (its fixtures' too) travel with its teardown report, once;
        a failed phase's report carries the cause class of its failed checks (failure ledger)."""

        report = yield
        now = verdict.evaluated_count()
        item.stash[CHECKS_KEY] = item.stash.get(CHECKS_KEY, 0) + now - self._seen
        self._seen = now
        if report.when == "teardown" and item.stash[CHECKS_KEY]:
            item.user_properties.append((CHECKS_PROPERTY, item.stash[CHECKS_KEY]))
            report.user_properties.append((CHECKS_PROPERTY, item.stash[CHECKS_KEY]))
        cause = verdict.take_failure_cause()
        if cause is not None and report.failed:
            report.user_properties.append((CAUSE_PROPERTY, cause))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.checks += sum(cast(int, v) for k, v in report.user_properties if k == CHECKS_PROPERTY)
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1
        if report.skipped and isinstance(report.longrepr, tuple):
            why = str(report.longrepr[2]).removeprefix("Skipped: ")
            if why not in self.skip_reasons:
                self.skip_reasons.append(why)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Before the session object's own finish (trylast), which reads `session.exitstatus`:
        a session that verified nothing is not blessed as a baseline."""
        opt = session.config.option
        if not self.session.owner or self.allow or exitstatus != pytest.ExitCode.OK \
                or opt.collectonly or getattr(opt, "setuponly", False) or getattr(opt, "setupplan", False):
            return    # (nothing was meant to run)
        lane, thresholds = self.session.lane.name, self.session.thresholds
        names = [x.name for x in self.session.settings.lanes] or [lane]   # several lanes: each must be gated
        unbounded = next((why for name in names if thresholds is not None
                          and (why := no_section(name, thresholds, self.session.settings.thresholds_file))), None)
        if unbounded is not None:
            self.reason = f"glmf: {unbounded}"
        elif not self.checks:
            self.reason = nothing_verified_line(lane, self.outcomes, self.skip_reasons)
        else:
            return
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)   # after the results tables: the last word before the counts
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.reason is not None:
            terminalreporter.write_line(self.reason, red=True, bold=True)
            terminalreporter.stats.setdefault("unverified session", []).append(self.reason)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        config.pluginmanager.unregister(self)


def nothing_verified_line(lane: str, outcomes: dict[str, int], skip_reasons: list[str]) -> str:
    tests = sum(outcomes.values())
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    why = f"{tests} test(s): {counts}" if tests else "no test ran"
    if skip_reasons:
        why += f"; first skip: {skip_reasons[0]}"
    elif outcomes.get("passed"):
        why += "; a check counts when made with pytest_glmf.gates.verdict (assert_checks)"
    return f"glmf: nothing was verified on lane {lane!r}: no gate check ran ({why}); {OPT_OUT}"
