"""Drift statistics against values computed by hand (the arithmetic is written next to each)."""
import math

import numpy as np
import pytest
import scipy.stats

from pytest_glmf.gates.drift.stats import (
    PromptScores,
    abs_dlogp_summary,
    bootstrap_ratio,
    candidate_stats,
    pair_stats,
    percentile_ci,
    self_check,
    topk_kl_tail_bucket,
)

# Two prompts; the oracle's greedy tokens and its log-probs of them.
TOKENS = [[5, 7], [3, 3, 9]]
ORACLE = [PromptScores([-0.1, -0.5], [[5, 1], [7, 1]], [[-0.1, -3.0], [-0.5, -1.2]]),
          PromptScores([-0.2, -1.0, -0.05], [[3, 1], [3, 4], [9, 1]], [[-0.2, -2.0], [-1.0, -1.1], [-0.05, -4.0]])]
# Candidate A: dlogp = cand - oracle = [-0.2, +0.1] and [0, -0.6, -0.4]; top-1 differs at p0 t1 (8 != 7)
# and p1 t1 (4 != 3).
CAND_A = [PromptScores([-0.3, -0.4], [[5, 1], [8, 7]], [[-0.3, -2.0], [-0.3, -0.4]]),
          PromptScores([-0.2, -1.6, -0.45], [[3, 1], [4, 3], [9, 2]], [[-0.2, -2.0], [-0.5, -1.6], [-0.45, -2.0]])]
# Candidate B: dlogp = [0, -0.1] and [-0.3, 0, 0]; top-1 [5, 8] (same wrong token as A at p0 t1) and
# [3, 2, 2] (wrong at p1 t1 with a different token than A, and at p1 t2 where A is right).
CAND_B = [PromptScores([-0.1, -0.6], [[5, 1], [8, 7]], [[-0.1, -2.0], [-0.4, -0.6]]),
          PromptScores([-0.5, -1.0, -0.05], [[3, 1], [2, 3], [2, 9]], [[-0.5, -2.0], [-0.9, -1.0], [-0.01, -0.05]])]


def test_abs_dlogp_summary_by_hand():
    s = abs_dlogp_summary(np.array([-0.2, 0.1, 0.0, -0.6, -0.4]))
    # |d| sorted: 0, 0.1, 0.2, 0.4, 0.6
    assert s["mean_abs_dlogp"] == pytest.approx(1.3 / 5)            # 0.26
    assert s["median_abs_dlogp"] == pytest.approx(0.2)
    assert s["p90_abs_dlogp"] == pytest.approx(0.4 + 0.6 * 0.2)      # rank 0.9*4 = 3.6 -> 0.52
    assert s["p95_abs_dlogp"] == pytest.approx(0.4 + 0.8 * 0.2)      # rank 3.8 -> 0.56
    assert s["p99_abs_dlogp"] == pytest.approx(0.4 + 0.96 * 0.2)     # rank 3.96 -> 0.592
    assert s["max_abs_dlogp"] == pytest.approx(0.6)
    assert s["mean_dlogp"] == pytest.approx(-1.1 / 5)                # signed: -0.22


def test_topk_kl_tail_bucket_by_hand():
    # oracle top-3: p = 0.7, 0.2, 0.05; the candidate's logprob is known for tokens 5 and 6 only.
    kl = topk_kl_tail_bucket([5, 6, 7], [math.log(0.7), math.log(0.2), math.log(0.05)],
                             {5: math.log(0.5), 6: math.log(0.3)})
    # buckets {5}, {6}, tail: p = 0.7, 0.2, 0.1 ; q = 0.5, 0.3, 0.2
    hand = 0.7 * math.log(0.7 / 0.5) + 0.2 * math.log(0.2 / 0.3) + 0.1 * math.log(0.1 / 0.2)
    assert hand == pytest.approx(0.0851226, abs=1e-6)
    assert kl == pytest.approx(hand)
    assert topk_kl_tail_bucket([5, 6], [math.log(0.7), math.log(0.2)], {5: math.log(0.7), 6: math.log(0.2)}) == 0.0


def test_candidate_stats_by_hand():
    s = candidate_stats(TOKENS, ORACLE, CAND_A, n_resamples=2000, seed=1)
    assert s["n_prompts"] == 2 and s["n_tokens"] == 5
    assert s["mean_abs_dlogp"] == pytest.approx(0.26)
    assert s["median_abs_dlogp"] == pytest.approx(0.2)
    assert s["argmax_mismatch"] == pytest.approx(2 / 5)
    assert s["per_prompt_mean_abs_dlogp"] == pytest.approx([0.3 / 2, 1.0 / 3])
    assert s["per_prompt_argmax_mismatch"] == pytest.approx([0.5, 1 / 3])
    # mean dp = mean(exp(cand) - exp(oracle))
    dp = [math.exp(c) - math.exp(o) for c, o in zip([-0.3, -0.4, -0.2, -1.6, -0.45], [-0.1, -0.5, -0.2, -1.0, -0.05])]
    assert s["mean_dp"] == pytest.approx(sum(dp) / 5)
    assert s["rms_dp"] == pytest.approx(math.sqrt(sum(x * x for x in dp) / 5))
    # Two prompts (sums 0.3 and 1.0 over 2 and 3 tokens): a resample is {p0,p0} -> 0.6/4 = 0.15,
    # {p0,p1} -> 1.3/5 = 0.26, {p1,p1} -> 2.0/6 = 0.333; each extreme has probability 1/4 > 2.5 %,
    # so the 95 % percentile interval is exactly [0.15, 0.333].
    assert s["ci95"] == pytest.approx([0.15, 1 / 3])
    assert "tail-bucket" in s["kl_truncation"]
    assert s["kl_topk"] >= 0


def test_bootstrap_is_a_prompt_resample_reimplemented_directly():
    sums, counts = np.array([0.3, 1.0, 0.5]), np.array([2.0, 3.0, 4.0])
    got = bootstrap_ratio(sums, counts, n_resamples=5, seed=7)
    rng = np.random.default_rng(7)
    want = []
    for _ in range(5):
        pick = [int(rng.integers(0, 3)) for _ in range(3)]  # numpy draws row-major: same stream
        want.append(sum(sums[i] for i in pick) / sum(counts[i] for i in pick))
    assert got == pytest.approx(want)
    assert bootstrap_ratio(sums, counts, n_resamples=5, seed=7) == pytest.approx(got)  # seeded


def test_bootstrap_ci_equals_scipy_with_the_same_resamples():
    rng = np.random.default_rng(3)
    per_token = rng.exponential(0.1, size=(12, 8))          # 12 prompts x 8 tokens each
    ours = percentile_ci(bootstrap_ratio(per_token.sum(1), np.full(12, 8.0), n_resamples=999, seed=11))
    ref = scipy.stats.bootstrap((per_token.mean(1),), np.mean, n_resamples=999, method="percentile",
                                confidence_level=0.95, rng=np.random.default_rng(11))
    assert ours == pytest.approx([ref.confidence_interval.low, ref.confidence_interval.high], rel=1e-12)


def test_pair_stats_by_hand():
    p = pair_stats(TOKENS, ORACLE, CAND_A, CAND_B, n_resamples=2000, seed=1)
    # per-prompt mean |dlogp|: A = 0.15, 0.333 ; B = (0 + 0.1)/2 = 0.05, (0.3 + 0 + 0)/3 = 0.1 -> B closer on both
    assert p["wins"] == [0, 2] and p["ties"] == 0
    # gap = (sum|dB| - sum|dA|) / tokens = (0.4 - 1.3) / 5
    assert p["gap"] == pytest.approx(-0.18)
    assert p["gap_ci95"][1] < 0 and p["p_a_better"] == 0.0
    # flips A: p0t1 (8), p1t1 (4); flips B: p0t1 (8), p1t1 (2), p1t2 (2)
    assert p["both_flip_rate"] == pytest.approx(2 / 5)    # p0t1 and p1t1
    assert p["shared_flip_rate"] == pytest.approx(1 / 5)  # only p0t1 flips to the SAME wrong token
    assert p["shared_flip_share"] == pytest.approx(0.2 / ((0.4 + 0.6) / 2))   # 0.4
    # A vs B directly: top-1 differs at p1t1 (4 vs 2) and p1t2 (9 vs 2); |logpA - logpB| = 0.2,0.2,0.3,0.6,0.4
    assert p["a_vs_b"]["argmax_mismatch"] == pytest.approx(2 / 5)
    assert p["a_vs_b"]["mean_abs_dlogp"] == pytest.approx(1.7 / 5)


def test_self_check_exact_and_noise_floor():
    exact = self_check(ORACLE, [PromptScores.from_dict(x.to_dict()) for x in ORACLE])
    assert exact["exact"] is True and exact["self_abs_dlogp"] == 0.0 and exact["self_argmax_changes"] == 0
    noisy = [PromptScores([-0.1, -0.5], [[5, 1], [7, 1]], [[-0.1, -3.0], [-0.5, -1.2]]),
             PromptScores([-0.2, -1.0 + 1e-5, -0.05], [[3, 1], [4, 3], [9, 1]], [[-0.2, -2.0], [-1.0, -1.0], [-0.05, -4.0]])]
    n = self_check(ORACLE, noisy)
    assert n["exact"] is False
    assert n["self_abs_dlogp"] == pytest.approx(1e-5)
    assert n["self_mean_abs_dlogp"] == pytest.approx(1e-5 / 5)
    assert n["self_argmax_changes"] == 1


def test_misaligned_scores_are_refused():
    with pytest.raises(ValueError, match="prompt 1: 2 scored positions for 3 reference tokens"):
        candidate_stats(TOKENS, ORACLE, [CAND_A[0], PromptScores([-1, -1], [[3], [3]], [[-1], [-1]])])


def _answer(n: int, finish: str = "stop", reasoning: int | None = None, reasoning_chars: int = 0,
            content_chars: int = 10, tokens: list[str] | None = None) -> dict:
    return {"tokens": tokens if tokens is not None else [f"t{i}" for i in range(n)], "completion_tokens": n,
            "reasoning_tokens": reasoning, "finish_reason": finish, "content_chars": content_chars,
            "reasoning_chars": reasoning_chars}


def test_answer_stats_lengths_runaway_and_agreement_by_hand():
    from pytest_glmf.gates.drift.answers import answer_stats, first_divergence

    oracle = {"max_tokens": 8, "answers": [_answer(4, reasoning=2), _answer(6, reasoning=3), _answer(2, reasoning=1)]}
    cand = {"max_tokens": 8, "answers": [
        _answer(8, "length", reasoning=2),                                   # runaway, same first 4 tokens
        _answer(6, reasoning=3, tokens=["t0", "t1", "x", "t3", "t4", "t5"]),  # leaves at position 2
        _answer(2, reasoning=1)]}
    s = answer_stats(oracle, cand, agreement_tokens=3, n_resamples=200)
    assert s["output_length_ratio"] == pytest.approx(16 / 12) and s["runaway_share"] == pytest.approx(1 / 3)
    assert s["reasoning_length_ratio"] == 1.0 and s["content_length_ratio"] == pytest.approx(10 / 6)
    assert s["reasoning_length_unit"] == "tokens" and s["oracle_runaway_share"] == 0.0
    assert s["per_prompt_first_divergence"] == [4, 2, None]
    assert s["greedy_agreement"] == pytest.approx(2 / 3)   # prompt 0 agrees on its first 3, prompt 1 does not
    assert s["finish_reason_changed"] == pytest.approx(1 / 3) and s["finish_reason_changes"] == [[0, "stop", "length"]]
    assert first_divergence(["a"], ["a"]) is None and first_divergence(["a", "b"], ["a"]) == 1


def test_answer_stats_compare_characters_when_reasoning_tokens_are_not_counted():
    from pytest_glmf.gates.drift.answers import answer_stats

    oracle = {"max_tokens": 8, "answers": [_answer(4, reasoning_chars=20, content_chars=10)]}
    cand = {"max_tokens": 8, "answers": [_answer(6, reasoning_chars=40, content_chars=10)]}
    s = answer_stats(oracle, cand, n_resamples=50)
    assert s["reasoning_length_unit"] == "chars"
    assert s["reasoning_length_ratio"] == 2.0 and s["content_length_ratio"] == 1.0
    none = answer_stats({"max_tokens": 8, "answers": [_answer(4)]}, {"max_tokens": 8, "answers": [_answer(4)]},
                        n_resamples=50)
    assert none["reasoning_length_ratio"] is None and none["content_length_ratio"] == 1.0


def test_floor_stats_by_hand():
    from pytest_glmf.gates.drift.stats import PromptScores, floor_stats, self_check, self_check_mode

    def scores(*rows):
        return [PromptScores(list(r), [[1]] * len(r), [[0.0]] * len(r)) for r in rows]

    tokens = [[1, 1], [1, 1]]
    oracle, oracle2 = scores([-1.0, -2.0], [-1.0, -1.0]), scores([-1.2, -2.0], [-1.0, -0.8])
    cand, cand2 = scores([-1.5, -2.5], [-1.0, -1.0]), scores([-1.5, -2.5], [-1.0, -1.0])
    so, sc = self_check(oracle, oracle2), self_check(cand, cand2)
    assert so["per_prompt_floor_abs"] == pytest.approx([0.1, 0.1]) and sc["exact"]
    s = floor_stats(tokens, oracle, cand, so, sc, n_resamples=100)
    floor = math.sqrt((0.1 ** 2 + 0.0) / 2)            # per prompt sqrt((f_o^2 + f_c^2) / 2)
    assert s["floor_abs_dlogp"] == pytest.approx(floor)
    assert s["excess_abs_dlogp"] == pytest.approx((0.5 + 0.0) / 2 - floor)   # drift 0.5 and 0 per prompt
    sq = (0.25 + 0.0) / 2 - (0.02 + 0.02) / 2 / 2        # mean dlogp^2 - mean of (sq_o + sq_c) / 2
    assert s["excess_rms_dlogp"] == pytest.approx(math.sqrt(sq))
    assert self_check_mode("auto", so, sc) == "floor" and self_check_mode("auto", sc, sc) == "exact"
    assert self_check_mode("auto", None, sc) == "report" and self_check_mode("exact", so, sc) == "exact"
    assert floor_stats(tokens, oracle, cand, None, sc)["floor_abs_dlogp"] is None
