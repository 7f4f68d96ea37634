"""Bounds written in a test, held to the same rules as the thresholds file's.

Every gate's assertion helper (`assert_curve`, `assert_drift`, ...) takes bounds in the thresholds
file's shape, `per_user_tok_s={"min": 45}`, and checks them with the gate's own declaration
(`gates/<gate>/spec.py`) before judging anything: an unknown metric, `min > max` or a bound no
measurement can meet fails the test with the very sentence the thresholds loader would print,
naming the helper and the line of the test that called it.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.registry import gate_spec

if TYPE_CHECKING:
    from pytest_glmf.gates.spec import GateSpec

_PACKAGE = str(Path(__file__).resolve().parents[1])
_SUITES = os.path.join(_PACKAGE, "suites")


def caller_source() -> str:
    """`file:line` of the first caller outside pytest-glmf (the user's test), relative to the
    working directory when inside it: where a bound written in a test comes from."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_PACKAGE + os.sep) or path.startswith(_SUITES + os.sep):
            try:
                shown = os.path.relpath(path)
            except ValueError:   # another drive (Windows)
                shown = path
            return f"{path if shown.startswith('..') else shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def checked_bounds(gate: "str | GateSpec", bounds: Mapping[str, Any], helper: str, other_keys: tuple[str, ...] = (),
                   source: str | None = None) -> dict[str, Any]:
    """`bounds` as given to `helper`, validated by the gate's spec (the thresholds loader's own
    check; a spec of its own for a block inside a gate's section, e.g. agents' replay). A mistake
    fails the calling test: an error in the test, not a missed threshold."""
    __tracebackhide__ = True
    spec = gate_spec(gate) if isinstance(gate, str) else gate
    try:
        spec.check_metrics(f"{helper}() at {source or caller_source()}", bounds, other_keys)
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    return dict(bounds)


def bounds_or_default(gate: str, bounds: Mapping[str, Any], helper: str, default: Mapping[str, Any],
                      default_source: str, source: str | None = None) -> tuple[dict[str, Any], str]:
    """(bounds, source) an assertion helper judges by: the bounds written in the test, checked as
    the thresholds loader checks them and named by the test's line; without any, the gate's own
    bar (`default`, named by `default_source`)."""
    __tracebackhide__ = True
    if not bounds:
        return dict(default), source or default_source
    source = source or caller_source()
    return checked_bounds(gate, bounds, helper, (), source), source


def lane_phrase(lane: Any) -> str:
    """' of lane 'batch'' for a lane (a name or a LaneConfig), '' without one."""
    name = getattr(lane, "name", lane)
    return f" of lane {name!r}" if name else ""
