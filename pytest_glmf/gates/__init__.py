"""The gates: verdict machinery (`verdict`), bounds written in tests (`bounds`) and one subpackage
per gate. Each gate's package exports its public API (its measurement function, typed result and
assertion helpers): `from pytest_glmf.gates.curve import measure_curve, assert_curve`."""
from __future__ import annotations

from pytest_glmf.lazy import lazy_exports, type_checking_imports

__all__ = ["lazy_exports", "type_checking_imports"]
