"""Thresholds file: load and validate the bounds each lane's gates are held to."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError, read_yaml
from pytest_glmf.config.yamlfile import allowed as _allowed
from pytest_glmf.gates.verdict import GATE_METRICS

# Keys a gate section may hold besides its metrics. `settings` (and `baseline`, tolerances for
# baseline comparison) are free-form mappings owned by the gate's suite; the others are structure.
GATE_SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "boot": ("settings", "baseline", "kv_pool_dtypes"),
    "curve": ("settings", "baseline", "rows"),
    "drift": ("settings", "baseline"),
    "acceptance": ("settings", "baseline", "classes"),
    "tools": ("settings", "baseline"),
}


def _check_bound(where: str, metric: str, bound: Any) -> None:
    if not isinstance(bound, dict) or not bound or set(bound) - {"min", "max"}:
        raise ConfigError(f"{where}: {metric}: a bound is {{min: X}} and/or {{max: X}}, got {bound!r}")
    for k, x in bound.items():
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ConfigError(f"{where}: {metric}: {k} must be a number, got {x!r}")


def _check_metrics(where: str, gate: str, section: Mapping[str, Any], extra_keys: tuple[str, ...]) -> None:
    metrics = GATE_METRICS[gate]
    for key, value in section.items():
        if key in metrics:
            _check_bound(where, key, value)
        elif key not in extra_keys:
            raise ConfigError(f"{where}: unknown key {key!r}; allowed metrics: {_allowed(metrics)}; "
                              f"other keys: {_allowed(extra_keys)}")


def _check_gate(path: Path, lane: str, gate: str, section: Any) -> None:
    where = f"{path}: lanes.{lane}.{gate}"
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: must be a mapping of metric bounds and settings")
    _check_metrics(where, gate, section, GATE_SECTION_KEYS[gate])
    for key in ("settings", "baseline"):
        if key in section and not isinstance(section[key], dict):
            raise ConfigError(f"{where}.{key}: must be a mapping")
    if gate == "boot" and "kv_pool_dtypes" in section:
        v = section["kv_pool_dtypes"]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"{where}.kv_pool_dtypes: must be a list of dtype names, e.g. [fp8_e4m3, bfloat16]")
    if gate == "curve" and "rows" in section:
        rows = section["rows"]
        if not isinstance(rows, list):
            raise ConfigError(f"{where}.rows: must be a list of rows like {{users: 48, per_user_tok_s: {{min: 45}}}}")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ConfigError(f"{where}.rows[{i}]: must be a mapping with users and metric bounds")
            users = row.get("users")
            if isinstance(users, bool) or not isinstance(users, int) or users < 1:
                raise ConfigError(f"{where}.rows[{i}]: users must be a positive integer, got {users!r}")
            _check_metrics(f"{where}.rows[{i}] (users={users})", "curve", row, ("users", "allow_queueing", "settings"))
    if gate == "acceptance" and "classes" in section:
        classes = section["classes"]
        if not isinstance(classes, dict):
            raise ConfigError(f"{where}.classes: must be a mapping of prompt class -> metric bounds")
        for cls, bounds in classes.items():
            if not isinstance(bounds, dict):
                raise ConfigError(f"{where}.classes.{cls}: must be a mapping of metric bounds")
            _check_metrics(f"{where}.classes.{cls}", "acceptance", bounds, ("settings",))


@dataclass
class Thresholds:
    """The validated thresholds file. Gates read their raw section with `for_gate`."""

    path: str
    lanes: dict[str, dict[str, Any]]

    def for_gate(self, lane_name: str, gate: str) -> dict[str, Any]:
        if gate not in GATE_METRICS:
            raise KeyError(f"unknown gate {gate!r}; known gates: {', '.join(GATE_METRICS)}")
        return dict(self.lanes.get(lane_name, {}).get(gate) or {})

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
    for lane, gates in lanes.items():
        if gates is None:
            continue
        if not isinstance(gates, dict):
            raise ConfigError(f"{path}: lanes.{lane}: must be a mapping of gate -> thresholds")
        for gate, section in gates.items():
            if gate not in GATE_METRICS:
                raise ConfigError(f"{path}: lanes.{lane}: unknown gate {gate!r}; allowed: {_allowed(GATE_METRICS)}")
            _check_gate(path, str(lane), gate, section)
    return Thresholds(path=str(path), lanes={str(k): dict(v or {}) for k, v in lanes.items()})
