"""The acceptance gate: speculative-decoding acceptance per prompt class.

Public API (import it from here; the modules behind it may move):
    measure_acceptance(url, classes=None, ...) -> AcceptanceResult    result["prose"], result.mean
    assert_acceptance(result, "prose", **bounds)     accept_rate, accept_length, tok_s ("mean": the mean)
    assert_speculating(result)                       the server speculated, every request answered
    load_prompt_classes(path) -> [PromptClass]       your own prompt classes (YAML)
In a test, the `glmf_acceptance` fixture measures on the session's server.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.gates.acceptance.api import (
        AcceptanceResult,
        ClassAcceptance,
        assert_acceptance,
        assert_speculating,
        measure_acceptance,
    )
    from pytest_glmf.gates.acceptance.probe import PromptClass, load_prompt_classes

__all__ = ["AcceptanceResult", "ClassAcceptance", "PromptClass", "assert_acceptance", "assert_speculating",
           "load_prompt_classes", "measure_acceptance"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
