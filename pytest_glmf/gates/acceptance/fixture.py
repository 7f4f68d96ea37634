"""`glmf_acceptance(classes=None, ...) -> AcceptanceResult`: speculative acceptance per prompt
class on the session's server, measured once per lane per distinct arguments. The shared part of
every gate's fixture: plugin/measuring.py."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.plugin.measuring import LaneGates

if TYPE_CHECKING:
    from pytest_glmf.gates.acceptance.api import AcceptanceResult

SERIAL = ("glmf_acceptance",)   # a speed measurement: the test measures alone


@pytest.fixture(scope="session")
def glmf_acceptance(_glmf_gates: LaneGates) -> Callable[..., "AcceptanceResult"]:
    """`glmf_acceptance(classes=None, *, prompts_per_class=None, max_tokens_scale=None, template=None,
    users=None, key="")` measures speculative acceptance per prompt class (your YAML file, a list of
    PromptClass, or None: the packaged seven) on the session's server
    (`pytest_glmf.gates.acceptance.measure_acceptance`), one request at a time; what is not
    given comes from the lane's `acceptance.settings`. Measured once per session per distinct
    arguments (later calls return the same result); each class is recorded under `key` + its name.
    A server that says it runs no speculative decoding (SGLang's /server_info
    `speculative_algorithm: null`, engine/serverconfig.py) is not measured: the test skips with
    the server's words, or fails with them when the lane declares a `spec`."""
    from pytest_glmf.gates.acceptance.api import measure_acceptance
    from pytest_glmf.gates.acceptance.knobs import draft_settings
    from pytest_glmf.gates.acceptance.probe import LoadNeedsPerRequest

    gate = _glmf_gates.gate("acceptance", "glmf_acceptance")

    def measure(classes: Any = None, *, key: str = "", source: str | None = None, **kw: Any) -> "AcceptanceResult":
        __tracebackhide__ = True
        # None: the lane's value (the suite passes its settings through)
        opts = gate.call_settings({k: v for k, v in kw.items() if v is not None}, source=source)
        server, lane = gate.server, gate.lane
        why = server.config.why_no_speculation()
        if why and lane.speculative:
            pytest.fail(f"lane {lane.name!r} declares spec: {lane.spec}, but the server {why}: "
                        "its speculative flags did not take effect", pytrace=False)
        if why:
            pytest.skip(f"the server of lane {lane.name!r} runs no speculative decoding ({why}): "
                        "no acceptance to measure")
        args = dataclasses.asdict(opts)
        try:
            result = gate.once((repr(classes), *sorted((k, repr(v)) for k, v in args.items())), lambda: measure_acceptance(
                gate.url, classes, engine=server.engine, method=server.config.speculative_algorithm,
                timeouts=gate.timeouts, **args), source)
        except LoadNeedsPerRequest as exc:
            pytest.fail(f"lane {lane.name!r}: {exc}", pytrace=False)
        # one row per class (and the mean), as the report renders them, with the drafter's settings
        # (a change against the baseline names them); the raw requests beside them
        draft = draft_settings(server.provenance.get("argv"), server.config.speculative_algorithm,
                               server.config.speculative_num_draft_tokens)
        for entry_key, entry in result.entries(key, draft).items():
            gate.record(entry_key, entry)
        return result

    return measure
