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

The tally is kept per gate (a test's `glmf_gate` marker, else the gate fixture it uses): the
session's last lines say which gates verified something and which did not, and why (skipped, and
the first reason; passed without a check); the result file keeps the same under `verified`.
`--glmf-require GATE[,GATE]` (ini `glmf_require`) fails a session in which a named gate verified
nothing, even when others did: "drop -k to run every gate" is not "every gate was checked".
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
from pytest_glmf.text import fold

if TYPE_CHECKING:
    from pytest_glmf.config.thresholds import Thresholds
    from pytest_glmf.plugin.options import Settings
    from pytest_glmf.plugin.session import GlmfSession

OPTION = "--glmf-allow-unverified"
INI = "glmf_allow_unverified"
OPT_OUT = f"pass {OPTION} (ini: {INI} = true) if that is intended"
CHECKS_PROPERTY = "glmf_checks"        # (name, count) in the teardown report's user_properties (and JUnit)
GATE_PROPERTY = "glmf_gate"            # (name, gate) in every report's user_properties: the controller's tally
CHECKS_KEY = pytest.StashKey[int]()    # an item's checks so far (setup, call, teardown)
PLUGIN_NAME = "glmf_verification"
REQUIRE_OPTION = "--glmf-require"
REQUIRE_INI = "glmf_require"
OWN_TESTS = "own tests"               # no glmf_gate marker and no gate fixture


def addoption(group: Any, parser: pytest.Parser) -> None:
    help_text = ("Let a session pass that verified nothing (every gate skipped, or a lane with no "
                 "thresholds section); by default such a session fails")
    group.addoption(OPTION, dest=INI, action="store_true", default=None, help=help_text + f" (ini: {INI})")
    parser.addini(INI, help_text, type="bool", default=False)
    help_text = ("Fail the session when one of these gates (comma-separated, e.g. boot,curve) verified "
                 "nothing: all its tests skipped, deselected, or checked no bound")
    group.addoption(REQUIRE_OPTION, dest=REQUIRE_INI, metavar="GATE[,GATE]", default=None,
                    help=help_text + f" (ini: {REQUIRE_INI})")
    parser.addini(REQUIRE_INI, help_text, type="string", default="")


def allowed(config: pytest.Config) -> bool:
    return bool(config.getoption(INI) or config.getini(INI))


def required_gates(config: pytest.Config) -> list[str]:
    """--glmf-require (CLI > ini): the gates that must verify something; UsageError naming the
    allowed gates for an unknown one."""
    from pytest_glmf.gates.registry import GATES

    opt = config.getoption(REQUIRE_INI)
    raw, where = (opt, REQUIRE_OPTION) if opt is not None else (config.getini(REQUIRE_INI), f"ini {REQUIRE_INI}")
    names = [n.strip() for n in str(raw or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in GATES]
    if unknown or (opt is not None and not names):
        got = repr(unknown[0]) if unknown else "nothing"
        raise pytest.UsageError(f"{where}: unknown gate {got}; allowed: {', '.join(GATES)} "
                                f"(comma-separated, e.g. {where.split()[-1]}{' ' if opt is not None else ' = '}boot,curve)")
    return list(dict.fromkeys(names))


def gate_of(item: pytest.Item) -> str:
    """The gate a test verifies: its `glmf_gate` marker, else the gate fixture it uses."""
    from pytest_glmf.gates.registry import GATES

    mark = item.get_closest_marker("glmf_gate")
    if mark is not None and mark.args:
        return str(mark.args[0])
    used = set(getattr(item, "fixturenames", ()))
    if "glmf_replay" in used:
        return "agents"
    return next((g for g in GATES if f"glmf_{g}" in used), OWN_TESTS)


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
    require: list[str] = field(default_factory=list)
    checks: int = 0                 # evaluated in the whole session (every process)
    _seen: int = field(default_factory=verdict.evaluated_count)   # this process's tally, already reported
    outcomes: dict[str, int] = field(default_factory=dict)
    skip_reasons: list[str] = field(default_factory=list)
    by_gate: dict[tuple[str, str], "GateTally"] = field(default_factory=dict)   # (lane, gate)
    reason: str | None = None

    @classmethod
    def register(cls, config: pytest.Config, session: "GlmfSession") -> "Verification":
        plugin = cls(session, allowed(config), required_gates(config))
        config.pluginmanager.register(plugin, PLUGIN_NAME)
        return plugin

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """The test's evaluated checks (its fixtures' too) travel with its teardown report, once;
        a failed phase's report carries the cause class of its failed checks (failure ledger)."""

        report = yield
        report.user_properties.append((GATE_PROPERTY, gate_of(item)))
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
        props = dict(report.user_properties)
        tally = self.tally(str(props.get("glmf_test") or self.session.lane.name), str(props.get(GATE_PROPERTY, OWN_TESTS)))
        if report.when == "teardown":
            checks = sum(cast(int, v) for k, v in report.user_properties if k == CHECKS_PROPERTY)
            self.checks += checks
            tally.checks += checks
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1
            tally.outcomes[report.outcome] = tally.outcomes.get(report.outcome, 0) + 1
        if report.skipped and isinstance(report.longrepr, tuple):
            why = str(report.longrepr[2]).removeprefix("Skipped: ")
            if why not in self.skip_reasons:
                self.skip_reasons.append(why)
            if why not in tally.skip_reasons:
                tally.skip_reasons.append(why)

    def tally(self, lane: str, gate: str) -> "GateTally":
        return self.by_gate.setdefault((lane, gate), GateTally())

    def checks_of(self, lane: str) -> int:
        """The checks evaluated on this lane, by any test (a user's own included)."""
        return sum(t.checks for (name, _), t in self.by_gate.items() if name == lane)

    def gates_of(self, lane: str) -> dict[str, dict[str, Any]]:
        """The result file's `verified`: per gate its checks, test outcomes and, when it verified
        nothing, why."""
        return {gate: t.to_dict() for (name, gate), t in sorted(self.by_gate.items()) if name == lane}

    def unmet_requirements(self, lane: str) -> list[str]:
        gates = {gate: t for (name, gate), t in self.by_gate.items() if name == lane}
        return [f"{gate} ({gates[gate].why()})" if gate in gates else f"{gate} (no test of it ran: deselected or "
                f"not collected)" for gate in self.require if gate not in gates or not gates[gate].checks]

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
        unmet = [f"lane {name!r}: {', '.join(gates)}" for name in names if (gates := self.unmet_requirements(name))]
        if unbounded is not None:
            self.reason = f"glmf: {unbounded}"
        elif not self.checks:
            self.reason = nothing_verified_line(lane, self.outcomes, self.skip_reasons)
        elif unmet:
            self.reason = (f"glmf: {REQUIRE_OPTION} {','.join(self.require)}: a required gate verified nothing: "
                           + "; ".join(unmet))
        else:
            return
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)   # after the results tables: the last word before the counts
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.session.owner:
            lanes = sorted({name for name, _ in self.by_gate})
            for name in lanes:
                for line in gate_lines(name if len(lanes) > 1 or name != self.session.lane.name else None,
                                       self.gates_of(name)):
                    terminalreporter.write_line(fold(line))      # 120 columns, continued four in
        if self.reason is not None:
            terminalreporter.write_line(self.reason, red=True, bold=True)
            terminalreporter.stats.setdefault("unverified session", []).append(self.reason)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        config.pluginmanager.unregister(self)


@dataclass
class GateTally:
    """One gate's tests on one lane: checks evaluated, outcomes, distinct skip reasons."""

    checks: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    skip_reasons: list[str] = field(default_factory=list)

    def why(self) -> str:
        """Why the gate verified nothing: its outcomes and the first skip reason."""
        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.outcomes.items())) or "no test ran"
        if self.skip_reasons:
            return f"{counts}: {self.skip_reasons[0]}"
        if self.outcomes.get("passed"):
            return f"{counts}, no check evaluated"
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {"checks": self.checks, "tests": dict(sorted(self.outcomes.items())),
                "why_not": None if self.checks else self.why()}


def gate_lines(lane: str | None, gates: dict[str, dict[str, Any]]) -> list[str]:
    """The session's last lines: which gates verified something (checks, tests) and which did not,
    and why."""
    if not gates:
        return []
    on = f" on lane {lane!r}" if lane is not None else ""
    def count(n: int, what: str) -> str:
        return f"{n} {what}{'' if n == 1 else 's'}"

    def tests(outcomes: dict[str, int]) -> str:
        """'4 tests', or '2 of 4 tests' when some skipped: a skipped test verified nothing."""
        total = sum(outcomes.values())
        ran = total - outcomes.get("skipped", 0)
        return count(total, "test") if ran == total else f"{ran} of {count(total, 'test')}"

    done = [f"{g} ({count(d['checks'], 'check')} in {tests(d['tests'])})" for g, d in gates.items() if d["checks"]]
    lines = [f"glmf: verified{on}: {', '.join(done) if done else 'nothing'}"]
    lines += [f"glmf: NOT verified{on}: {g}: {d['why_not']}" for g, d in gates.items() if not d["checks"]]
    return lines


def nothing_verified_line(lane: str, outcomes: dict[str, int], skip_reasons: list[str]) -> str:
    tests = sum(outcomes.values())
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    why = f"{tests} test(s): {counts}" if tests else "no test ran"
    if skip_reasons:
        why += f"; first skip: {skip_reasons[0]}"
    elif outcomes.get("passed"):
        why += "; a check counts when made with pytest_glmf.gates.verdict (assert_checks)"
    return f"glmf: nothing was verified on lane {lane!r}: no gate check ran ({why}); {OPT_OUT}"
