"""`glmf_template(reference=None, conversations=None, ...) -> TemplateResult`: the served chat
template's prompt ids against a reference. The shared part of every gate's fixture:
plugin/measuring.py."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.plugin.measuring import LaneGates

if TYPE_CHECKING:
    from pytest_glmf.gates.template.api import TemplateResult

SERIAL: tuple[str, ...] = ()


@pytest.fixture
def glmf_template(request: pytest.FixtureRequest, _glmf_gates: LaneGates) -> Callable[..., "TemplateResult"]:
    """`glmf_template(reference=None, conversations=None, *, key=None, **settings)` renders
    every conversation (your YAML file, or None: the packaged set) through the session's server
    and compares its prompt ids with `reference` (a dict or a file from `glmf template
    reference`; None: the lane's `template.settings.reference`, else the simulator's own
    template, else transformers on the lane's model directory). Settings (`served_ids`,
    `context_tokens`, `python`): the lane's `template.settings` with the call's on top. Skips when
    the lane has no reference. Recorded under `key` (default: the test's name)."""
    from pytest_glmf.gates.template.api import measure_template
    from pytest_glmf.gates.template.conversations import load_conversations
    from pytest_glmf.gates.template.reference import reference_for_lane
    from pytest_glmf.gates.template.special import lane_skip_special_default

    gate = _glmf_gates.gate("template", "glmf_template")

    def measure(reference: Any = None, conversations: Any = None, *, key: str | None = None, source: str | None = None,
                **settings_kw: Any) -> "TemplateResult":
        __tracebackhide__ = True
        # None: the lane's value; the reference and the conversations are the positional arguments
        s = gate.call_settings({k: v for k, v in settings_kw.items() if v is not None}, source=source,
                               only=("served_ids", "context_tokens", "python"))
        lane = gate.lane
        where = source or (gate.source() if gate.section() else None)
        convs = gate.call(lambda: load_conversations(conversations or s.conversations), where)
        if reference is None:
            reference = gate.call(lambda: reference_for_lane(lane, s.reference, s.python, gate.thresholds.path, convs),
                                  where)
        if reference is None:
            pytest.skip(f"lane {lane.name!r}: no template reference; set lanes.{lane.name}.template."
                        f"settings.reference (a file from `glmf template reference --url KNOWN_GOOD`) in "
                        f"{gate.thresholds.path}, or name a local model directory in the lane")
        result = gate.measure(lambda: measure_template(
            gate.url, reference, convs, served_ids=s.served_ids,
            context_tokens=s.context_tokens, timeouts=gate.timeouts,
            skip_special_tokens_default=lane_skip_special_default(lane)), where)
        gate.record(key or request.node.name, result.summary())
        return result

    return measure
