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
from pytest_glmf.engine.serverconfig import read_server_config
from pytest_glmf.gates.acceptance.knobs import Knobs
from pytest_glmf.gates.acceptance.probe import (
    NO_DRAFTS,
    AcceptRecord,
    PromptClass,
    load_prompt_classes,
    probe,
    probe_result,
)
from pytest_glmf.gates.acceptance.spec import DEFAULTS, POSITIONS, TEMPLATES
from pytest_glmf.gates.acceptance.table import render_result
from pytest_glmf.gates.bounds import caller_source, checked_bounds, lane_phrase
from pytest_glmf.gates.verdict import checks_from_bounds, failed_checks, failure_message, note_evaluated
from pytest_glmf.text import render_table

MEAN = "mean"
POSITION_KEYS = tuple(f"accept_pos{k}" for k in range(1, POSITIONS + 1))


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
    no_drafts: bool = False           # speculating, but the server proposed no draft token for this class
    accept_pos: list[float] | None = None   # per draft position: steps that accepted it / steps
    recipe: dict[str, Any] = field(default_factory=dict)    # the recipe's numbers, for the report
    detail: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "ClassAcceptance":
        return cls(name=row["class"], label=row.get("label") or row["class"], tok_s=row.get("tok_s"),
                   accept_rate=row.get("accept_rate"), accept_length=row.get("accept_length"),
                   requests=int(row.get("requests") or 0), errors=int(row.get("errors") or 0),
                   speculative=row.get("speculative"), no_drafts=bool(row.get("no_drafts")),
                   accept_pos=row.get("accept_pos"), recipe=dict(row.get("recipe") or {}), detail=dict(row))

    def to_record(self, source: str, draft: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the result file keeps for this class; `draft`: the drafter's settings, kept beside
        the numbers so a change against the baseline shows what differs (results/baseline.py)."""
        keys = ("class", "tok_s", "accept_rate", "accept_length", *POSITION_KEYS, "requests", "errors", "no_drafts")
        return {**{k: self.detail.get(k) for k in keys if k in self.detail or not k.startswith("accept_pos")},
                "accept_pos": self.accept_pos, "recipe_accept_rate": self.recipe.get("accept_rate"), "source": source,
                "setup": {"draft": dict(draft or {})}}


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
    method: str | None = None         # the speculative method the server runs (ngram, DFLASH, eagle3, ...)
    users: int = DEFAULTS.users       # requests in flight at once while measuring

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], method: str | None = None) -> "AcceptanceResult":
        """From the probe's dict (probe.probe / probe_result)."""
        return cls(classes=[ClassAcceptance.from_row(r) for r in raw["classes"]],
                   mean=ClassAcceptance.from_row(raw["mean"]), speculative=raw["speculative"], engine=raw["engine"],
                   source=raw["source"], prompt_format=raw["prompt_format"], records=raw["records"],
                   method=method, users=int(raw.get("users") or 1))

    @property
    def knobs(self) -> Knobs:
        """The engine's and method's own knobs, for hints."""
        return Knobs(self.engine, self.method)

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

    def entries(self, key: str = "", draft: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The result file's entries: one per class (and the mean), as the report renders them, with
        the drafter's settings (`draft`, a change against the baseline names them), and the raw
        requests beside them (`glmf_acceptance` and `glmf accept --json` record these)."""
        out: dict[str, Any] = {f"{key}{row.name}": row.to_record(f"{self.source}; {self.prompt_format}", draft)
                               for row in [*self.classes, self.mean]}
        out[f"{key}requests"] = list(self.records)
        return out

    def to_json(self) -> dict[str, Any]:
        """Everything measured, per class and per request (`glmf accept --json`)."""
        return {"engine": self.engine, **self._raw(), "records": list(self.records)}

    def _raw(self) -> dict[str, Any]:
        return {"speculative": self.speculative, "source": self.source, "prompt_format": self.prompt_format,
                "users": self.users, "method": self.method, "classes": [c.detail for c in self.classes],
                "mean": self.mean.detail}


def measure_acceptance(url: str, classes: str | Path | Sequence[PromptClass] | None = None, *,
                       engine: str | None = None, prompts_per_class: int | None = DEFAULTS.prompts_per_class,
                       max_tokens_scale: float = DEFAULTS.max_tokens_scale, template: str = DEFAULTS.template,
                       users: int = DEFAULTS.users, method: str | None = None,
                       timeouts: Mapping[str, float] | None = None,
                       on_record: Callable[[AcceptanceResult], None] | None = None) -> AcceptanceResult:
    """Measure acceptance per class of `classes` (a YAML file, a list of PromptClass, or None: the
    packaged seven), one request at a time, or `users` at once. `engine` (sglang | vllm; None:
    asked of the server) picks the source: SGLang's per-request meta_info; vLLM's per-request
    `metrics.speculative_decoding` when the server sends it (--per-request-spec-decode-metrics),
    else its /metrics counters around each request (one request at a time only: under load they
    cannot tell the classes apart, and `users` > 1 raises `LoadNeedsPerRequest`). A server that
    shows no speculation in its first answer ends the probe there (`speculative` False).
    `template`: the chat template SGLang's /generate text is rendered with (glm, glm-nothink,
    chatml, raw). `method`: the speculative method, for hints (None: asked of the server)."""

    if template not in TEMPLATES:
        raise ValueError(f"template {template!r}: use one of {', '.join(TEMPLATES)}")
    pcs = list(classes) if isinstance(classes, Sequence) and not isinstance(classes, str) \
        else load_prompt_classes(classes)
    known = {k: v for k, v in (timeouts or {}).items() if k in Timeouts.__dataclass_fields__}
    with Client(url, Timeouts(**known)) as client:
        engine = engine or detect_engine(client)
        method = method or read_server_config(client, engine).speculative_algorithm
        done: list[AcceptRecord] = []

        def each(rec: AcceptRecord) -> None:     # the result so far after each request (kept on Ctrl-C)
            done.append(rec)
            if on_record is not None:
                on_record(AcceptanceResult.from_raw(probe_result(engine, pcs, done, template, users), method))
        raw = probe(client, engine, pcs, prompts_per_class=prompts_per_class, max_tokens_scale=max_tokens_scale,
                    template=template, users=users, on_record=each)
    return AcceptanceResult.from_raw(raw, method)


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
    note_evaluated()      # the server drafted something
    if result.classes and all(c.no_drafts for c in result.classes):
        how = f" ({result.method})" if result.method else ""
        pytest.fail(f"the speculative server{how} proposed no draft token in any of {len(result.classes)} classes "
                    f"({result.source}): nothing was measured; {result.knobs.drafter()}", pytrace=False)


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
    checks = checks_from_bounds("acceptance", row.detail, bounds, where=where, source=source,
                                hints=result.knobs.hints())
    if prompt_class != MEAN:
        note_evaluated()  # the class was measured (answered, speculating), bounds or not
    if prompt_class != MEAN and (row.errors or not row.speculative):
        pytest.fail(f"class {prompt_class!r}: no acceptance measured ({row.errors} error(s) in "
                    f"{row.requests} request(s); source {result.source})", pytrace=False)
    gated = [m for m in bounds if m != "tok_s"]
    if row.no_drafts and gated:
        what = f"class {prompt_class!r}" if prompt_class != MEAN else "every class"
        pytest.fail(f"{what}: {NO_DRAFTS if prompt_class != MEAN else 'no drafts proposed'}, so "
                    f"{', '.join(gated)} cannot be judged ({source}); {result.knobs.no_drafts()}", pytrace=False)
    title = (f"speculative acceptance{lane_phrase(lane)}, mean over {len(result.classes)} classes"
             if prompt_class == MEAN else f"speculative acceptance{lane_phrase(lane)}, class {prompt_class!r}")
    failed = failed_checks(checks)
    if failed:
        pytest.fail(failure_message(failed, title), pytrace=False)
