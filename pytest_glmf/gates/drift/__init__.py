"""The drift gate: teacher-forced log-prob drift against an oracle reference.

Public API (import it from here; the modules behind it may move):
    make_drift_reference(oracle_url, prompts=..., ...) -> reference dict (json.dump it to keep it)
    load_drift_reference(path) -> reference dict         a stored one (`glmf drift reference`)
    reference_from_lane(lane, results_dir, ...)          launch an oracle lane, make it, stop it
    measure_drift(url, reference) -> DriftResult         mean_abs_dlogp, argmax_mismatch, ci95, ...
    assert_drift(result, **bounds)                       the thresholds file's drift bounds
    assert_drift_self_check(result)                      the same tokens scored twice agree exactly
    compare_drift(result, other_candidate) / assert_drift_not_worse_than(comparison, margin=0)
    load_chat_prompts(path, n) -> [Prompt]               a drift prompt set
In a test, the `glmf_drift` fixture measures on the session's server.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.gates.drift.api import (
        DriftResult,
        assert_drift,
        assert_drift_not_worse_than,
        assert_drift_self_check,
        compare_drift,
        load_drift_reference,
        make_drift_reference,
        measure_drift,
    )
    from pytest_glmf.gates.drift.oracle import reference_from_lane
    from pytest_glmf.gates.drift.prompts import Prompt, load_chat_prompts

__all__ = ["DriftResult", "Prompt", "assert_drift", "assert_drift_not_worse_than", "assert_drift_self_check",
           "compare_drift", "load_chat_prompts", "load_drift_reference", "make_drift_reference", "measure_drift",
           "reference_from_lane"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
