"""Thresholds file: load and validate the bounds each lane's gates are held to.

What a gate section may hold is the gate's own declaration (`gates/<gate>/spec.py`, listed in
`gates/registry.py`): metric bounds, typed `settings:`, baseline tolerances and the gate's own
keys. Everything is checked here, when the file is read (by pytest at configure time and by
`glmf thresholds FILE` alike), so a mistake fails before any server boots.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from pytest_glmf.config.yamlfile import ConfigError, read_yaml
from pytest_glmf.config.yamlfile import allowed as _allowed
from pytest_glmf.gates.registry import GATES, gate_spec


@dataclass
class Thresholds:
    """The validated thresholds file. `for_gate` gives a gate's raw section, `settings` its typed
    settings, `bounds` its metric bounds."""

    path: str
    lanes: dict[str, dict[str, Any]]

    def for_gate(self, lane_name: str, gate: str) -> dict[str, Any]:
        gate_spec(gate)   # KeyError naming the known gates
        return dict(self.lanes.get(lane_name, {}).get(gate) or {})

    def settings(self, lane_name: str, gate: str, overrides: Mapping[str, Any] | None = None) -> Any:
        """The gate's settings object (its spec's dataclass: defaults for what the lane does not
        set), with `overrides` on top (a curve row's own `settings:`). Validated at load already."""
        where = f"{self.path}: lanes.{lane_name}.{gate}.settings"
        return gate_spec(gate).build(self.for_gate(lane_name, gate).get("settings"), where, overrides)

    def bounds(self, lane_name: str, gate: str) -> dict[str, dict[str, float]]:
        """The metric bounds of the lane's gate section (settings and the gate's other keys left out)."""
        return gate_spec(gate).bounds(self.for_gate(lane_name, gate))

    def source(self, lane_name: str, gate: str) -> str:
        return f"{Path(self.path).name}: lanes.{lane_name}.{gate}"

    def has_lane(self, lane_name: str) -> bool:
        return lane_name in self.lanes


def bundled_thresholds_path() -> Path:
    return Path(str(resources.files("pytest_glmf.config").joinpath("thresholds.yaml")))


def load_thresholds(path: str | Path | None = None) -> Thresholds:
    """Load and validate a thresholds file (None: the checked-in one shipped with the package)."""
    path = Path(path) if path is not None else bundled_thresholds_path()
    data = read_yaml(path, "thresholds")
    if data is None:
        data = {"schema": 1, "lanes": {}}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a thresholds file is a mapping: schema: 1, lanes: {{LANE: {{GATE: ...}}}}")
    unknown = set(data) - {"schema", "lanes"}
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key {sorted(unknown)[0]!r}; allowed: lanes, schema")
    if data.get("schema", 1) != 1:
        raise ConfigError(f"{path}: schema {data['schema']!r} is not supported; allowed: 1")
    lanes = data.get("lanes") or {}
    if not isinstance(lanes, dict):
        raise ConfigError(f"{path}: lanes: must be a mapping of lane name -> gates")
    problems: list[tuple[tuple[str, ...], ConfigError]] = []    # every mistake of the file, not the first
    for lane, gates in lanes.items():
        if gates is None:
            continue
        if not isinstance(gates, dict):
            problems.append(((str(lane),), ConfigError(f"{path}: lanes.{lane}: must be a mapping of gate -> "
                                                       "thresholds")))
            continue
        for gate, section in gates.items():
            if gate not in GATES:
                problems.append(((str(lane), str(gate)), ConfigError(
                    f"{path}: lanes.{lane}: unknown gate {gate!r}; allowed: {_allowed(GATES)}")))
                continue
            problems += [((str(lane), str(gate), *key), exc) for key, exc in _section_problems(
                GATES[gate], f"{path}: lanes.{lane}.{gate}", section)]
    if len(problems) == 1:
        raise problems[0][1]
    if problems:
        lines = _key_lines(path)
        raise ConfigError(f"{path}: {len(problems)} problems, each on its line:\n" + "\n".join(
            "  " + _at_line(str(exc), str(path), lines.get(("lanes", *keys))) for keys, exc in problems))
    return Thresholds(path=str(path), lanes={str(k): dict(v or {}) for k, v in lanes.items()})


def _at_line(message: str, path: str, line: int | None) -> str:
    """"th.yaml: lanes.a..." -> "th.yaml:7: lanes.a..." (the line of the key it names)."""
    head = f"{path}: "
    return f"{path}:{line}: {message[len(head):]}" if line is not None and message.startswith(head) else message


def _section_problems(spec: Any, where: str, section: Any) -> list[tuple[tuple[str, ...], ConfigError]]:
    """The section's mistakes, one per key when several keys are wrong (the key's path with each)."""
    try:
        spec.check_section(where, section)
        return []
    except ConfigError as whole:
        first = whole
    found: list[tuple[tuple[str, ...], ConfigError]] = []
    for key, value in section.items():
        try:
            spec.check_section(where, {key: value})
        except ConfigError as exc:
            found.append(((str(key),), exc))
    return found or [((), first)]


def _key_lines(path: Path) -> dict[tuple[str, ...], int]:
    """The line of every mapping key of a YAML file, by its path of keys (for naming a problem's line)."""
    out: dict[tuple[str, ...], int] = {}

    def walk(node: Any, at: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                here = (*at, str(k.value))
                out.setdefault(here, k.start_mark.line + 1)
                walk(v, here)

    try:
        walk(yaml.compose(path.read_text(), Loader=yaml.SafeLoader), ())
    except (OSError, yaml.YAMLError):
        pass
    return out
