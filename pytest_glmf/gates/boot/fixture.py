"""`glmf_boot_facts`: the facts of the session's server's boot log. Nothing is measured: the
server parsed its log when it started (launch/base.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_glmf.gates.boot.facts import BootFacts
    from pytest_glmf.launch.base import Server

SERIAL: tuple[str, ...] = ()


@pytest.fixture(scope="session")
def glmf_boot_facts(glmf_server: "Server") -> "BootFacts":
    """Facts parsed from the server's boot log (seats, cap reason, KV pools...), completed by what the
    server says of itself where the log is silent or absent (gates/boot/told.py; `sources` says which)."""
    return glmf_server.boot_facts
