"""The drift table: the recipe's rows (mean/median/p95 |dlogp|, argmax flips, CIs) from a compare result or a recorded section."""
from __future__ import annotations

from typing import Any

from pytest_glmf.gates.verdict import fmt
from pytest_glmf.gates.verdict import render_table as _table


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ci(ci: Any, pct: bool = False) -> str:
    if not ci:
        return "-"
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]" if pct else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def noise_text(sc: Any) -> str:
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
                     noise_text(s.get("self_check"))])
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
                 f"oracle self-check: {noise_text(ref.get('self_check'))}; nothing is subtracted")
    if pair:
        lines.append(
            f"{pair['a']} closer on {pair['wins'][0]} of {sum(pair['wins']) + pair['ties']} prompts "
            f"({pair['b']} on {pair['wins'][1]}); gap mean|dlogp|({pair['b']}) - ({pair['a']}) = {fmt(pair['gap'])}, "
            f"95% CI {_ci(pair['gap_ci95'])}{' (excludes 0)' if pair['gap_ci95'][0] > 0 or pair['gap_ci95'][1] < 0 else ' (includes 0)'}; "
            f"same wrong token in both: {_pct(pair['shared_flip_rate'])} of tokens "
            f"({_pct(pair['shared_flip_share'])} of the flips)")
    return "\n".join(lines)
