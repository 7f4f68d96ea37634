"""What a gate declares next to its code, and how a thresholds-file section is checked against it.

Each gate (`gates/<gate>/spec.py`) declares a `GateSpec`:
  * its metrics: the direction that is better, the unit, and the range a measurement can take
    (a fraction lies in [0, 1], a latency or a count is never negative);
  * its settings: a frozen dataclass whose field defaults are the gate's only defaults (the
    suite, the CLI and the measurement code read them from there);
  * the other keys its section may hold (`rows`, `classes`, ...), each with a validator;
  * what the central places loop over: its `glmf` command, its report columns and place, and the
    module of its folder whose `GateReport` says what it adds to the reports (`report`).

`config/thresholds.py` asks the registry (`gates/registry.py`) for the specs and checks every
section with `GateSpec.check_section` when the file is read, so a typo, a wrong type, `min > max`
or a bound no measurement can meet fails before any server boots, naming file, lane, gate and key
(`glmf thresholds FILE` runs the same code and prints the same line). This module imports
nothing heavy: the plugin loads it for every pytest run.
"""
from __future__ import annotations

import dataclasses
import importlib
import math
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pytest_glmf.config.yamlfile import ConfigError, allowed

# What a unit means to a reader, for the error that names an impossible bound.
UNIT_TEXT = {
    "fraction": "a fraction",
    "s": "a time in seconds",
    "tok/s": "tokens per second",
    "req/s": "requests per second",
    "%": "a percentage",
    "count": "a count",
    "tokens": "a number of tokens",
    "GiB": "a size in GiB",
    "nats": "a log-probability difference in nats",
    "ratio": "a ratio",
    "tokens/step": "tokens per verify step",
}


@dataclass(frozen=True)
class Metric:
    """One number a gate measures and a thresholds file may bound with {min: X} and/or {max: X}."""

    name: str
    direction: Literal["higher", "lower"]   # which way is better (baseline comparisons, hints)
    unit: str                               # a key of UNIT_TEXT
    lo: float | None = 0.0                  # the range any measurement lies in (None: unbounded)
    hi: float | None = None
    doc: str = ""
    label: str = ""                         # what a reader calls it ("TTFT p95"); default: the name
    column: str = ""                        # its short table header ("TTFT p95 s"); default: axis_label()

    def axis_label(self) -> str:
        """The metric as a table header or plot axis names it, with its unit: "TTFT p95 (s)"."""
        name = self.label or self.name.replace("_", " ")
        return f"{name} ({self.unit})" if self.unit and self.unit not in ("count", "ratio") else name

    def column_label(self) -> str:
        """The metric as a gate's own table heads its column."""
        return self.column or self.axis_label()

    def describe(self) -> str:
        what = UNIT_TEXT.get(self.unit, self.unit)
        if self.lo is not None and self.hi is not None:
            return f"{what} in [{num_text(self.lo)}, {num_text(self.hi)}]"
        if self.lo is not None:
            return f"{what}, >= {num_text(self.lo)}"
        if self.hi is not None:
            return f"{what}, <= {num_text(self.hi)}"
        return what


def num_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ---------------------------------------------------------------------------- bounds


def check_bound(where: str, metric: Metric, bound: Any) -> None:
    """A bound is {min: X} and/or {max: X}, numbers, min <= max, inside what the metric can measure."""
    name = metric.name
    if not isinstance(bound, dict) or not bound or set(bound) - {"min", "max"}:
        raise ConfigError(f"{where}: {name}: a bound is {{min: X}} and/or {{max: X}}, got {bound!r}")
    for k, x in bound.items():
        if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):
            raise ConfigError(f"{where}: {name}: {k} must be a number, got {x!r}")
    lo, hi = bound.get("min"), bound.get("max")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"{where}: {name}: min {num_text(lo)} > max {num_text(hi)}: no measurement can meet both")
    for k, x in bound.items():
        below = metric.lo is not None and x < metric.lo
        above = metric.hi is not None and x > metric.hi
        if not (below or above):
            continue
        # a min above the range (or a max below it) can never be met; the other side gates nothing
        never = (k == "min" and above) or (k == "max" and below)
        consequence = "can never be met" if never else "gates nothing"
        raise ConfigError(f"{where}: {name}: {k} {num_text(x)} {consequence}: {name} is {metric.describe()}")


# ---------------------------------------------------------------------------- settings


def setting(default: Any = dataclasses.MISSING, *, min: float | None = None, max: float | None = None,
            above: float | None = None, doc: str = "") -> Any:
    """A settings field: its default (none given: the key is required), the range a value must lie in (`above`: strictly greater),
    and one line for users. Used inside the gates' settings dataclasses."""
    return field(default=default, metadata={"min": min, "max": max, "above": above, "doc": doc})


def unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _range_text(meta: Mapping[str, Any]) -> str:
    parts = []
    if meta.get("above") is not None:
        parts.append(f"> {num_text(meta['above'])}")
    if meta.get("min") is not None:
        parts.append(f">= {num_text(meta['min'])}")
    if meta.get("max") is not None:
        parts.append(f"<= {num_text(meta['max'])}")
    return " and ".join(parts)


def describe_type(tp: Any, meta: Mapping[str, Any] | None = None) -> str:
    """What a settings value must be, in the words of an error message."""
    tp, _ = unwrap_optional(tp)
    rng = _range_text(meta or {})
    rng = f" {rng}" if rng else ""
    if tp is bool:
        return "true or false"
    if tp is int:
        return f"an integer{rng}"
    if tp is float:
        return f"a number{rng}"
    if tp is str:
        return "a non-empty string"
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        inner = typing.get_args(tp)[0]
        return "a list of strings" if inner is str else f"a list, each {describe_type(inner)}"
    if dataclasses.is_dataclass(tp):
        return "a mapping with keys " + ", ".join(f.name for f in dataclasses.fields(tp))
    return str(tp)


def _convert(where: str, value: Any, tp: Any, meta: Mapping[str, Any]) -> Any:
    """`value` as `tp` (ints are numbers too), or ConfigError naming what is expected."""
    tp, optional = unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{where}: expected {describe_type(tp, meta)}, got null")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected {describe_type(tp)}, got {value!r}")
        return build_settings(cast(type, tp), value, where)
    ok, raw = True, value
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
        value = float(value) if ok else value
    elif tp is str:
        ok = isinstance(value, str) and bool(value.strip())
    elif typing.get_origin(tp) is Literal:
        ok = value in typing.get_args(tp)
    elif typing.get_origin(tp) is list:
        inner = typing.get_args(tp)[0]
        if not isinstance(value, list):
            ok = False
        else:
            value = [_convert(f"{where}[{i}]", x, inner, {}) for i, x in enumerate(value)]
    if ok and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi, above = meta.get("min"), meta.get("max"), meta.get("above")
        ok = (lo is None or value >= lo) and (hi is None or value <= hi) and (above is None or value > above)
    if not ok:
        raise ConfigError(f"{where}: expected {describe_type(tp, meta)}, got {raw!r}")
    return value


def build_settings(cls: type, data: Mapping[str, Any] | None, where: str) -> Any:
    """An instance of the settings dataclass `cls` from a thresholds-file mapping: unknown keys,
    wrong types and values out of range are a ConfigError naming `where` and the key."""
    data = dict(data or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: {allowed(fields) or '(none)'}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in data.items():
        kwargs[key] = _convert(f"{where}.{key}", value, hints[key], fields[key].metadata)
    missing = [n for n, f in fields.items() if n not in kwargs and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where}: {missing[0]} is required ({describe_type(hints[missing[0]])})")
    return cls(**kwargs)


def as_file_value(value: Any) -> Any:
    """A Python caller's setting as a thresholds file would write it: a path as its text, a
    settings object (capacity's `frontier=FrontierSettings(...)`) as its mapping, a tuple as a list."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def settings_keys(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


# ---------------------------------------------------------------------------- baseline tolerances


@dataclass(frozen=True)
class MetricTolerance:
    rel_pct: float | None = setting(None, min=0, doc="allowed change in percent of the baseline")
    abs: float | None = setting(None, min=0, doc="allowed change in the metric's units")


def check_baseline(where: str, spec: "GateSpec", value: Any) -> None:
    """`baseline: {rel_pct: 5, abs: 0, metrics: {METRIC: {rel_pct, abs}}}` (results/baseline.py reads it)."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be a mapping like {{rel_pct: 5, metrics: {{METRIC: {{rel_pct: 10}}}}}}")
    for key in value:
        if key not in ("rel_pct", "abs", "metrics"):
            raise ConfigError(f"{where}: unknown key {key!r}; allowed: abs, metrics, rel_pct")
    build_settings(MetricTolerance, {k: v for k, v in value.items() if k != "metrics"}, where)
    per = value.get("metrics")
    if per is None:
        return
    if not isinstance(per, Mapping):
        raise ConfigError(f"{where}.metrics: must be a mapping of metric -> {{rel_pct: X, abs: Y}}")
    for metric, tol in per.items():
        if metric not in spec.metrics:
            raise ConfigError(f"{where}.metrics: unknown metric {metric!r}; allowed: {allowed(spec.metrics)}")
        if not isinstance(tol, Mapping):
            raise ConfigError(f"{where}.metrics.{metric}: must be a mapping like {{rel_pct: 10, abs: 0.05}}")
        build_settings(MetricTolerance, tol, f"{where}.metrics.{metric}")


# ---------------------------------------------------------------------------- the gate


SectionCheck = Callable[["GateSpec", str, Any], None]

# The group of `glmf --help` that lists the gates' commands (pytest_glmf/cli.py names the others).
MEASURE_GROUP = "measure a server (--url URL, or a lane)"


@dataclass(frozen=True)
class GateCommand:
    """The `glmf` subcommand a gate declares: its name, the one line `glmf --help` shows, the help
    group it is listed in and its place there (`rank`, ascending). The command runs `cli(argv)` of
    the gate's own `cli` module (`GateSpec.cli_module`)."""

    name: str
    help: str
    rank: int
    group: str = MEASURE_GROUP


Entries = Mapping[str, Any]                  # a gate's entries in a result document: key -> entry
Comps = Mapping[tuple[str, str, str], tuple[str, str]]   # (gate, key, metric) -> (css class, change text)
Table = tuple[list[str], list[list[str]]]    # header, rows


@dataclass(frozen=True)
class CompareTable:
    """A gate's table in a comparison of lanes (`glmf compare`, the multi-lane session's, the HTML
    page's): its title, its place among the gates' tables there (`rank`, ascending) and
    `table(lanes) -> (header, rows)`, `lanes` the (lane name, result document) of each lane."""

    title: str
    rank: int
    table: Callable[[Sequence[tuple[str, Mapping[str, Any]]]], Table]


@dataclass(frozen=True)
class GateReport:
    """What a gate adds to the reports beyond its table of entries, each None where it adds nothing.
    Declared in the gate's own folder (`GateSpec.report` names the module holding its `REPORT`) and
    loaded when a report is written, so the specs stay light; the central reports loop over the
    registry and call what is declared here (results/report.py, results/columns.py,
    results/html_gates.py, results/gatejson.py, compare/report.py).

      derive    (entries) -> (entries with derived columns, those columns): shown after the first column
      notes     (entries) -> lines under its table (terminal, Markdown, HTML)
      recorded  (entries) -> what its command printed, from the entries ('' for nothing; the terminal report)
      bound     (section, key, entry, metric) -> the thresholds bound on an entry's metric, where the
                gate's section keys its bounds otherwise than by metric (curve rows, acceptance classes)
      html_body (entries, bounds, comps) -> the HTML section's body in place of the table, or None
      charts    (entries, bounds) -> the HTML section's charts (SVG)
      compare   its table in a comparison of lanes
      legacy    (data) -> its entries from what an older version's `glmf <command> --json` wrote, or
                None when `data` is not that (results/gatejson.py)
    """

    derive: Callable[[Entries], tuple[dict[str, Any], tuple[str, ...]]] | None = None
    notes: Callable[[Entries], list[str]] | None = None
    recorded: Callable[[Entries], str] | None = None
    bound: Callable[[Mapping[str, Any], str, Mapping[str, Any], str], Any] | None = None
    html_body: Callable[[Entries, Mapping[str, Any], Comps], str | None] | None = None
    charts: Callable[[Entries, Mapping[str, Any]], list[str]] | None = None
    compare: CompareTable | None = None
    legacy: Callable[[Mapping[str, Any]], dict[str, Any] | None] | None = None


NO_REPORT = GateReport()


@dataclass(frozen=True)
class GateSpec:
    """A gate's declaration: metrics, settings dataclass, and the other keys of its section; and
    the words every report uses for it (`title`, `definitions`: what its numbers mean, one
    sentence each), so the terminal, Markdown and HTML reports say the same thing."""

    name: str
    metrics: Mapping[str, Metric]
    settings: type                                            # a frozen dataclass with defaults
    keys: Mapping[str, SectionCheck] = field(default_factory=dict)   # section keys besides metrics
    doc: str = ""
    title: str = ""
    definitions: tuple[str, ...] = ()
    command: GateCommand | None = None                       # its `glmf` subcommand
    report_columns: tuple[str, ...] = ()                      # its entries' columns first in a report's table
    report_rank: int = 0                                      # its place among the gates of a report
    report: str = ""                                          # the module whose REPORT is its GateReport

    @classmethod
    def declare(cls, name: str, metrics: list[Metric], settings: type,
                keys: Mapping[str, SectionCheck] | None = None, doc: str = "", title: str = "",
                definitions: tuple[str, ...] = (), command: GateCommand | None = None,
                report_columns: tuple[str, ...] = (), report_rank: int = 0, report: str = "") -> "GateSpec":
        return cls(name, {m.name: m for m in metrics}, settings, dict(keys or {}), doc, title or name,
                   tuple(definitions), command, tuple(report_columns), report_rank, report)

    def report_hooks(self) -> GateReport:
        """What the gate adds to the reports (`GateReport`), loaded from the module `report` names
        when a report first asks; nothing where it names none."""
        if not self.report:
            return NO_REPORT
        hooks = getattr(importlib.import_module(self.report), "REPORT", None)
        if not isinstance(hooks, GateReport):
            raise TypeError(f"gate {self.name!r}: {self.report} has no REPORT = GateReport(...)")
        return hooks

    @property
    def cli_module(self) -> str:
        """The module whose `cli(argv) -> int` runs the gate's command: its own folder's `cli.py`."""
        return f"pytest_glmf.gates.{self.name}.cli"

    @property
    def section_keys(self) -> tuple[str, ...]:
        """Keys a section may hold besides metric bounds."""
        return ("settings", "baseline", *self.keys)

    def glossary(self) -> dict[str, Any]:
        """What the gate's numbers mean, in the declaration's words, for a JSON document to carry
        (`glmf curve --json`, a result file's agents record): the title, each metric's label, unit
        and meaning, and the definitions every report prints under the gate's tables."""
        return {"title": self.title,
                "metrics": {m.name: {"label": m.axis_label(), "unit": m.unit, "doc": m.doc}
                            for m in self.metrics.values()},
                "definitions": list(self.definitions)}

    def column_label(self, metric: str) -> str:
        """How the gate's own tables head `metric`'s column (`Metric.column`): a table writes only
        the heads of columns that are no metric of its gate."""
        return self.metrics[metric].column_label()

    def directions(self) -> dict[str, str]:
        return {m.name: m.direction for m in self.metrics.values()}

    def defaults(self) -> Any:
        return self.settings()

    def check_metrics(self, where: str, mapping: Mapping[str, Any], other_keys: tuple[str, ...]) -> None:
        """Every key is a metric with a valid bound or one of `other_keys`."""
        for key, value in mapping.items():
            if key in self.metrics:
                check_bound(where, self.metrics[key], value)
            elif key not in other_keys:
                others = f"; other keys: {allowed(other_keys)}" if other_keys else ""
                raise ConfigError(f"{where}: unknown key {key!r}; allowed metrics: {allowed(self.metrics)}{others}")

    def check_section(self, where: str, section: Any) -> None:
        """The whole section of one lane: bounds, settings, baseline tolerances, the gate's own keys."""
        if not isinstance(section, dict):
            raise ConfigError(f"{where}: must be a mapping of metric bounds and settings")
        self.check_metrics(where, section, self.section_keys)
        if "settings" in section:
            self.build(section["settings"], f"{where}.settings")
        if "baseline" in section:
            check_baseline(f"{where}.baseline", self, section["baseline"])
        for key, check in self.keys.items():
            if key in section:
                check(self, f"{where}.{key}", section[key])

    def build(self, data: Any, where: str, overrides: Any = None) -> Any:
        """The settings object of a section (`overrides`: e.g. a curve row's own `settings:`, or
        the keyword arguments of a fixture call on top of the lane's settings). `data` may be a
        settings object itself; an override may be a path or a nested settings object (Python
        callers), read as the file's text would give it. The one merge point of every gate's
        fixtures (plugin/measuring.py, `call_settings`): a bad key or value in a call is refused
        with the thresholds file's words."""
        if dataclasses.is_dataclass(data) and not isinstance(data, type):
            data = dataclasses.asdict(data)
        for what, mapping in (("", data), (" (override)", overrides)):
            if mapping is not None and not isinstance(mapping, Mapping):
                raise ConfigError(f"{where}{what}: must be a mapping of setting -> value")
        merged = {**(data or {}), **{k: as_file_value(v) for k, v in (overrides or {}).items()}}
        return build_settings(self.settings, merged, where)

    def bounds(self, mapping: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        """The metric bounds of a section (or a row, or a class), without its other keys."""
        return {k: dict(v) for k, v in mapping.items() if k in self.metrics}
