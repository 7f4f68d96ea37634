"""The curve gate: per-user tok/s and TTFT at N concurrent users.

Public API (import it from here; the modules behind it may move):
    measure_curve(url, users, **settings) -> CurveResult     rows: CurveRow, result[48]
    assert_curve(result_or_row, **bounds)                    the thresholds file's row bounds
    CurveRowSettings                                         the settings and their defaults
In a test, the `glmf_curve` fixture measures on the session's server (`@pytest.mark.glmf_users`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.gates.curve.api import CurveResult, CurveRow, assert_curve, measure_curve
    from pytest_glmf.gates.curve.spec import CurveRowSettings

__all__ = ["CurveResult", "CurveRow", "CurveRowSettings", "assert_curve", "measure_curve"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
