"""Greedy chat answers: the reasoning-model checks and greedy agreement, through the chat API.

Teacher-forced scoring cannot see what a quantized reasoning model does with its freedom: write a
longer chain of thought, or never stop (arXiv 2606.00206; the AMD nightly's runaway output,
research/peers_2026-12.md 3). So the oracle and the candidate each answer the same chat prompts
greedily (temperature 0, `answer_max_tokens` each) through `/v1/chat/completions`, and:

- output_length_ratio = sum over prompts of the candidate's completion tokens / the oracle's
  (usage.completion_tokens: the engine's count). 1.0: the same lengths; a 95 % CI resamples
  prompts (the ratio of the sums over the resampled prompts, the same draw for both).
- reasoning_length_ratio / content_length_ratio: the same over the reasoning and the content as
  the server's reasoning parser splits them (`message.reasoning_content`, vLLM's `reasoning`);
  reasoning tokens from `usage.reasoning_tokens` (SGLang) or
  `usage.completion_tokens_details.reasoning_tokens` (OpenAI's shape), content = completion -
  reasoning; a server that splits the reasoning off without counting its tokens is compared in
  characters (`reasoning_length_unit`). reasoning_length_ratio is None when the oracle reports no
  reasoning (content_length_ratio is then the output's).
- runaway_share: the share of the candidate's answers that end by reaching max_tokens
  (finish_reason "length"): non-terminating output. `oracle_runaway_share` beside it: a budget
  too small for the oracle itself shows there, not as a candidate fault.
- greedy agreement: per prompt, `first_divergence` = the first position where the candidate's
  answer tokens (logprobs.content[].token) leave the oracle's (None: identical answers; a prefix
  of the other diverges where it ends); `greedy_agreement` = the share of prompts whose first
  `agreement_tokens` tokens are identical (shorter oracle answers: all of it), with its CI.
- finish_reason_changed: the share of prompts whose finish reason differs from the oracle's.
"""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_glmf.gates.drift.spec import DEFAULTS
from pytest_glmf.gates.drift.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_ratio, percentile_ci

if TYPE_CHECKING:
    from pytest_glmf.gates.drift.adapters import DriftAdapter



def answer_record(response: dict[str, Any]) -> dict[str, Any]:
    """One chat completion -> what the checks need (JSON-able)."""
    choice = (response.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    usage = response.get("usage") or {}
    tokens = [str(e.get("token")) for e in ((choice.get("logprobs") or {}).get("content") or [])]
    reasoning_text = message.get("reasoning_content") or message.get("reasoning") or ""
    reasoning = usage.get("reasoning_tokens")
    if not reasoning:
        reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    completion = usage.get("completion_tokens")
    return {"tokens": tokens, "completion_tokens": int(completion) if completion is not None else len(tokens),
            "reasoning_tokens": int(reasoning) if reasoning is not None else None,
            "finish_reason": choice.get("finish_reason"), "content_chars": len(message.get("content") or ""),
            "reasoning_chars": len(reasoning_text)}


def chat_answers(adapter: "DriftAdapter", messages: Sequence[list[dict[str, Any]]], max_tokens: int,
                 concurrency: int = 4) -> dict[str, Any]:
    """Greedy chat answers to every prompt, `concurrency` at once (greedy tokens do not depend on
    the batch on an exact engine; on another, the agreement numbers include that)."""
    with ThreadPoolExecutor(max(1, concurrency)) as pool:
        answers = list(pool.map(lambda m: answer_record(adapter.chat_answer(m, max_tokens)), messages))
    return {"max_tokens": max_tokens, "answers": answers}


def first_divergence(a: Sequence[str], b: Sequence[str]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _ratio(numer: np.ndarray, denom: np.ndarray, boot: dict[str, Any]) -> tuple[float | None, list[float] | None]:
    if denom.sum() <= 0:
        return None, None
    with np.errstate(divide="ignore", invalid="ignore"):   # a resample of only empty answers: nan, ignored
        samples = bootstrap_ratio(numer, denom, **boot)
    return float(numer.sum() / denom.sum()), percentile_ci(samples[np.isfinite(samples)])


def answer_stats(oracle: dict[str, Any], cand: dict[str, Any], *, agreement_tokens: int = DEFAULTS.agreement_tokens,
                 n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Every statistic of the module docstring, candidate answers against the oracle's."""
    o, c = oracle["answers"], cand["answers"]
    if len(o) != len(c):
        raise ValueError(f"answers: {len(c)} candidate answers for {len(o)} oracle answers")
    boot = {"n_resamples": n_resamples, "seed": seed}
    ones = np.ones(len(o))
    o_len = np.array([a["completion_tokens"] for a in o], float)
    c_len = np.array([a["completion_tokens"] for a in c], float)
    out: dict[str, Any] = {"answers_n": len(o), "answer_max_tokens": oracle.get("max_tokens"),
                           "agreement_tokens": agreement_tokens}
    out["output_length_ratio"], out["output_length_ratio_ci95"] = _ratio(c_len, o_len, boot)
    out["oracle_mean_output_tokens"] = float(o_len.mean()) if len(o) else None
    out["candidate_mean_output_tokens"] = float(c_len.mean()) if len(c) else None
    o_r = np.array([a["reasoning_tokens"] or 0 for a in o], float)
    c_r = np.array([a["reasoning_tokens"] or 0 for a in c], float)
    o_rc = np.array([a["reasoning_chars"] for a in o], float)
    if o_r.sum() > 0:
        out["reasoning_length_unit"] = "tokens"
        out["reasoning_length_ratio"], out["reasoning_length_ratio_ci95"] = _ratio(c_r, o_r, boot)
        out["content_length_ratio"], out["content_length_ratio_ci95"] = _ratio(c_len - c_r, o_len - o_r, boot)
    elif o_rc.sum() > 0:   # reasoning split off but its tokens not counted in usage: compare characters
        out["reasoning_length_unit"] = "chars"
        c_rc = np.array([a["reasoning_chars"] for a in c], float)
        out["reasoning_length_ratio"], out["reasoning_length_ratio_ci95"] = _ratio(c_rc, o_rc, boot)
        out["content_length_ratio"], out["content_length_ratio_ci95"] = _ratio(
            np.array([a["content_chars"] for a in c], float), np.array([a["content_chars"] for a in o], float), boot)
    else:
        out.update(reasoning_length_ratio=None, reasoning_length_ratio_ci95=None,
                   content_length_ratio=out["output_length_ratio"], content_length_ratio_ci95=out["output_length_ratio_ci95"])
    runaway = np.array([a["finish_reason"] == "length" for a in c], float)
    out["runaway_share"] = float(runaway.mean()) if len(c) else None
    out["runaway_share_ci95"] = percentile_ci(bootstrap_ratio(runaway, ones, **boot)) if len(c) else None
    out["oracle_runaway_share"] = float(np.mean([a["finish_reason"] == "length" for a in o])) if len(o) else None
    firsts = [first_divergence(a["tokens"], b["tokens"]) for a, b in zip(o, c)]
    agree = np.array([f is None or f >= min(agreement_tokens, len(a["tokens"])) for f, a in zip(firsts, o)], float)
    out["greedy_agreement"] = float(agree.mean()) if len(o) else None
    out["greedy_agreement_ci95"] = percentile_ci(bootstrap_ratio(agree, ones, **boot)) if len(o) else None
    where = [len(a["tokens"]) if f is None else f for f, a in zip(firsts, o)]
    out["first_divergence_median"] = float(np.median(where)) if where else None
    out["per_prompt_first_divergence"] = firsts
    changed = [a["finish_reason"] != b["finish_reason"] for a, b in zip(o, c)]
    out["finish_reason_changed"] = float(np.mean(changed)) if changed else None
    out["finish_reason_changes"] = [[i, a["finish_reason"], b["finish_reason"]]
                                    for i, (a, b, ch) in enumerate(zip(o, c, changed)) if ch]
    return out
