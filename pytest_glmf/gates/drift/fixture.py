"""`glmf_drift(reference=... | oracle_url=... | oracle_lane=...) -> DriftResult`: the session's
server scored against an oracle reference, measured once per lane per distinct arguments. The
shared part of every gate's fixture: plugin/measuring.py."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.plugin.accessors import lanes_file
from pytest_glmf.plugin.measuring import LaneGates

if TYPE_CHECKING:
    from pytest_glmf.gates.drift.api import DriftResult

SERIAL = ("glmf_drift",)   # exact numerics: nothing else may batch beside it
# the drift settings one call may set (the others are the suite's: its stored reference, regenerate, not_worse_than)
CALL_SETTINGS = ("prompts", "prompt_file", "max_tokens", "k", "oracle_engine", "check_tokenizer", "self_check",
                 "score_concurrency", "answer_max_tokens", "answer_prompts", "agreement_tokens")


@dataclasses.dataclass(frozen=True)
class DriftReferenceKey:
    """What one oracle reference depends on: calls that differ only in how they judge (self-check
    mode, label, tokenizer check) score against the same reference."""
    reference: str | None            # a stored reference's sha256 or path
    oracle_url: str | None
    oracle_lane: str
    workload: tuple[tuple[str, str], ...]
    engine: str | None


@dataclasses.dataclass(frozen=True)
class DriftMeasurementKey:
    """What one drift measurement depends on: its reference and how it is judged."""
    reference: DriftReferenceKey
    check_tokenizer: bool
    label: str
    judging: tuple[tuple[str, Any], ...]


@pytest.fixture(scope="session")
def glmf_drift(_glmf_gates: LaneGates) -> Callable[..., "DriftResult"]:
    """`glmf_drift(reference=None, *, oracle_url=None, oracle_lane=None, label=None, key=None,
    record=True, **settings)` scores the session's server against an oracle reference
    (`pytest_glmf.gates.drift.measure_drift`): a stored reference (a file or dict), one made now
    on `oracle_url`, or on `oracle_lane` (a lane of the lanes file, launched and stopped for it).
    Given none, the lane's `drift.settings.oracle_url`, else a simulator lane's own oracle (the
    original checkpoint). Settings (`CALL_SETTINGS`: `k`, `check_tokenizer`, `oracle_engine`,
    `self_check`, `score_concurrency`, `answer_max_tokens` (greedy chat answers), ...; None: the
    lane's) are the lane's drift settings with the call's on top, except the workload (`prompts`,
    `prompt_file`, `max_tokens`): the call's, else the gate's defaults. Measured once
    per session per distinct arguments; reference and candidate files go to <results>/drift/,
    the numbers under `key` (default: the label, i.e. the lane's name, and the prompt file's
    name when one is given; `record=False`: not recorded by this call, e.g. by a fixture
    measuring for several tests)."""
    from pytest_glmf.gates.drift.api import load_drift_reference, make_drift_reference, measure_drift
    from pytest_glmf.gates.drift.oracle import reference_from_lane, resolve_oracle_lane
    from pytest_glmf.gates.drift.reference import sim_template

    gate = _glmf_gates.gate("drift", "glmf_drift")
    glmf_lane, glmf_results = gate.lane, gate.results
    references: dict[DriftReferenceKey, dict[str, Any]] = {}
    out_dir = glmf_results.results_dir / "drift"
    oracle_lanes = lanes_file(_glmf_gates.config)   # where oracle_lane= names a lane

    def reference_for(reference: Any, oracle_url: str | None, oracle_lane: Any, workload: dict[str, Any],
                      engine: str | None, key: str) -> dict[str, Any]:
        if reference is not None:
            return dict(reference) if isinstance(reference, dict) else load_drift_reference(reference)
        if oracle_url is not None:
            ref = make_drift_reference(oracle_url, engine=engine, timeouts=glmf_lane.timeouts, **workload)
        else:
            lane = resolve_oracle_lane(oracle_lane, glmf_lane, oracle_lanes)
            ref = reference_from_lane(lane, glmf_results.results_dir, glmf_results.session_id, **workload)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{key}-reference.json").write_text(json.dumps(ref) + "\n")
        return ref

    def measure(reference: Any = None, *, oracle_url: str | None = None, oracle_lane: Any = None,
                label: str | None = None, key: str | None = None, source: str | None = None,
                record: bool = True, **settings_kw: Any) -> "DriftResult":
        __tracebackhide__ = True
        given = [n for n, v in (("reference", reference), ("oracle_url", oracle_url), ("oracle_lane", oracle_lane))
                 if v is not None]
        if len(given) > 1:
            pytest.fail(f"glmf_drift(): one oracle at a time, got {' and '.join(given)}", pytrace=False)
        called = {n: v for n, v in settings_kw.items() if v is not None}   # None: the lane's
        s = gate.call_settings(called, source=source, only=CALL_SETTINGS)
        if not given:
            oracle_url = s.oracle_url
        engine = s.oracle_engine
        # the workload is the call's (else the gate's defaults): your own prompt set is not the lane's
        workload: dict[str, Any] = {n: getattr(s, n) for n in ("prompts", "prompt_file", "max_tokens") if n in called}
        workload |= {n: getattr(s, n) for n in ("k", "score_concurrency", "answer_max_tokens", "answer_prompts")
                     if getattr(s, n) is not None}
        judging = {"self_check": s.self_check, "score_concurrency": s.score_concurrency,
                   "agreement_tokens": s.agreement_tokens}
        check_tokenizer = s.check_tokenizer
        prompt_file = workload.get("prompt_file")
        label = label or glmf_lane.name
        # your own prompt set is not the lane's: its numbers must not meet the suite's in a baseline
        key = key or (f"{label} ({Path(prompt_file).name})" if prompt_file is not None else label)
        ref_id = reference.get("sha256") if isinstance(reference, dict) else str(reference)
        ref_key = DriftReferenceKey(ref_id, oracle_url, str(oracle_lane),
                                    tuple(sorted((n, str(v)) for n, v in workload.items())), engine)

        def run() -> "DriftResult":
            if ref_key not in references:
                references[ref_key] = reference_for(reference, oracle_url, oracle_lane, workload, engine, key)
            result = measure_drift(gate.url, references[ref_key], label=label, engine=gate.server.engine,
                                   check_tokenizer=check_tokenizer, timeouts=glmf_lane.timeouts,
                                   provenance={"lane": glmf_lane.name, **gate.server.provenance},
                                   template=sim_template() if glmf_lane.launcher == "sim" else None, **judging)
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{key}-{glmf_results.session_id}-candidate.json").write_text(json.dumps(result.candidate)
                                                                                    + "\n")
            return result

        result = gate.once(DriftMeasurementKey(ref_key, check_tokenizer, label, tuple(sorted(judging.items()))),
                           run, source)
        if record:
            gate.record(key, result.to_record())
        return result

    return measure
