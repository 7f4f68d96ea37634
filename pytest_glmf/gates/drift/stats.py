"""Drift statistics: pure functions over teacher-forced scores. No I/O, no printing.

Inputs are per prompt, aligned with the oracle's greedy continuation (position t of prompt p is
the oracle's token `tokens[p][t]`, scored given the prompt and tokens[p][:t]):

- `oracle` / candidate `PromptScores`: `logprobs[t]` = log-prob of the oracle's token, and the
  engine's own top-k (`top_ids[t]`, `top_logprobs[t]`, best first).

Definitions (one place, so every report means the same thing):

- dlogp = candidate logprob - oracle logprob of the oracle's token (negative: the candidate likes
  the oracle's token less). |dlogp| percentiles use numpy's linear interpolation between order
  statistics (the same rule llama.cpp's KL-divergence statistics use).
- argmax mismatch: the candidate's top-1 id differs from the oracle's token (the oracle's greedy
  choice, so this is "the candidate would have generated a different token here").
- top-k KL(oracle || candidate), TAIL-BUCKET truncation: both distributions are coarsened to the
  oracle's top-k tokens whose candidate log-prob is known (the candidate's top-k or the forced
  token) plus one bucket holding all remaining mass (1 - the known mass, on each side). This is
  the exact KL of the coarsened pair, hence a LOWER BOUND of the full-vocabulary KL (data
  processing inequality); nothing is renormalised.
- Means are token-weighted (every scored token counts once, like the recipe's 0.136); the 95 %
  CI resamples PROMPTS with replacement (tokens within a prompt are correlated, so resampling
  tokens gives intervals that are too narrow) and recomputes the token-weighted
  mean of the resample (a cluster bootstrap, percentile method, seeded).
- Pair statistics (A, B scored against the same reference): per-prompt wins on mean |dlogp|,
  gap = mean|dlogp|(B) - mean|dlogp|(A) (positive: A is closer) with a paired bootstrap CI over
  prompts (the same resampled prompts for both), shared flip = both candidates' top-1 differ from
  the oracle token AND equal each other, and the shared share = shared flip rate / mean of the
  two flip rates (the recipe: 10.3 % of 15.6 % and 15.9 % -> "two-thirds is shared").
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

KL_TRUNCATION = ("tail-bucket: oracle top-k tokens with a known candidate logprob + one bucket for "
                 "the remaining mass on each side; a lower bound of the full-vocabulary KL")
PERCENTILE_METHOD: Final = "linear"
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 20260911        # the recipe's date: any fixed seed works, this one is documented


@dataclass
class PromptScores:
    """One prompt's scores at the oracle-token positions (plain lists, JSON-able)."""

    logprobs: list[float]
    top_ids: list[list[int]]
    top_logprobs: list[list[float]]

    def __len__(self) -> int:
        return len(self.logprobs)

    def top1(self) -> np.ndarray:
        return np.array([ids[0] if ids else -1 for ids in self.top_ids], dtype=np.int64)

    def to_dict(self) -> dict[str, Any]:
        return {"logprobs": self.logprobs, "top_ids": self.top_ids, "top_logprobs": self.top_logprobs}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PromptScores":
        return cls([float(x) for x in d["logprobs"]], [list(map(int, r)) for r in d["top_ids"]],
                   [list(map(float, r)) for r in d["top_logprobs"]])


# ---------------------------------------------------------------------------------------------
# Elementary statistics


def abs_dlogp_summary(dlogp: np.ndarray) -> dict[str, float]:
    """Distribution of |dlogp| over all tokens, plus the signed mean and llama.cpp's dp figures."""
    d = np.asarray(dlogp, dtype=float)
    a = np.abs(d)
    if a.size == 0:
        return {}
    q = np.percentile(a, [50, 90, 95, 99, 99.9], method=PERCENTILE_METHOD)
    return {
        "mean_abs_dlogp": float(a.mean()),
        "median_abs_dlogp": float(q[0]),
        "p90_abs_dlogp": float(q[1]),
        "p95_abs_dlogp": float(q[2]),
        "p99_abs_dlogp": float(q[3]),
        "p999_abs_dlogp": float(q[4]),
        "max_abs_dlogp": float(a.max()),
        "mean_dlogp": float(d.mean()),
    }


def dp_summary(oracle_logprobs: np.ndarray, cand_logprobs: np.ndarray) -> dict[str, float]:
    """llama.cpp's token-probability figures: dp = p_cand - p_oracle of the oracle's token."""
    dp = np.exp(np.asarray(cand_logprobs, float)) - np.exp(np.asarray(oracle_logprobs, float))
    return {"mean_dp": float(dp.mean()), "rms_dp": float(np.sqrt(np.mean(dp * dp)))}


def topk_kl_tail_bucket(oracle_ids: Sequence[int], oracle_lps: Sequence[float],
                        cand_known: dict[int, float], floor: float = 1e-12) -> float:
    """KL(oracle || candidate) over the oracle's top-k tokens whose candidate logprob is known,
    plus one tail bucket (see module docstring). `floor` guards a tail mass that rounding drives
    to <= 0."""
    p_known, q_known = [], []
    for tid, lp in zip(oracle_ids, oracle_lps):
        if tid in cand_known:
            p_known.append(math.exp(lp))
            q_known.append(math.exp(cand_known[tid]))
    kl = sum(p * (math.log(p) - math.log(q)) for p, q in zip(p_known, q_known) if p > 0)
    p_tail = max(1.0 - sum(p_known), 0.0)
    q_tail = max(1.0 - sum(q_known), floor)
    if p_tail > floor:
        kl += p_tail * (math.log(p_tail) - math.log(q_tail))
    return max(kl, 0.0)  # the exact value is >= 0; clip float noise of a near-identical pair


def per_prompt_means(values: Sequence[np.ndarray]) -> np.ndarray:
    return np.array([float(np.mean(v)) if len(v) else float("nan") for v in values])


def bootstrap_ratio(numer: np.ndarray, denom: np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> np.ndarray:
    """Resample prompts with replacement; return sum(numer[idx]) / sum(denom[idx]) per resample.

    numer[p] is prompt p's sum of a per-token quantity, denom[p] its token count, so the
    statistic is the token-weighted mean of the resampled prompts. The indices are drawn exactly
    as scipy.stats.bootstrap draws them (`rng.integers(0, n, (n_resamples, n))`), so with equal
    token counts the result equals scipy's percentile bootstrap of the per-prompt means."""
    numer = np.asarray(numer, float)
    denom = np.asarray(denom, float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(numer), (n_resamples, len(numer)))
    return numer[idx].sum(axis=1) / denom[idx].sum(axis=1)


def percentile_ci(samples: np.ndarray, level: float = 0.95) -> list[float]:
    alpha = (1.0 - level) / 2.0
    lo, hi = np.percentile(samples, [100 * alpha, 100 * (1 - alpha)], method=PERCENTILE_METHOD)
    return [float(lo), float(hi)]


# ---------------------------------------------------------------------------------------------
# One candidate against the reference


def _check_aligned(tokens: Sequence[Sequence[int]], *scores: Sequence[PromptScores]) -> None:
    for s in scores:
        if len(s) != len(tokens):
            raise ValueError(f"{len(s)} scored prompts for {len(tokens)} reference prompts")
        for p, (t, ps) in enumerate(zip(tokens, s)):
            if len(ps) != len(t):
                raise ValueError(f"prompt {p}: {len(ps)} scored positions for {len(t)} reference tokens")


def candidate_stats(tokens: Sequence[Sequence[int]], oracle: Sequence[PromptScores],
                    cand: Sequence[PromptScores], *, n_resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Every per-candidate statistic of the module docstring, as a JSON-able dict."""
    _check_aligned(tokens, oracle, cand)
    keep = [p for p, t in enumerate(tokens) if len(t)]  # a prompt with no continuation has nothing to say
    dl = [np.asarray(cand[p].logprobs, float) - np.asarray(oracle[p].logprobs, float) for p in keep]
    flips = [(cand[p].top1() != np.asarray(tokens[p], np.int64)).astype(float) for p in keep]
    kls = [np.array([topk_kl_tail_bucket(oracle[p].top_ids[t], oracle[p].top_logprobs[t],
                                         _known(cand[p], t, tokens[p][t]))
                     for t in range(len(tokens[p]))]) for p in keep]
    all_dl = np.concatenate(dl)
    counts = np.array([len(x) for x in dl], float)
    abs_sums = np.array([np.abs(x).sum() for x in dl])
    flip_sums = np.array([f.sum() for f in flips])
    all_kl = np.concatenate(kls)
    out: dict[str, Any] = {"n_prompts": len(keep), "n_tokens": int(counts.sum())}
    out.update(abs_dlogp_summary(all_dl))
    out.update(dp_summary(np.concatenate([oracle[p].logprobs for p in keep]),
                          np.concatenate([cand[p].logprobs for p in keep])))
    out["argmax_mismatch"] = float(flip_sums.sum() / counts.sum())
    out["kl_topk"] = float(all_kl.mean())
    out["kl_topk_p95"] = float(np.percentile(all_kl, 95, method=PERCENTILE_METHOD))
    out["kl_truncation"] = KL_TRUNCATION
    out["ci95"] = percentile_ci(bootstrap_ratio(abs_sums, counts, n_resamples=n_resamples, seed=seed))
    out["argmax_mismatch_ci95"] = percentile_ci(
        bootstrap_ratio(flip_sums, counts, n_resamples=n_resamples, seed=seed))
    out["per_prompt_mean_abs_dlogp"] = [float(x) for x in abs_sums / counts]
    out["per_prompt_argmax_mismatch"] = [float(x) for x in flip_sums / counts]
    out["bootstrap"] = {"resamples": n_resamples, "seed": seed, "unit": "prompt",
                        "method": "percentile, token-weighted mean of resampled prompts"}
    return out


def _known(c: PromptScores, t: int, forced_token: int) -> dict[int, float]:
    known = dict(zip(c.top_ids[t], c.top_logprobs[t]))
    known[int(forced_token)] = c.logprobs[t]
    return known


# ---------------------------------------------------------------------------------------------
# Two candidates against the same reference


def pair_stats(tokens: Sequence[Sequence[int]], oracle: Sequence[PromptScores],
               a: Sequence[PromptScores], b: Sequence[PromptScores], *,
               n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Which of A and B is closer to the oracle, how sure we are, and how much they share."""
    _check_aligned(tokens, oracle, a, b)
    keep = [p for p, t in enumerate(tokens) if len(t)]
    counts = np.array([len(tokens[p]) for p in keep], float)
    abs_a = [np.abs(np.asarray(a[p].logprobs) - np.asarray(oracle[p].logprobs)) for p in keep]
    abs_b = [np.abs(np.asarray(b[p].logprobs) - np.asarray(oracle[p].logprobs)) for p in keep]
    mean_a, mean_b = per_prompt_means(abs_a), per_prompt_means(abs_b)
    gap_sums = np.array([x.sum() for x in abs_b]) - np.array([x.sum() for x in abs_a])
    gaps = bootstrap_ratio(gap_sums, counts, n_resamples=n_resamples, seed=seed)
    tok = [np.asarray(tokens[p], np.int64) for p in keep]
    top_a = [a[p].top1() for p in keep]
    top_b = [b[p].top1() for p in keep]
    flip_a = np.concatenate([ta != t for ta, t in zip(top_a, tok)])
    flip_b = np.concatenate([tb != t for tb, t in zip(top_b, tok)])
    same = np.concatenate([ta == tb for ta, tb in zip(top_a, top_b)])
    shared = flip_a & flip_b & same
    n = counts.sum()
    mean_flip = (flip_a.mean() + flip_b.mean()) / 2
    ab = np.concatenate([np.asarray(a[p].logprobs) - np.asarray(b[p].logprobs) for p in keep])
    a_vs_b = abs_dlogp_summary(ab)
    a_vs_b["argmax_mismatch"] = float((~same).mean())
    return {
        "wins": [int((mean_a < mean_b).sum()), int((mean_b < mean_a).sum())],
        "ties": int((mean_a == mean_b).sum()),
        "gap": float(gap_sums.sum() / n),
        "gap_ci95": percentile_ci(gaps),
        "p_a_better": float((gaps > 0).mean()),
        "shared_flip_rate": float(shared.mean()),
        "both_flip_rate": float((flip_a & flip_b).mean()),
        "shared_flip_share": float(shared.mean() / mean_flip) if mean_flip > 0 else None,
        "a_vs_b": {k: a_vs_b[k] for k in ("mean_abs_dlogp", "median_abs_dlogp", "p95_abs_dlogp",
                                          "argmax_mismatch")},
        "gap_definition": "mean|dlogp|(B) - mean|dlogp|(A), token-weighted; positive: A is closer",
    }


# ---------------------------------------------------------------------------------------------
# Instrument self-check


def self_check(first: Sequence[PromptScores], second: Sequence[PromptScores]) -> dict[str, Any]:
    """The same tokens scored twice on one server: exact zero means the instrument adds no noise.
    A non-zero result is the noise floor (`floor_stats`). Per prompt p, with x1, x2 the two
    scorings' log-probs at its T_p positions: `per_prompt_floor_abs[p]` = mean_t |x1 - x2| and
    `per_prompt_floor_sq[p]` = mean_t (x1 - x2)^2."""
    if len(first) != len(second) or any(len(x) != len(y) for x, y in zip(first, second)):
        raise ValueError("self-check: the two scoring passes have different shapes")
    diffs = [np.asarray(x.logprobs, float) - np.asarray(y.logprobs, float) for x, y in zip(first, second)]
    d = np.concatenate(diffs or [np.zeros(0)])
    top_changes = sum(int((x.top1() != y.top1()).sum()) for x, y in zip(first, second))
    a = np.abs(d)
    return {
        "self_abs_dlogp": float(a.max()) if a.size else 0.0,   # the worst position: exact means 0.0
        "self_mean_abs_dlogp": float(a.mean()) if a.size else 0.0,
        "self_median_abs_dlogp": float(np.median(a)) if a.size else 0.0,
        "self_argmax_changes": top_changes,
        "exact": bool(a.size == 0 or (a.max() == 0.0 and top_changes == 0)),
        "n_tokens": int(a.size),
        "per_prompt_floor_abs": [float(np.abs(x).mean()) if x.size else 0.0 for x in diffs],
        "per_prompt_floor_sq": [float((x * x).mean()) if x.size else 0.0 for x in diffs],
    }


# ---------------------------------------------------------------------------------------------
# Drift above the noise floor


def self_check_mode(setting: str, oracle_self_check: dict[str, Any] | None,
                    cand_self_check: dict[str, Any] | None) -> str:
    """The mode that judges: `setting` unless auto; auto is exact when both self-checks are exact,
    floor when one is not, report when one was not run."""
    if setting != "auto":
        return setting
    if not oracle_self_check or not cand_self_check:
        return "report"
    return "exact" if oracle_self_check.get("exact") and cand_self_check.get("exact") else "floor"


def _prompt_floors(sc: dict[str, Any] | None, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    if not sc:
        return None
    if sc.get("exact"):   # an exact self-check: a floor of exactly 0 (older files lack the per-prompt lists)
        return np.zeros(n), np.zeros(n)
    fa, fs = sc.get("per_prompt_floor_abs"), sc.get("per_prompt_floor_sq")
    if fa is None or fs is None or len(fa) != n or len(fs) != n:
        return None
    return np.asarray(fa, float), np.asarray(fs, float)


def floor_stats(tokens: Sequence[Sequence[int]], oracle: Sequence[PromptScores], cand: Sequence[PromptScores],
                oracle_self_check: dict[str, Any] | None, cand_self_check: dict[str, Any] | None, *,
                n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The noise floor and the drift above it (module docstring of api.py: "the floor").

    With o, c the true log-probs of oracle and candidate, each scoring adds independent zero-mean
    noise: O = o + e, C = c + g, and the drift dlogp = C - O = delta + (g - e), delta = c - o the
    shift we want. Per prompt p (T_p positions):
      f_o[p], f_c[p] = mean_t |X1 - X2| of the oracle's / candidate's two scorings (self_check);
      floor[p] = sqrt((f_o[p]^2 + f_c[p]^2) / 2): the expected mean |g - e| of one oracle and one
        candidate scoring, exact when both noises are Gaussian (|N(0, s^2)| scales with s and
        var(g - e) = (var(X1 - X2)_oracle + var(X1 - X2)_candidate) / 2) or share one law;
      excess_abs[p] = mean_t |dlogp| - floor[p];
      excess_sq[p] = mean_t dlogp^2 - (sq_o[p] + sq_c[p]) / 2, sq = mean_t (X1 - X2)^2.
    Token-weighted over prompts; 95 % CIs resample PROMPTS, the same draw for drift and floor
    (a paired bootstrap: the floor's own uncertainty is in the interval).

    What they estimate: E|delta + n| lies between |delta| (Jensen, zero-mean n) and |delta| + E|n|
    (triangle inequality), so the noise-free mean |dlogp| is bracketed by `excess_abs_dlogp` (a
    LOWER bound: exact when delta = 0, short by up to the floor where |delta| >> noise) and
    `mean_abs_dlogp` (an UPPER bound). `excess_rms_dlogp` = sqrt(max(0, excess_sq)) is unbiased
    in the square for any noise law (E(delta + n)^2 = delta^2 + E n^2): it recovers the RMS of the
    shift (a constant shift D gives D whatever the floor); clipping at 0 biases it up near 0.
    A pure-noise candidate (delta = 0) has both excesses ~0. None when a self-check is missing."""
    _check_aligned(tokens, oracle, cand)
    keep = [p for p, t in enumerate(tokens) if len(t)]
    n_all = len(tokens)
    fo, fc = _prompt_floors(oracle_self_check, n_all), _prompt_floors(cand_self_check, n_all)
    if fo is None or fc is None:
        return {"floor_abs_dlogp": None, "excess_abs_dlogp": None, "excess_rms_dlogp": None,
                "floor_ci95": None, "excess_ci95": None, "excess_rms_ci95": None}
    dl = [np.asarray(cand[p].logprobs, float) - np.asarray(oracle[p].logprobs, float) for p in keep]
    counts = np.array([len(x) for x in dl], float)
    abs_means = np.array([np.abs(x).mean() for x in dl])
    sq_means = np.array([(x * x).mean() for x in dl])
    floor = np.sqrt((fo[0][keep] ** 2 + fc[0][keep] ** 2) / 2)
    floor_sq = (fo[1][keep] + fc[1][keep]) / 2
    boot = {"n_resamples": n_resamples, "seed": seed}
    excess_sq = bootstrap_ratio(counts * (sq_means - floor_sq), counts, **boot)
    total = counts.sum()
    rms = float(np.sum(counts * (sq_means - floor_sq)) / total)
    return {
        "floor_abs_dlogp": float(np.sum(counts * floor) / total),
        "floor_ci95": percentile_ci(bootstrap_ratio(counts * floor, counts, **boot)),
        "oracle_floor_abs_dlogp": float(np.sum(counts * fo[0][keep]) / total),
        "candidate_floor_abs_dlogp": float(np.sum(counts * fc[0][keep]) / total),
        "excess_abs_dlogp": float(np.sum(counts * (abs_means - floor)) / total),
        "excess_ci95": percentile_ci(bootstrap_ratio(counts * (abs_means - floor), counts, **boot)),
        "excess_rms_dlogp": math.sqrt(max(rms, 0.0)),
        "excess_rms_ci95": [math.sqrt(max(x, 0.0)) for x in percentile_ci(excess_sq)],
        "per_prompt_floor_abs_dlogp": [float(x) for x in floor],
        "floor_definition": "per prompt sqrt((f_oracle^2 + f_candidate^2) / 2), f = mean |dlogp| between two "
                            "scorings of the same ids on one server; excess = drift - floor, paired bootstrap "
                            "over prompts",
    }
