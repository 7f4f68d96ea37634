"""Log-prob drift against an oracle: a two-phase, exact, teacher-forced instrument.

Phase 1 (`make_reference`, `glmf drift reference`): on the oracle (the original FP8 checkpoint,
possibly another engine), template each prompt with the server's own chat template and keep the
token ids, generate a greedy continuation, then score prompt+continuation teacher-forced on the
oracle itself (the same code path a candidate goes through) and keep the per-position logprob of
the chosen token plus the top-k. The oracle is scored twice: the self-check.

Phase 2 (`score_candidate`, `glmf drift score`): send exactly those ids to a candidate and collect
its logprob of the oracle's tokens and its own top-k. `compare` (`glmf drift compare`) turns
reference + candidates into the statistics of `drift_stats` and `render_table` into the recipe's
table.

Files are versioned JSON. A reference carries its provenance (oracle lane, image, model revision
and bytes, engine version, prompt set hash, k, tokenizer fingerprint); a candidate file carries the
hash of the reference it was scored against, so mismatched pairs are refused, not compared.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pytest_glmf.gates.drift.adapters import DriftAdapter, ScoringError
from pytest_glmf.gates.drift.answers import answer_stats, chat_answers
from pytest_glmf.gates.drift.prompts import Prompt, content_hash, prompt_set_hash, tokenizer_fingerprint
from pytest_glmf.gates.drift.spec import DEFAULTS
from pytest_glmf.gates.drift.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PromptScores,
    candidate_stats,
    floor_stats,
    pair_stats,
    self_check,
    self_check_mode,
)
from pytest_glmf.sim.tokenizer import apply_chat_template

SCHEMA = 1
REFERENCE_KIND = "glmf-drift-reference"
CANDIDATE_KIND = "glmf-drift-candidate"


class DriftFileError(ValueError):
    """A reference or candidate file that must not be used (wrong schema, other prompt set or
    tokenizer, scored against another reference). The message says what to do."""


def reference_hash(ref: dict[str, Any]) -> str:
    """Identity of a reference: its token ids, its k and its oracle scores (not formatting)."""
    return content_hash([ref["k"], [[p["prompt_ids"], p["output_ids"], p["scores"]] for p in ref["prompts"]]])


# ---------------------------------------------------------------------------------------------
# Phases


def _score_all(adapter: DriftAdapter, items: Sequence[tuple[list[int], list[int]]], k: int,
               concurrency: int = 1) -> list[PromptScores]:
    # Sequential by default: batching changes numerics on real engines (docs/real-engine.md 2(c): bf16
    # logprobs move by up to 0.1 nats between alone and batched), which would break the exact
    # self-check. `concurrency` > 1 scores that many prompts at once, the batch shape the floor is
    # then measured at (the oracle's and the candidate's floors must share it). Scoring is
    # prefill-only and cheap next to generation.
    if concurrency <= 1:
        return [adapter.score(p, o, k) for p, o in items]
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda item: adapter.score(item[0], item[1], k), items))


def _self_check(adapter: DriftAdapter, items: Sequence[tuple[list[int], list[int]]], k: int, concurrency: int,
                first: list[PromptScores]) -> dict[str, Any]:
    """Score everything again under the same conditions as `first`: the self-check and the floor."""
    return {**self_check(first, _score_all(adapter, items, k, concurrency)), "concurrency": concurrency}


Template = Callable[[list[dict[str, Any]]], list[int]]


def make_reference(adapter: DriftAdapter, prompts: Sequence[Prompt], *, max_tokens: int = DEFAULTS.max_tokens,
                   k: int = DEFAULTS.k, concurrency: int = 4, provenance: dict[str, Any] | None = None,
                   run_self_check: bool = True, template: Template | None = None,
                   score_concurrency: int = DEFAULTS.score_concurrency,
                   answer_max_tokens: int | None = None, answer_prompts: int | None = None) -> dict[str, Any]:
    """`template` replaces the server's chat template (messages -> ids) for a server that cannot
    return templated ids; it is recorded in the provenance. `concurrency` greedy generations run
    at once; `score_concurrency` prompts are scored at once (scoring and its repeat, the floor).
    With `answer_max_tokens`, the oracle's greedy chat answers to the first `answer_prompts` (None:
    all) are kept too (answers.py)."""
    t0 = time.time()
    prompt_ids = [(template or adapter.chat_ids)(p.messages) for p in prompts]
    with ThreadPoolExecutor(max(1, concurrency)) as pool:   # greedy tokens are what they are: batch freely
        outputs = list(pool.map(lambda ids: adapter.generate_greedy(ids, max_tokens), prompt_ids))
    scores = _score_all(adapter, list(zip(prompt_ids, outputs)), k, score_concurrency)
    ref: dict[str, Any] = {
        "schema": SCHEMA, "kind": REFERENCE_KIND,
        "provenance": {**adapter.describe(), **(provenance or {}),
                       "chat_template": _template_name(template),
                       "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "prompt_set": {"sha256": prompt_set_hash(prompts), "n": len(prompts)},
        "tokenizer_fingerprint": tokenizer_fingerprint(prompt_ids),
        "k": k, "max_tokens": max_tokens,
        "prompts": [{"id": p.id, "class": p.cls, "messages": p.messages, "prompt_ids": ids, "output_ids": o,
                     "scores": s.to_dict()} for p, ids, o, s in zip(prompts, prompt_ids, outputs, scores)],
    }
    # Greedy tokens re-scored on the same oracle should be its argmax everywhere; a count > 0 means
    # generation and scoring disagree (ties, batch effects): reported, not fatal.
    ref["oracle_argmax_disagreement"] = sum(
        sum(1 for tok, top in zip(o, s.top_ids) if top and top[0] != tok) for o, s in zip(outputs, scores))
    if run_self_check:
        ref["self_check"] = _self_check(adapter, list(zip(prompt_ids, outputs)), k, score_concurrency, scores)
    if answer_max_tokens:
        ref["answers"] = chat_answers(adapter, [p.messages for p in prompts][:answer_prompts], answer_max_tokens,
                                      concurrency)
    ref["elapsed_s"] = round(time.time() - t0, 3)
    ref["sha256"] = reference_hash(ref)
    return ref


def pick_template(adapter: DriftAdapter, fallback: Template | None) -> Template | None:
    """None (the server's own chat template) when the server returns templated ids, else `fallback`."""
    if fallback is None:
        return None
    try:
        adapter.chat_ids([{"role": "user", "content": "ping"}])
        return None
    except ScoringError:
        return fallback


def sim_template() -> Template:
    """The built-in simulator's chat template, in-process (the same code its server runs)."""

    def template(messages: list[dict[str, Any]]) -> list[int]:
        return apply_chat_template(messages)

    template.label = "simulator template (pytest_glmf.sim.tokenizer)"  # type: ignore[attr-defined]
    return template


def _template_name(template: Template | None) -> str:
    if template is None:
        return "server"
    return "client: " + getattr(template, "label", getattr(template, "__qualname__", repr(template)))


def check_reference(ref: dict[str, Any], prompts: Sequence[Prompt] | None = None, source: str = "reference") -> None:
    """Refuse a file that is not a reference of this schema, or made from another prompt set."""
    if ref.get("kind") != REFERENCE_KIND or ref.get("schema") != SCHEMA:
        raise DriftFileError(f"{source}: not a drift reference of schema {SCHEMA} "
                             f"(kind={ref.get('kind')!r}, schema={ref.get('schema')!r}); regenerate it with "
                             f"`glmf drift reference --url ORACLE_URL --out REF.json`")
    if ref.get("sha256") and ref["sha256"] != reference_hash(ref):
        raise DriftFileError(f"{source}: content does not match its sha256 (edited by hand or truncated)")
    if prompts is not None:
        want = prompt_set_hash(prompts)
        have = ref.get("prompt_set", {})
        if have.get("sha256") != want:
            raise DriftFileError(
                f"{source}: made from another prompt set (sha256 {str(have.get('sha256'))[:12]}, "
                f"{have.get('n')} prompts) than the current one ({want[:12]}, {len(prompts)} prompts); "
                f"regenerate the reference against the oracle")


def score_candidate(adapter: DriftAdapter, ref: dict[str, Any], *, label: str | None = None,
                    check_tokenizer: bool = True, run_self_check: bool = True,
                    provenance: dict[str, Any] | None = None, template: Template | None = None,
                    score_concurrency: int = DEFAULTS.score_concurrency, answers: bool = False,
                    answer_concurrency: int = 4) -> dict[str, Any]:
    """Score the reference's exact ids on the candidate (`score_concurrency` at once), and again
    for the self-check; with `answers` (and a reference that has the oracle's), the candidate's
    greedy chat answers on the same prompts at the reference's max_tokens (answers.py)."""
    check_reference(ref)
    t0 = time.time()
    items = [(p["prompt_ids"], p["output_ids"]) for p in ref["prompts"]]
    tokenizer_checked = False
    if check_tokenizer:
        for p in ref["prompts"]:
            ids = (template or adapter.chat_ids)(p["messages"])
            if ids != p["prompt_ids"]:
                first = next((i for i, (a, b) in enumerate(zip(ids, p["prompt_ids"])) if a != b),
                             min(len(ids), len(p["prompt_ids"])))
                raise DriftFileError(
                    f"tokenizer/chat template mismatch: prompt {p['id']!r} templates to {len(ids)} ids on "
                    f"{adapter.base_url} but {len(p['prompt_ids'])} in the reference (first difference at "
                    f"position {first}); reference tokenizer fingerprint {ref['tokenizer_fingerprint']}. "
                    f"The candidate would score other text than the oracle generated: use a reference made with "
                    f"this tokenizer, or pass --no-tokenizer-check if the ids are known to mean the same text")
        tokenizer_checked = True
    scores = _score_all(adapter, items, ref["k"], score_concurrency)
    desc = {**adapter.describe(), **(provenance or {})}
    out: dict[str, Any] = {
        "schema": SCHEMA, "kind": CANDIDATE_KIND,
        "label": label or desc.get("checkpoint") or desc.get("model") or adapter.base_url,
        "reference": {"sha256": ref.get("sha256") or reference_hash(ref), "prompt_set": ref["prompt_set"],
                      "tokenizer_fingerprint": ref["tokenizer_fingerprint"], "k": ref["k"]},
        "tokenizer_checked": tokenizer_checked and _template_name(template),
        "provenance": {**desc, "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "prompts": [{"id": p["id"], "scores": s.to_dict()} for p, s in zip(ref["prompts"], scores)],
    }
    if run_self_check:
        out["self_check"] = _self_check(adapter, items, ref["k"], score_concurrency, scores)
    if answers and ref.get("answers"):
        n = len(ref["answers"]["answers"])
        out["answers"] = chat_answers(adapter, [p["messages"] for p in ref["prompts"]][:n],
                                      ref["answers"]["max_tokens"], answer_concurrency)
    out["elapsed_s"] = round(time.time() - t0, 3)
    return out


def _ref_arrays(ref: dict[str, Any]) -> tuple[list[list[int]], list[PromptScores]]:
    return ([p["output_ids"] for p in ref["prompts"]],
            [PromptScores.from_dict(p["scores"]) for p in ref["prompts"]])


def _cand_scores(ref: dict[str, Any], cand: dict[str, Any], source: str) -> list[PromptScores]:
    if cand.get("kind") != CANDIDATE_KIND or cand.get("schema") != SCHEMA:
        raise DriftFileError(f"{source}: not a drift candidate file of schema {SCHEMA}")
    want = ref.get("sha256") or reference_hash(ref)
    if cand["reference"]["sha256"] != want:
        raise DriftFileError(f"{source}: scored against another reference (sha256 "
                             f"{cand['reference']['sha256'][:12]}, this one is {want[:12]}); rescore it with "
                             f"`glmf drift score --reference` on this reference")
    return [PromptScores.from_dict(p["scores"]) for p in cand["prompts"]]


def compare(ref: dict[str, Any], cands: Sequence[dict[str, Any]], *, sources: Sequence[str] | None = None,
            n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
            agreement_tokens: int = DEFAULTS.agreement_tokens) -> dict[str, Any]:
    """Reference + candidate files -> the statistics (contract keys of docs/architecture.md section 5)."""
    check_reference(ref)
    sources = list(sources or [c.get("label", f"candidate {i}") for i, c in enumerate(cands)])
    tokens, oracle = _ref_arrays(ref)
    scored = [_cand_scores(ref, c, s) for c, s in zip(cands, sources)]
    labels = _unique([c.get("label") or s for c, s in zip(cands, sources)])
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "reference": {"sha256": ref.get("sha256"), "provenance": ref.get("provenance", {}),
                      "prompt_set": ref["prompt_set"], "k": ref["k"], "self_check": ref.get("self_check")},
        "candidates": {},
    }
    for label, cand, sc in zip(labels, cands, scored):
        stats = candidate_stats(tokens, oracle, sc, n_resamples=n_resamples, seed=seed)
        stats.update(floor_stats(tokens, oracle, sc, ref.get("self_check"), cand.get("self_check"),
                                 n_resamples=n_resamples, seed=seed))
        stats["self_check_mode"] = self_check_mode("auto", ref.get("self_check"), cand.get("self_check"))
        if ref.get("answers") and cand.get("answers"):
            stats.update(answer_stats(ref["answers"], cand["answers"], agreement_tokens=agreement_tokens,
                                      n_resamples=n_resamples, seed=seed))
        stats["self_check"] = cand.get("self_check")
        stats["provenance"] = cand.get("provenance", {})
        out["candidates"][label] = stats
    if len(scored) == 2:
        pair = pair_stats(tokens, oracle, scored[0], scored[1], n_resamples=n_resamples, seed=seed)
        out["pair"] = {"a": labels[0], "b": labels[1], **pair}
    return out


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for x in labels:
        seen[x] = seen.get(x, 0) + 1
        out.append(x if seen[x] == 1 else f"{x}#{seen[x]}")
    return out


# ---------------------------------------------------------------------------------------------
