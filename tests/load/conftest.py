"""Helpers of the load engine's own tests (pytest_glmf/load)."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest


def inside_interval(b: Mapping[str, Any]) -> float:
    """A bound strictly inside the client's error interval [lo, hi] of a number it did not measure
    (lo < hi): a threshold there cannot be told at both ends, so it must fail as the client's."""
    lo, hi = b["lo"], b["hi"]
    top = hi if math.isfinite(hi) else 2 * max(lo, b["value"]) + 1
    assert lo < top, b
    return (lo + top) / 2


@pytest.fixture
def inside() -> Callable[[Mapping[str, Any]], float]:
    return inside_interval
