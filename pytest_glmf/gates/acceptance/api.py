"""The acceptance gate's public API: speculative-decoding acceptance per prompt class (yours or the
packaged ones), single stream, judged against bounds written like the thresholds file's.

    from pytest_glmf.gates.acceptance import assert_acceptance, measure_acceptance

    acc = measure_acceptance("http://127.0.0.1:30000", "my_classes.yaml", prompts_per_class=2)
    print(acc["support"].accept_rate, acc.mean.accept_rate)
    assert_acceptance(acc, "support", accept_rate={"min": 0.3})     # inside a test; "mean": the mean

A prompt-class file (the format of `pytest_glmf/data/prompt_classes.yaml`) lists `classes:`, each
with a `name`, a `max_tokens` target and `prompts` (a string per user turn, or `messages`).
Definitions and sources per engine: `probe.py`. In a test the `glmf_acceptance` fixture calls
`measure_acceptance` on the session's server, one request at a time, alone on the server.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.engine.introspect import detect_engine
from pytest_glmf.gates.acceptance.probe import AcceptRecord, PromptClass, load_prompt_classes, probe, probe_result
from pytest_glmf.gates.acceptance.spec import DEFAULTS, TEMPLATES
from pytest_glmf.gates.acceptance.table import render_result
from pytest_glmf.gates.bounds import caller_source, checked_bounds, lane_phrase
from pytest_glmf.gates.verdict import checks_from_bounds, failed_checks, failure_message, note_evaluated, render_table

HINTS = {
    "accept_rate": "drafts rejected more often: check the draft model (--speculative-draft-model-path), "
                   "--speculative-dflash-block-size and the draft attention backend",
    "accept_length": "fewer tokens per verify step: same knobs as accept_rate",
    "tok_s": "single-stream speed: check the spec flags, the decode backend, and that nothing else loads the server",
}
MEAN = "mean"


@dataclass
class ClassAcceptance:
    """One prompt class, pooled over its requests (or `mean`: the unweighted mean over classes)."""

    name: str
    label: str
    tok_s: float | None               # single-stream decode rate
    accept_rate: float | None         # accepted draft tokens / drafted tokens
    accept_length: float | None       # tokens per verify step
    requests: int
    errors: int
    speculative: bool | None          # False: the server did no speculation for this class
    recipe: dict[str, Any] = field(default_factory=dict)    # the recipe's numbers, for the report
    detail: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "ClassAcceptance":
        return cls(name=row["class"], label=row.get("label") or row["class"], tok_s=row.get("tok_s"),
                   accept_rate=row.get("accept_rate"), accept_length=row.get("accept_length"),
                   requests=int(row.get("requests") or 0), errors=int(row.get("errors") or 0),
                   speculative=row.get("speculative"), recipe=dict(row.get("recipe") or {}), detail=dict(row))

    def to_record(self, source: str) -> dict[str, Any]:
        """What the result file keeps for this class."""
        return {**{k: self.detail.get(k) for k in ("class", "tok_s", "accept_rate", "accept_length", "requests",
                                                    "errors")},
                "recipe_accept_rate": self.recipe.get("accept_rate"), "source": source}


@dataclass
class AcceptanceResult:
    """Every class measured; `result["prose"]` is one class, `result.mean` the mean over classes."""

    classes: list[ClassAcceptance]
    mean: ClassAcceptance
    speculative: bool | None          # None: no request answered
    engine: str
    source: str                       # where the numbers came from (meta_info, /metrics)
    prompt_format: str
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)   # one per request
    lane: str | None = None           # set by the glmf_acceptance fixture (named in failures)

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> "AcceptanceResult":
        """From the probe's dict (probe.probe / probe_result)."""
        return cls(classes=[ClassAcceptance.from_row(r) for r in raw["classes"]],
                   mean=ClassAcceptance.from_row(raw["mean"]), speculative=raw["speculative"], engine=raw["engine"],
                   source=raw["source"], prompt_format=raw["prompt_format"], records=raw["records"])

    def __getitem__(self, name: str) -> ClassAcceptance:
        if name == MEAN:
            return self.mean
        for c in self.classes:
            if c.name == name:
                return c
        raise KeyError(f"no prompt class {name!r}; measured: {[c.name for c in self.classes]}")

    def names(self) -> list[str]:
        return [c.name for c in self.classes]

    def table(self) -> str:
        """The recipe's table: class | tok/s | accept rate | accept length | recipe rate | requests."""
        return render_result(self._raw())

    def entries(self, key: str = "") -> dict[str, Any]:
        """The result file's entries: one per class (and the mean), as the report renders them, and
        the raw requests beside them (`glmf_acceptance` and `glmf accept --json` record these)."""
        out: dict[str, Any] = {f"{key}{row.name}": row.to_record(f"{self.source}; {self.prompt_format}")
                               for row in [*self.classes, self.mean]}
        out[f"{key}requests"] = list(self.records)
        return out

    def to_json(self) -> dict[str, Any]:
        """Everything measured, per class and per request (`glmf accept --json`)."""
        return {"engine": self.engine, **self._raw(), "records": list(self.records)}

    def _raw(self) -> dict[str, Any]:
        return {"speculative": self.speculative, "source": self.source, "prompt_format": self.prompt_format,
                "classes": [c.detail for c in self.classes], "mean": self.mean.detail}


def measure_acceptance(url: str, classes: str | Path | Sequence[PromptClass] | None = None, *,
                       engine: str | None = None, prompts_per_class: int | None = DEFAULTS.prompts_per_class,
                       max_tokens_scale: float = DEFAULTS.max_tokens_scale, template: str = DEFAULTS.template,
                       timeouts: Mapping[str, float] | None = None,
                       on_record: Callable[[AcceptanceResult], None] | None = None) -> AcceptanceResult:
    """Measure acceptance per class of `classes` (a YAML file, a list of PromptClass, or None: the
    packaged seven), one request at a time. `engine` (sglang | vllm; None: asked of the server)
    picks the source: SGLang's per-request meta_info, or vLLM's /metrics counters around each
    request. A server that shows no speculation in its first answer ends the probe there
    (`speculative` False). `template`: the chat template SGLang's /generate text is rendered
    with (glm, glm-nothink, chatml, raw)."""

    if template not in TEMPLATES:
        raise ValueError(f"template {template!r}: use one of {', '.join(TEMPLATES)}")
    pcs = list(classes) if isinstance(classes, Sequence) and not isinstance(classes, str) \
        else load_prompt_classes(classes)
    known = {k: v for k, v in (timeouts or {}).items() if k in Timeouts.__dataclass_fields__}
    with Client(url, Timeouts(**known)) as client:
        engine = engine or detect_engine(client)
        done: list[AcceptRecord] = []

        def each(rec: AcceptRecord) -> None:     # the result so far after each request (kept on Ctrl-C)
            done.append(rec)
            if on_record is not None:
                on_record(AcceptanceResult.from_raw(probe_result(engine, pcs, done, template)))
        raw = probe(client, engine, pcs, prompts_per_class=prompts_per_class, max_tokens_scale=max_tokens_scale,
                    template=template, on_record=each)
    return AcceptanceResult.from_raw(raw)


def assert_speculating(result: AcceptanceResult, *, lane: Any = None, spec: str | None = None) -> None:
    """Fail the test unless the server speculated and every request was answered (a table of the
    failed ones). `spec`: what the lane's configuration says it runs (named in the failure)."""
    __tracebackhide__ = True

    lane = lane if lane is not None else result.lane
    errors = [[r["class_name"], str(r["prompt_index"]), r["error"]] for r in result.records if r["error"]]
    note_evaluated(2)     # the server speculated; every request was answered
    if result.speculative is not True:
        name = getattr(lane, "name", lane)
        who = f"lane {name!r} sets spec={spec!r} but " if name and spec else ""
        pytest.fail(f"{who}the server reports no speculative decoding ({result.source}): check "
                    "--speculative-algorithm and the draft model in the boot log", pytrace=False)
    if errors:
        pytest.fail(f"{len(errors)} acceptance request(s) failed\n" + render_table(errors, ["class", "prompt", "error"]),
                    pytrace=False)


def assert_acceptance(result: AcceptanceResult, prompt_class: str = MEAN, *, source: str | None = None,
                      lane: Any = None, **bounds: Any) -> None:
    """Fail the test unless `prompt_class` (a class name, or "mean": the unweighted mean over the
    classes, the recipe's headline) meets `bounds` (accept_rate, accept_length, tok_s:
    {"min": x} and/or {"max": y}). A class whose requests failed or that showed no speculation
    fails as not measured; a bound on a number the server did not report fails as "not measured"."""
    __tracebackhide__ = True

    lane = lane if lane is not None else result.lane
    if source is None:
        source = caller_source()
    bounds = checked_bounds("acceptance", bounds, "assert_acceptance", (), source)
    known = [*result.names(), MEAN]
    if prompt_class not in known:
        pytest.fail(f"assert_acceptance() at {source}: unknown prompt class {prompt_class!r}; measured: "
                    f"{', '.join(known)}", pytrace=False)
    row = result[prompt_class]
    where = "mean over classes" if prompt_class == MEAN else f"class={prompt_class}"
    checks = checks_from_bounds("acceptance", row.detail, bounds, where=where, source=source, hints=HINTS)
    if prompt_class != MEAN:
        note_evaluated()  # the class was measured (answered, speculating), bounds or not
    if prompt_class != MEAN and (row.errors or not row.speculative):
        pytest.fail(f"class {prompt_class!r}: no acceptance measured ({row.errors} error(s) in "
                    f"{row.requests} request(s); source {result.source})", pytrace=False)
    title = (f"speculative acceptance{lane_phrase(lane)}, mean over {len(result.classes)} classes"
             if prompt_class == MEAN else f"speculative acceptance{lane_phrase(lane)}, class {prompt_class!r}")
    failed = failed_checks(checks)
    if failed:
        pytest.fail(failure_message(failed, title), pytrace=False)
