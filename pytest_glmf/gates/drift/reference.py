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

import argparse
import hashlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from pytest_glmf.gates.drift.adapters import DriftAdapter, ScoringError, make_adapter
from pytest_glmf.gates.drift.stats import (DEFAULT_RESAMPLES, DEFAULT_SEED, PromptScores, candidate_stats,
                                     pair_stats, self_check)
from pytest_glmf.gates.verdict import fmt
from pytest_glmf.gates.verdict import render_table as _table
from pytest_glmf.data import read_text as read_data_file

SCHEMA = 1
REFERENCE_KIND = "glmf-drift-reference"
CANDIDATE_KIND = "glmf-drift-candidate"
DEFAULT_K = 20            # vLLM's default --max-logprobs cap; enough for the top-k KL
DEFAULT_MAX_TOKENS = 128  # the recipe: 128 greedy tokens on 40 prompts


class DriftFileError(ValueError):
    """A reference or candidate file that must not be used (wrong schema, other prompt set or
    tokenizer, scored against another reference). The message says what to do."""


# ---------------------------------------------------------------------------------------------
# Prompt set


@dataclass
class Prompt:
    id: str
    messages: list[dict[str, Any]]
    cls: str = ""


def load_prompts(path: str | Path | None = None, n: int | None = None) -> list[Prompt]:
    """The drift prompt set (default: the packaged pytest_glmf/data/drift_prompts.json), first `n`."""
    text = read_data_file(path, "drift_prompts.json")
    data = json.loads(text)
    prompts = [Prompt(p["id"], p["messages"], p.get("class", "")) for p in data["prompts"]]
    if n is not None:
        if n < 1 or n > len(prompts):
            raise ValueError(f"--prompts {n}: the prompt set has {len(prompts)} prompts")
        prompts = prompts[:n]
    return prompts


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def prompt_set_hash(prompts: Sequence[Prompt]) -> str:
    return _sha([[p.id, p.messages] for p in prompts])


def tokenizer_fingerprint(prompt_ids: Sequence[Sequence[int]]) -> str:
    """The templated ids of the whole prompt set: equal ids <=> same tokenizer AND chat template
    as far as this prompt set can tell."""
    return _sha([list(x) for x in prompt_ids])[:16]


def reference_hash(ref: dict[str, Any]) -> str:
    """Identity of a reference: its token ids, its k and its oracle scores (not formatting)."""
    return _sha([ref["k"], [[p["prompt_ids"], p["output_ids"], p["scores"]] for p in ref["prompts"]]])


# ---------------------------------------------------------------------------------------------
# Phases


def _score_all(adapter: DriftAdapter, items: Sequence[tuple[list[int], list[int]]], k: int) -> list[PromptScores]:
    # Sequential on purpose: batching changes numerics on real engines (real_engine.md 2(c): bf16
    # logprobs move by up to 0.1 nats between alone and batched), which would break the exact
    # self-check. Scoring is prefill-only and cheap next to generation.
    return [adapter.score(p, o, k) for p, o in items]


Template = Callable[[list[dict[str, Any]]], list[int]]


def make_reference(adapter: DriftAdapter, prompts: Sequence[Prompt], *, max_tokens: int = DEFAULT_MAX_TOKENS,
                   k: int = DEFAULT_K, concurrency: int = 4, provenance: dict[str, Any] | None = None,
                   run_self_check: bool = True, template: Template | None = None) -> dict[str, Any]:
    """`template` replaces the server's chat template (messages -> ids) for a server that cannot
    return templated ids; it is recorded in the provenance."""
    t0 = time.time()
    prompt_ids = [(template or adapter.chat_ids)(p.messages) for p in prompts]
    with ThreadPoolExecutor(max(1, concurrency)) as pool:   # greedy tokens are what they are: batch freely
        outputs = list(pool.map(lambda ids: adapter.generate_greedy(ids, max_tokens), prompt_ids))
    scores = _score_all(adapter, list(zip(prompt_ids, outputs)), k)
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
        again = _score_all(adapter, list(zip(prompt_ids, outputs)), k)
        ref["self_check"] = self_check(scores, again)
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
    from pytest_glmf.sim.tokenizer import apply_chat_template

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
                    provenance: dict[str, Any] | None = None, template: Template | None = None) -> dict[str, Any]:
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
    scores = _score_all(adapter, items, ref["k"])
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
        out["self_check"] = self_check(scores, _score_all(adapter, items, ref["k"]))
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
            n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Reference + candidate files -> the statistics (contract keys of DESIGN.md section 5)."""
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
# Rendering (plain data in, text out; the report module calls this)


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ci(ci: Any, pct: bool = False) -> str:
    if not ci:
        return "-"
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]" if pct else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _noise(sc: Any) -> str:
    if not sc:
        return "not run"
    return "0 (exact)" if sc.get("exact") else f"{sc['self_abs_dlogp']:.3g} max, {sc['self_argmax_changes']} flips"


def _from_recorded(section: dict[str, Any]) -> dict[str, Any]:
    """A result file's drift section (key -> row recorded by the suite) in `compare`'s shape."""
    cands = {k: v for k, v in section.items() if isinstance(v, dict) and "mean_abs_dlogp" in v}
    pairs = [v for v in section.values() if isinstance(v, dict) and "wins" in v and "a_vs_b" in v]
    first = next(iter(cands.values()), {})
    ref = dict(first.get("reference") or {})
    ref.setdefault("self_check", first.get("oracle_self_check"))
    ref.setdefault("k", (first.get("reference") or {}).get("k", "?"))
    return {"reference": ref, "candidates": cands, "pair": pairs[0] if pairs else None}


def render_table(results: dict[str, Any]) -> str:
    """The recipe's table (quant, mean |dlogp| vs reference, median, p95, argmax != ref) with the
    CI over prompts and the self-check noise floor next to every row, then the pair verdict.

    `results` is `compare`'s output (also `glmf drift compare --json`), or a result file's
    `gates.drift` section as the suite records it."""
    if "candidates" not in results:
        results = _from_recorded(results)
    ref = results.get("reference") or {}
    prov = ref.get("provenance") or {}
    oracle = (prov.get("oracle_lane") or prov.get("lane") or prov.get("checkpoint")
              or str(prov.get("model") or "").rstrip("/").rsplit("/", 1)[-1] or prov.get("url") or "oracle")
    rows = []
    for label, s in (results.get("candidates") or {}).items():
        rows.append([label, fmt(s["mean_abs_dlogp"]), _ci(s.get("ci95")), fmt(s["median_abs_dlogp"]),
                     fmt(s["p95_abs_dlogp"]), _pct(s["argmax_mismatch"]), fmt(s.get("kl_topk")),
                     _noise(s.get("self_check"))])
    pair = results.get("pair")
    if pair:
        ab = pair["a_vs_b"]
        rows.append([f"{pair['a']} vs {pair['b']} (each other)", fmt(ab["mean_abs_dlogp"]), "",
                     fmt(ab["median_abs_dlogp"]), fmt(ab["p95_abs_dlogp"]), _pct(ab["argmax_mismatch"]), "", ""])
    head = [f"quant (vs {oracle})", "mean |dlogp|", "ci95 (prompts)", "median", "p95", "argmax != ref",
            "kl top-k", "self-check"]
    lines = [_table(rows, head)]
    n = next(iter((results.get("candidates") or {}).values()), {})
    lines.append(f"{n.get('n_prompts', '?')} prompts, {n.get('n_tokens', '?')} tokens, top-{ref.get('k', '?')}; "
                 f"oracle self-check: {_noise(ref.get('self_check'))}; nothing is subtracted")
    if pair:
        lines.append(
            f"{pair['a']} closer on {pair['wins'][0]} of {sum(pair['wins']) + pair['ties']} prompts "
            f"({pair['b']} on {pair['wins'][1]}); gap mean|dlogp|({pair['b']}) - ({pair['a']}) = {fmt(pair['gap'])}, "
            f"95% CI {_ci(pair['gap_ci95'])}{' (excludes 0)' if pair['gap_ci95'][0] > 0 or pair['gap_ci95'][1] < 0 else ' (includes 0)'}; "
            f"same wrong token in both: {_pct(pair['shared_flip_rate'])} of tokens "
            f"({_pct(pair['shared_flip_share'])} of the flips)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# CLI: glmf drift reference | score | compare


def _read(path: str) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise DriftFileError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise DriftFileError(f"{path}: not JSON ({exc})") from None


def _write(path: str, data: dict[str, Any]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")


def _kv(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items:
        key, sep, val = it.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"--provenance {it!r}: expected KEY=VALUE")
        out[key] = val
    return out


def _provenance(a: argparse.Namespace, lane_key: str) -> dict[str, Any]:
    """The provenance flags: lane, image, model revision and bytes (None when not given)."""
    out: dict[str, Any] = {lane_key: a.lane, "image": a.image, "model_revision": a.model_revision,
                           "model_bytes": None}
    if a.model_dir:
        from pytest_glmf.launch.docker.provenance import model_dir_provenance

        model = model_dir_provenance(Path(a.model_dir), declared=a.model_dir, lane_revision=a.model_revision)
        out.update(model_revision=model["revision"], model_bytes=model["weight_bytes"], model_dir=model)
    return {**out, **_kv(a.provenance)}


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="glmf drift", description="Teacher-forced log-prob drift against an oracle.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reference", help="phase 1: greedy continuations + scores on the oracle")
    r.add_argument("--url", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--prompts", type=int, default=None, help="first N prompts of the set (default: all 40)")
    r.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    r.add_argument("--k", type=int, default=DEFAULT_K, help="top-k logprobs kept per position")
    r.add_argument("--prompt-file", default=None, help="a prompt set JSON (default: the packaged one)")
    r.add_argument("--concurrency", type=int, default=4, help="parallel greedy generations")
    s = sub.add_parser("score", help="phase 2: score the reference tokens on a candidate")
    s.add_argument("--url", required=True)
    s.add_argument("--reference", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--label", default=None, help="name of the candidate in tables (default: model/checkpoint)")
    s.add_argument("--no-tokenizer-check", action="store_true",
                   help="skip re-templating the prompts on the candidate to compare token ids")
    for p in (r, s):
        p.add_argument("--template", choices=["server", "sim"], default="server",
                       help="chat template: the server's own (default), or the built-in simulator's applied "
                            "here when the simulator cannot return templated ids")
        p.add_argument("--engine", choices=["sglang", "vllm"], default=None, help="default: detected")
        p.add_argument("--no-self-check", action="store_true", help="do not score everything a second time")
        p.add_argument("--lane", default=None, help="lane name recorded in the provenance")
        p.add_argument("--image", default=None, help="engine image (tag or digest) recorded in the provenance")
        p.add_argument("--model-dir", default=None,
                       help="the served weights' directory, if readable here: revision, bytes, config hash")
        p.add_argument("--model-revision", default=None, help="model revision, when --model-dir cannot tell")
        p.add_argument("--provenance", action="append", default=[], metavar="KEY=VALUE",
                       help="any other provenance to record")
    c = sub.add_parser("compare", help="statistics of one or two candidates against the reference")
    c.add_argument("reference")
    c.add_argument("candidates", nargs="+")
    c.add_argument("--json", action="store_true", help="print the statistics as JSON")
    c.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    c.add_argument("--seed", type=int, default=DEFAULT_SEED)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "reference":
            adapter = make_adapter(a.url, a.engine)
            try:
                ref = make_reference(adapter, load_prompts(a.prompt_file, a.prompts), max_tokens=a.max_tokens,
                                     k=a.k, concurrency=a.concurrency, provenance=_provenance(a, "oracle_lane"),
                                     run_self_check=not a.no_self_check,
                                     template=pick_template(adapter, sim_template() if a.template == "sim" else None))
            finally:
                adapter.close()
            _write(a.out, ref)
            print(f"reference: {len(ref['prompts'])} prompts, "
                  f"{sum(len(p['output_ids']) for p in ref['prompts'])} tokens, k={ref['k']}, "
                  f"self-check {_noise(ref.get('self_check'))} -> {a.out}")
        elif a.cmd == "score":
            ref = _read(a.reference)
            check_reference(ref, source=a.reference)
            adapter = make_adapter(a.url, a.engine)
            try:
                cand = score_candidate(adapter, ref, label=a.label, check_tokenizer=not a.no_tokenizer_check,
                                       run_self_check=not a.no_self_check, provenance=_provenance(a, "lane"),
                                       template=pick_template(adapter, sim_template() if a.template == "sim" else None))
            finally:
                adapter.close()
            _write(a.out, cand)
            print(f"scored {cand['label']!r}: self-check {_noise(cand.get('self_check'))} -> {a.out}")
        else:
            if len(a.candidates) > 2:
                ap.error("compare takes one or two candidate files")
            ref = _read(a.reference)
            check_reference(ref, source=a.reference)
            res = compare(ref, [_read(x) for x in a.candidates], sources=a.candidates,
                          n_resamples=a.resamples, seed=a.seed)
            print(json.dumps(res, indent=1) if a.json else render_table(res))
    except (DriftFileError, ScoringError, ValueError) as exc:
        print(f"glmf drift {a.cmd}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
