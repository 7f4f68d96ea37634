"""The drift table: the recipe's rows (mean/median/p95 |dlogp|, argmax flips, CIs) from a compare result or a
recorded section; a metric's column head is the spec's (`Metric.column`), the table writes the others."""
from __future__ import annotations

from typing import Any

from pytest_glmf.gates.drift.spec import SPEC
from pytest_glmf.text import fmt
from pytest_glmf.text import render_table as _table


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ci(ci: Any, pct: bool = False) -> str:
    if not ci:
        return "-"
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]" if pct else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def noise_text(sc: Any) -> str:
    if not sc:
        return "not run"
    if sc.get("exact"):
        return "0 (exact)"
    at = f" @{sc['concurrency']}" if sc.get("concurrency") else ""
    return (f"{sc.get('self_mean_abs_dlogp', 0.0):.3g} mean{at}, {sc['self_abs_dlogp']:.3g} max, "
            f"{sc['self_argmax_changes']} flips")


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
    cands = results.get("candidates") or {}
    for label, s in cands.items():
        rows.append([label, fmt(s["mean_abs_dlogp"]), _ci(s.get("ci95")), fmt(s["median_abs_dlogp"]),
                     fmt(s["p95_abs_dlogp"]), _pct(s["argmax_mismatch"]), fmt(s.get("kl_topk")),
                     noise_text(s.get("self_check")), fmt(s.get("floor_abs_dlogp")),
                     f"{fmt(s.get('excess_abs_dlogp'))} {_ci(s.get('excess_ci95'))}"
                     if s.get("excess_abs_dlogp") is not None else "-"])
    pair = results.get("pair")
    if pair:
        ab = pair["a_vs_b"]
        rows.append([f"{pair['a']} vs {pair['b']} (each other)", fmt(ab["mean_abs_dlogp"]), "",
                     fmt(ab["median_abs_dlogp"]), fmt(ab["p95_abs_dlogp"]), _pct(ab["argmax_mismatch"]), "", "", "", ""])
    col = SPEC.column_label
    head = [f"quant (vs {oracle})", col("mean_abs_dlogp"), "ci95 (prompts)", col("median_abs_dlogp"),
            col("p95_abs_dlogp"), col("argmax_mismatch"), col("kl_topk"), "self-check", col("floor_abs_dlogp"),
            f"{col('excess_abs_dlogp')} (ci95)"]
    lines = [_table(rows, head)]
    n: dict[str, Any] = next(iter(cands.values()), {})
    mode = results.get("self_check_mode") or n.get("self_check_mode")
    judged = {"exact": "exact mode: the floor is 0, nothing is subtracted",
              "floor": "floor mode: judged on the drift above the floor (excess = mean |dlogp| - floor)",
              "report": "report mode: the floor is shown, nothing is subtracted"}.get(mode or "",
                                                                                   "nothing is subtracted")
    lines.append(f"{n.get('n_prompts', '?')} prompts, {n.get('n_tokens', '?')} tokens, top-{ref.get('k', '?')}; "
                 f"oracle self-check: {noise_text(ref.get('self_check'))}; {judged}")
    answer_rows = [[label, fmt(s.get("output_length_ratio")), _ci(s.get("output_length_ratio_ci95")),
                    fmt(s.get("reasoning_length_ratio")), fmt(s.get("content_length_ratio")),
                    f"{_pct(s.get('runaway_share'))} (oracle {_pct(s.get('oracle_runaway_share'))})",
                    _pct(s.get("greedy_agreement")), fmt(s.get("first_divergence_median")),
                    _pct(s.get("finish_reason_changed"))]
                   for label, s in cands.items() if s.get("answers_n")]
    if answer_rows:
        first = next(s for s in cands.values() if s.get("answers_n"))
        lines.append(_table(answer_rows, [
            "greedy answers", col("output_length_ratio"), "ci95 (prompts)", col("reasoning_length_ratio"),
            col("content_length_ratio"), col("runaway_share"),
            f"first {first.get('agreement_tokens')} {col('greedy_agreement')}", "median 1st diff",
            col("finish_reason_changed")]))
        lines.append(f"{first['answers_n']} chat answers each, max_tokens {first.get('answer_max_tokens')}, "
                     f"temperature 0; ratios are candidate / oracle tokens")
    if pair:
        lines.append(
            f"{pair['a']} closer on {pair['wins'][0]} of {sum(pair['wins']) + pair['ties']} prompts "
            f"({pair['b']} on {pair['wins'][1]}); gap mean|dlogp|({pair['b']}) - ({pair['a']}) = {fmt(pair['gap'])}, "
            f"95% CI {_ci(pair['gap_ci95'])}{' (excludes 0)' if pair['gap_ci95'][0] > 0 or pair['gap_ci95'][1] < 0 else ' (includes 0)'}; "
            f"same wrong token in both: {_pct(pair['shared_flip_rate'])} of tokens "
            f"({_pct(pair['shared_flip_share'])} of the flips)")
    return "\n".join(lines)
