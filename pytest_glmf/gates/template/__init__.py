"""The template gate: the served chat template and tokenizer, prompt ids against a reference.

Public API (import it from here; the modules behind it may move):
    measure_template(url, reference, conversations=None, served_ids="tokenize") -> TemplateResult
    assert_template(result, **bounds)              mismatched, matched_fraction, failed_requests
    record_reference(url) / local_reference(model_dir, python=PY) / simulator_reference()
    load_reference(path), save_reference(ref, path), load_conversations(path) -> [Conversation]
In a test, the `glmf_template` fixture measures on the session's server.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.gates.template.api import TemplateResult, assert_template, measure_template
    from pytest_glmf.gates.template.conversations import Conversation, load_conversations
    from pytest_glmf.gates.template.reference import (
        load_reference,
        local_reference,
        record_reference,
        save_reference,
        simulator_reference,
    )

__all__ = ["Conversation", "TemplateResult", "assert_template", "load_conversations", "load_reference",
           "local_reference", "measure_template", "record_reference", "save_reference", "simulator_reference"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
