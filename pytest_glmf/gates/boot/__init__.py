"""The boot gate: facts parsed from the server's boot log (seats, cap reason, KV pools).

Public API (import it from here; the modules behind it may move):
    parse_boot_log(text) -> BootFacts        in a test: the glmf_boot_facts fixture
    assert_boot(facts, **bounds)             max_running_requests, kv_tokens, ...; kv_pool_dtypes=[...]
    assert_seats(facts, users)               one seat per user, or the cap's reason and knob
    assert_boot_log_clean(facts)             no fatal error or memory failure in the log
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.gates.boot.api import assert_boot, assert_boot_log_clean, assert_seats
    from pytest_glmf.gates.boot.facts import BootFacts
    from pytest_glmf.gates.boot.parse import parse_boot_log

__all__ = ["BootFacts", "assert_boot", "assert_boot_log_clean", "assert_seats", "parse_boot_log"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
