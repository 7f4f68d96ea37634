"""The hooks pytest-glmf offers to other plugins and conftest.py files (registered by the plugin's
`pytest_addhooks`), in the manner of pytest-benchmark's `pytest_benchmark_update_json`: a team adds
its own facts to what a run records without forking the bookkeeping.

    # conftest.py
    def pytest_glmf_update_provenance(config, lane, provenance):
        provenance["gpu_serial"] = read_gpu_serial()

Each implementation changes the mapping it is given in place; what it adds is written (secrets
masked like the rest, pytest_glmf/redact.py), shown by `glmf report` and stored in the history.
An implementation that raises is named with its plugin (plugin/hooks.py): the lane's tests fail
with that line for the provenance, the session fails with it for the result file.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig


@pytest.hookspec
def pytest_glmf_update_provenance(config: pytest.Config, lane: "LaneConfig", provenance: dict[str, Any]) -> None:
    """Add to (or change) the provenance of `lane`'s server, once it is up and before any test uses
    it: what the launcher and the plugin know (image and digest, engine version, model revision and
    bytes, GPU name and driver, git commit) is in `provenance` already. Called in the process that
    launched the server (under xdist: the controller), once per lane. The provenance is the result
    file's `provenance`, the history store's and the baseline check's (a key that differs from the
    baseline's is not flagged unless the plugin compares it)."""


@pytest.hookspec
def pytest_glmf_update_result(config: pytest.Config, lane: "LaneConfig", result: dict[str, Any]) -> None:
    """Add to (or change) `lane`'s result document before it is written at the end of the lane's run
    (`<results>/<lane>-<session>.json` and `<lane>-latest.json`): `schema`, `session_id`, `lane`,
    `provenance`, `gates` (what every gate recorded), `incomplete`, `exitstatus`, `failed_tests`...
    Add your own top-level key rather than change the gates' entries, which baselines and reports
    read. The checkpoints written while the tests run carry what was measured only."""
