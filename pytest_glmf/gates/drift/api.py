"""The drift gate's public API: teacher-forced log-prob drift of a server against an oracle
reference, judged against bounds written like the thresholds file's.

    from pytest_glmf.gates.drift import assert_drift, make_drift_reference, measure_drift

    ref = make_drift_reference("http://oracle:30000", prompts=8, max_tokens=64)   # or a stored file
    drift = measure_drift("http://127.0.0.1:30000", ref)
    print(drift.mean_abs_dlogp, drift.argmax_mismatch)
    assert_drift(drift, mean_abs_dlogp={"max": 0.15}, argmax_mismatch={"max": 0.17})   # in a test

A reference (`glmf drift reference`, or `make_drift_reference`) holds per prompt the exact token
ids the oracle templated and generated, and its scores; the candidate is scored on exactly those
ids (`reference.py`).

The floor. Both servers score every prompt twice under the same conditions (`score_concurrency`
prompts at once). On an exact engine the two passes agree to the bit (the recipe's 0.00000) and
the drift is all the candidate's. On a noisy one (vLLM #54521: 0 of 675 identical log-prob lists),
per prompt f = mean |dlogp| between the two passes, the floor = sqrt((f_oracle^2 + f_cand^2)/2)
(what one oracle and one candidate scoring differ by from noise alone) and the excess = mean
|dlogp| - floor, token-weighted over prompts with a paired bootstrap CI over prompts
(`stats.floor_stats`: the excess is a lower and mean |dlogp| an upper bound of the noise-free
drift; `excess_rms_dlogp` is unbiased in the square). `self_check` says which mode judges:
exact (any self-difference fails), floor (bounds on excess_* and floor_abs_dlogp), report (the
floor is only shown), auto (exact when both passes agree exactly, else floor); the table names it. In a test the `glmf_drift` fixture does both on the session's server, with
the oracle given as a stored reference, a URL or a lane to launch (simulator lanes start their
own oracle).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.engine.client import Timeouts
from pytest_glmf.gates.bounds import caller_source, checked_bounds
from pytest_glmf.gates.drift.adapters import make_adapter
from pytest_glmf.gates.drift.prompts import load_chat_prompts
from pytest_glmf.gates.drift.reference import (
    DriftFileError,
    Template,
    check_reference,
    compare,
    make_reference,
    pick_template,
    score_candidate,
)
from pytest_glmf.gates.drift.spec import DEFAULTS
from pytest_glmf.gates.drift.stats import self_check_mode
from pytest_glmf.gates.drift.table import render_table as drift_table
from pytest_glmf.gates.verdict import Check, checks_from_bounds, failed_checks, failure_message, note_evaluated
from pytest_glmf.text import fmt, render_table

HINTS = {
    "mean_abs_dlogp": "the checkpoint/quantization moved the model: compare candidates with `glmf drift compare`",
    "argmax_mismatch": "greedy tokens flip: check the quantized modules (attention, lm_head) and kv dtype",
    "self_abs_dlogp": "the engine is not bit-reproducible: disable batching effects or use float32 for the check",
    "floor_abs_dlogp": "the engine's own noise floor rose: compare the image/flags with the last good run",
    "excess_abs_dlogp": "drift above the engine's noise floor: the checkpoint/quantization moved the model",
    "excess_rms_dlogp": "drift above the engine's noise floor: the checkpoint/quantization moved the model",
    "output_length_ratio": "answers got longer (or shorter) than the oracle's: compare reasoning lengths",
    "runaway_share": "answers run to max_tokens: non-terminating output (broken quantization or template)",
    "greedy_agreement": "greedy answers leave the oracle's early: see per_prompt_first_divergence",
    "finish_reason_changed": "answers end differently from the oracle's (stop vs length vs tool_calls)",
}
ANSWER_METRICS = ("output_length_ratio", "reasoning_length_ratio", "content_length_ratio", "runaway_share",
                  "greedy_agreement", "finish_reason_changed")
NOT_MEASURED = "not measured: set drift.settings.answer_max_tokens (greedy chat answers on both servers)"



@dataclass
class DriftResult:
    """This server scored on the oracle's exact tokens, against the oracle's own scores."""

    label: str
    mean_abs_dlogp: float
    median_abs_dlogp: float
    p95_abs_dlogp: float
    argmax_mismatch: float             # share of positions whose top-1 token differs from the oracle's
    kl_topk: float | None
    self_abs_dlogp: float              # the noise floor: the same tokens scored twice (oracle or candidate)
    ci95: list[float]                  # of mean_abs_dlogp, bootstrap over prompts
    argmax_mismatch_ci95: list[float]
    n_prompts: int
    n_tokens: int
    stats: dict[str, Any] = field(default_factory=dict, repr=False)       # every statistic of stats.py
    reference: dict[str, Any] = field(default_factory=dict, repr=False)   # the oracle reference used
    candidate: dict[str, Any] = field(default_factory=dict, repr=False)   # this server's scores (a file)
    comparison: dict[str, Any] = field(default_factory=dict, repr=False)  # `glmf drift compare` output
    lane: str | None = None
    self_check_mode: str = "report"    # the mode that judged (self_check_mode())
    floor_abs_dlogp: float | None = None
    excess_abs_dlogp: float | None = None

    def table(self) -> str:
        """The recipe's table: mean / median / p95 |dlogp|, argmax flips, CI and noise floor."""
        return drift_table(self.comparison)

    def to_record(self) -> dict[str, Any]:
        """What the result file keeps."""
        ref = self.reference
        return {"candidate": self.label, **self.stats, "self_check_mode": self.self_check_mode,
                "prompts": self.n_prompts, "tokens": self.n_tokens,
                "oracle_self_check": ref.get("self_check") or {},
                "reference": {"sha256": ref.get("sha256"), "provenance": ref.get("provenance"), "k": ref.get("k")}}


def load_drift_reference(path: str | Path, *, prompt_file: str | Path | None = None, prompts: int | None = None,
                         check_prompt_set: bool = False) -> dict[str, Any]:
    """A stored reference (`glmf drift reference --out FILE`), refused with DriftFileError when it
    is not one or was edited. With `check_prompt_set`, it must also have been made from the
    prompt set `prompt_file` (None: the packaged one), first `prompts` (None: as many as it holds)."""
    path = Path(path)
    try:
        ref = json.loads(path.read_text())
    except OSError as exc:
        raise DriftFileError(f"{path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise DriftFileError(f"{path}: not JSON ({exc})") from None
    if not isinstance(ref, dict):
        raise DriftFileError(f"{path}: not a drift reference (a JSON object from `glmf drift reference`)")
    check_reference(ref, source=str(path))
    if check_prompt_set:
        try:
            prompt_set = load_chat_prompts(prompt_file, prompts or (ref.get("prompt_set") or {}).get("n"))
        except (OSError, ValueError) as exc:
            raise DriftFileError(f"{path}: {exc}") from None
        check_reference(ref, prompt_set, source=str(path))
    return ref


def _adapter(url: str, engine: str | None, timeouts: Mapping[str, float] | None) -> Any:
    known = {k: v for k, v in (timeouts or {}).items() if k in Timeouts.__dataclass_fields__}
    return make_adapter(url, timeouts=Timeouts(**known) if known else None, hint=engine)


def make_drift_reference(oracle_url: str, *, prompts: int | None = None, prompt_file: str | Path | None = None,
                         max_tokens: int = DEFAULTS.max_tokens, k: int = DEFAULTS.k, engine: str | None = None,
                         template: Template | None = None, provenance: Mapping[str, Any] | None = None,
                         timeouts: Mapping[str, float] | None = None,
                         score_concurrency: int = DEFAULTS.score_concurrency,
                         answer_max_tokens: int | None = DEFAULTS.answer_max_tokens,
                         answer_prompts: int | None = DEFAULTS.answer_prompts) -> dict[str, Any]:
    """Make an oracle reference on the server at `oracle_url`: the first `prompts` chat prompts of
    `prompt_file` (None: the packaged set; the format of `pytest_glmf/data/drift_prompts.json`)
    templated by the oracle, `max_tokens` greedy tokens each, scored teacher-forced with the top-`k`,
    and scored twice (the self-check and the floor), `score_concurrency` prompts at once (the
    candidate's, so the floors share a batch shape). With `answer_max_tokens`, the greedy chat
    answers to the first `answer_prompts` (None: all) too. `engine` (sglang | vllm) is used when
    the server does not say which it is; `template` (messages -> ids) when it cannot return
    templated ids. The result is JSON-able: `json.dump` it to reuse it as a stored reference."""
    chats = load_chat_prompts(prompt_file, prompts)
    adapter = _adapter(oracle_url, engine, timeouts)
    try:
        return make_reference(adapter, chats, max_tokens=max_tokens, k=k,
                              provenance={"oracle_url": oracle_url, **(provenance or {})},
                              template=pick_template(adapter, template), score_concurrency=score_concurrency,
                              answer_max_tokens=answer_max_tokens, answer_prompts=answer_prompts)
    finally:
        adapter.close()


def measure_drift(url: str, reference: str | Path | Mapping[str, Any], *, label: str | None = None,
                  engine: str | None = None, check_tokenizer: bool = DEFAULTS.check_tokenizer,
                  template: Template | None = None, provenance: Mapping[str, Any] | None = None,
                  timeouts: Mapping[str, float] | None = None, self_check: str = DEFAULTS.self_check,
                  score_concurrency: int = DEFAULTS.score_concurrency, answers: bool = True,
                  agreement_tokens: int = DEFAULTS.agreement_tokens) -> DriftResult:
    """Score the server at `url` on the exact tokens of `reference` (a stored file or a reference
    dict), `score_concurrency` prompts at once, twice (the floor), and compare with the oracle.
    With `check_tokenizer` the prompts are templated on this server too and must give the
    reference's ids (else DriftFileError: the two would score other text). With `answers` and a
    reference holding the oracle's chat answers, this server answers the same prompts (length
    ratios, runaway share, greedy agreement over `agreement_tokens`). `self_check` is the mode
    (module docstring). `label` names this server in tables (default: the model it serves)."""
    ref = load_drift_reference(reference) if isinstance(reference, (str, Path)) else dict(reference)
    check_reference(ref)
    adapter = _adapter(url, engine, timeouts)
    try:
        cand = score_candidate(adapter, ref, label=label, check_tokenizer=check_tokenizer,
                               provenance=dict(provenance or {}), template=pick_template(adapter, template),
                               score_concurrency=score_concurrency, answers=answers)
    finally:
        adapter.close()
    return result_of(ref, cand, self_check=self_check, agreement_tokens=agreement_tokens)


def result_of(ref: Mapping[str, Any], cand: Mapping[str, Any], *, self_check: str = DEFAULTS.self_check,
              agreement_tokens: int = DEFAULTS.agreement_tokens) -> DriftResult:
    """A DriftResult from a reference and a candidate scored against it (files of `glmf drift`)."""
    res = compare(dict(ref), [dict(cand)], agreement_tokens=agreement_tokens)
    return result_from(ref, cand, res, next(iter(res["candidates"])), self_check=self_check)


def result_from(ref: Mapping[str, Any], cand: Mapping[str, Any], res: dict[str, Any], label: str, *,
                self_check: str = DEFAULTS.self_check) -> DriftResult:
    """The DriftResult of candidate `label` of a comparison `res` (`compare`'s output, which holds
    `cand`), judged in the `self_check` mode (`glmf drift compare --json` records each so)."""
    stats = res["candidates"][label]
    sc_oracle, sc_cand = ref.get("self_check") or {}, cand.get("self_check") or {}
    stats["self_abs_dlogp"] = max(sc_oracle.get("self_abs_dlogp", 0.0), sc_cand.get("self_abs_dlogp", 0.0))
    mode = self_check_mode(self_check, sc_oracle, sc_cand)
    stats["self_check_mode"] = res["self_check_mode"] = mode
    stats["floor_concurrency"] = {"oracle": sc_oracle.get("concurrency"), "candidate": sc_cand.get("concurrency")}
    return DriftResult(label=label, mean_abs_dlogp=stats["mean_abs_dlogp"], median_abs_dlogp=stats["median_abs_dlogp"],
                       p95_abs_dlogp=stats["p95_abs_dlogp"], argmax_mismatch=stats["argmax_mismatch"],
                       kl_topk=stats.get("kl_topk"), self_abs_dlogp=stats["self_abs_dlogp"], ci95=stats["ci95"],
                       argmax_mismatch_ci95=stats["argmax_mismatch_ci95"], n_prompts=stats["n_prompts"],
                       n_tokens=stats["n_tokens"], stats=stats, reference=dict(ref), candidate=dict(cand),
                       comparison=res, self_check_mode=mode, floor_abs_dlogp=stats.get("floor_abs_dlogp"),
                       excess_abs_dlogp=stats.get("excess_abs_dlogp"))


def compare_drift(result: DriftResult, other: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """Pair this result's candidate (b) with `other` (a) — a candidate file scored against the same
    reference (`glmf drift score`), or its dict — over the same prompts: `glmf drift compare`'s
    output, whose `pair` holds `wins`, `gap` (mean |dlogp| of b - a) and its paired `gap_ci95`."""
    source = str(other) if isinstance(other, (str, Path)) else str(other.get("label") or "other")
    if isinstance(other, (str, Path)):
        try:
            other = json.loads(Path(other).read_text())
        except OSError as exc:
            raise DriftFileError(f"{source}: {exc.strerror or exc}") from None
    assert isinstance(other, Mapping)
    return compare(result.reference, [dict(other), result.candidate], sources=[source, "this session"])


# ---------------------------------------------------------------------------- assertions


def assert_drift(result: DriftResult, *, source: str | None = None, **bounds: Any) -> None:
    """Fail the test unless the drift meets `bounds` (mean_abs_dlogp, median_abs_dlogp,
    p95_abs_dlogp, argmax_mismatch, kl_topk, self_abs_dlogp, floor_abs_dlogp, excess_abs_dlogp,
    excess_rms_dlogp, output_length_ratio, runaway_share, greedy_agreement, ...: {"min": x} and/or
    {"max": y}). The failure shows the recipe's table, then one row per missed bound with its CI
    over prompts and the noise floor. A bound on an answers metric (output_length_ratio, ...) that
    was not measured fails, saying which setting measures it."""
    __tracebackhide__ = True
    if source is None:
        source = caller_source()
    bounds = checked_bounds("drift", bounds, "assert_drift", (), source)
    stats = result.stats
    checks = checks_from_bounds("drift", stats, bounds, where=f"{result.label} vs oracle", source=source, hints=HINTS)
    # the CI over prompts belongs next to the number it qualifies, and so does a non-zero noise floor
    floor = stats.get("floor_abs_dlogp")
    noise = (f"; noise floor {fmt(stats['self_abs_dlogp'])} max, {fmt(floor)} mean ({result.self_check_mode} mode)"
             if stats["self_abs_dlogp"] else "")
    cis = {"excess_abs_dlogp": "excess_ci95", "excess_rms_dlogp": "excess_rms_ci95", "floor_abs_dlogp": "floor_ci95",
           **{m: f"{m}_ci95" for m in ANSWER_METRICS}}
    for c in checks:
        if c.metric in ANSWER_METRICS and c.value is None:
            c.where += f" ({NOT_MEASURED if 'answers_n' not in stats else 'the oracle reports no reasoning'})"
        elif c.metric in cis:
            ci = stats.get(cis[c.metric])
            c.where += f" (95% CI {fmt(ci[0])}..{fmt(ci[1])})" if ci else ""
            if c.metric in ("excess_abs_dlogp", "excess_rms_dlogp") and floor is not None:
                c.where += f" (mean |dlogp| {fmt(stats['mean_abs_dlogp'])} - floor {fmt(floor)})"
        elif c.metric == "mean_abs_dlogp":
            c.where += f" (95% CI {fmt(stats['ci95'][0])}..{fmt(stats['ci95'][1])}{noise})"
        elif c.metric == "argmax_mismatch":
            c.where += f" (95% CI {fmt(stats['argmax_mismatch_ci95'][0])}..{fmt(stats['argmax_mismatch_ci95'][1])}{noise})"
        elif noise and c.metric != "self_abs_dlogp":
            c.where += f" ({noise[2:]})"
    failed = failed_checks(checks)
    if failed:
        pytest.fail(failure_message(failed, f"drift of {result.label} against the oracle\n{result.table()}\n"),
                    pytrace=False)


def assert_drift_self_check(result: DriftResult) -> None:
    """Fail the test unless scoring the same tokens twice gave exactly the same numbers, on the
    oracle and on this server (the recipe's "0.00000"): otherwise every drift number carries a
    noise floor."""
    __tracebackhide__ = True
    rows = []
    for who, sc in (("oracle", result.reference.get("self_check")), ("candidate", result.candidate.get("self_check"))):
        if sc and not sc["exact"]:
            rows.append([who, fmt(sc["self_abs_dlogp"]), fmt(sc["self_mean_abs_dlogp"]),
                         str(sc["self_argmax_changes"]), str(sc["n_tokens"])])
    note_evaluated()
    if rows:
        pytest.fail("instrument self-check: the same tokens scored twice differ (noise floor, shown next to every "
                    "drift number; nothing subtracted)\n"
                    + render_table(rows, ["server", "max |dlogp|", "mean |dlogp|", "top-1 changes", "tokens"])
                    + "\n(set drift.settings.self_check: report to accept a non-reproducible engine)", pytrace=False)


def assert_drift_not_worse_than(comparison: Mapping[str, Any], *, margin: float = 0.0,
                                source: str | None = None) -> None:
    """Fail the test when candidate b of `compare_drift`'s output is significantly further from the
    oracle than a: the whole paired 95 % CI of the gap mean |dlogp|(b) - (a) lies above `margin`."""
    __tracebackhide__ = True
    if source is None:
        source = caller_source()
    pair = comparison["pair"]
    check = Check("mean_abs_dlogp", pair["gap_ci95"][0], {"max": margin},
                  where=f"gap {pair['b']} - {pair['a']}, lower end of the paired 95% CI "
                        f"[{fmt(pair['gap_ci95'][0])}, {fmt(pair['gap_ci95'][1])}]; wins {pair['wins'][0]}:{pair['wins'][1]}",
                  source=source, hint=f"{pair['b']} is significantly further from the oracle than {pair['a']}")
    failed = failed_checks([check])
    if failed:
        pytest.fail(failure_message(failed, f"{pair['b']} not worse than {pair['a']}\n{drift_table(dict(comparison))}\n"),
                    pytrace=False)
