"""The gates, by name. The thresholds loader, the verdict helpers, the baseline comparison, the
`glmf_gate` marker, the `glmf` command (each gate's subcommand) and the reports (each gate's
columns and place) ask this registry; a new gate joins by adding its `spec.SPEC` here: what it
declares there (`GateSpec.command`, `report_columns`, `report_rank`, and its report hooks,
`GateSpec.report`) does the rest."""
from __future__ import annotations

from pytest_glmf.gates.acceptance.spec import SPEC as ACCEPTANCE
from pytest_glmf.gates.agents.spec import SPEC as AGENTS
from pytest_glmf.gates.boot.spec import SPEC as BOOT
from pytest_glmf.gates.capacity.spec import SPEC as CAPACITY
from pytest_glmf.gates.curve.spec import SPEC as CURVE
from pytest_glmf.gates.drift.spec import SPEC as DRIFT
from pytest_glmf.gates.spec import NO_REPORT, GateCommand, GateReport, GateSpec
from pytest_glmf.gates.template.spec import SPEC as TEMPLATE
from pytest_glmf.gates.tools.spec import SPEC as TOOLS

GATES: dict[str, GateSpec] = {spec.name: spec for spec in (BOOT, CURVE, DRIFT, ACCEPTANCE, TOOLS, CAPACITY,
                                                             TEMPLATE, AGENTS)}


def gate_spec(name: str) -> GateSpec:
    """The declaration of gate `name`; KeyError naming the known gates."""
    try:
        return GATES[name]
    except KeyError:
        raise KeyError(f"unknown gate {name!r}; known gates: {', '.join(GATES)}") from None


def metric_directions(name: str) -> dict[str, str]:
    """metric -> "higher" | "lower" (which way is better) for gate `name`; {} for an unknown gate."""
    spec = GATES.get(name)
    return spec.directions() if spec is not None else {}


def metric_label(gate: str, metric: str) -> str:
    """A metric as tables and plots name it, with its unit ("TTFT p95 (s)"), from the gate's
    declaration; the key itself for a metric no gate declares."""
    spec = GATES.get(gate)
    declared = spec.metrics.get(metric) if spec is not None else None
    return declared.axis_label() if declared is not None else metric


def report_hooks(name: str) -> GateReport:
    """What gate `name` adds to the reports (`GateSpec.report`); nothing for a gate no spec declares."""
    spec = GATES.get(name)
    return spec.report_hooks() if spec is not None else NO_REPORT


def gate_title(name: str) -> str:
    """The gate's title in every report (`GateSpec.title`); the name itself for a gate no spec declares."""
    spec = GATES.get(name)
    return spec.title if spec is not None else name


def report_order() -> tuple[str, ...]:
    """The gates in the order a report shows them (`GateSpec.report_rank`; ties: the registry's order)."""
    return tuple(sorted(GATES, key=lambda name: GATES[name].report_rank))


def gate_commands() -> dict[str, tuple[GateCommand, str]]:
    """Each gate's `glmf` subcommand -> (its declaration, the module with `cli(argv) -> int`),
    in `glmf --help`'s order (`GateCommand.rank`)."""
    declared = [(spec.command, spec.cli_module) for spec in GATES.values() if spec.command is not None]
    return {command.name: (command, module) for command, module in sorted(declared, key=lambda d: d[0].rank)}
