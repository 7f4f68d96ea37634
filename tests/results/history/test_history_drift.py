"""The slow-drift test on known series: a planted drift (2 % worse per run, inside a 5 % tolerance)
is flagged after the stated number of runs, flat noisy series are not, and the false-alarm rate on
flat noise is what the README says."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_glmf.results.baseline import Tolerance
from pytest_glmf.results.history.drift import ALPHA, drift_table, drift_test, find_drifts


def planted(flat_runs: int, drifted: int, noise_pct: float, seed: int, step_pct: float = 2.0) -> list[float]:
    """tok/s: `flat_runs` runs around 50, then each run `step_pct` % below the one before."""
    rng = np.random.default_rng(seed)
    level = [50.0] * flat_runs + [50.0 * (1 - step_pct / 100) ** n for n in range(1, drifted + 1)]
    return [float(v * (1 + noise_pct / 100 * rng.standard_normal())) for v in level]


def first_flagged(series: list[float], direction: str = "higher") -> int | None:
    """The number of drifted runs after which the check first fires (series after 10 flat runs)."""
    for n in range(1, len(series) - 10 + 1):
        found = drift_test(series[:10 + n], direction, 5, Tolerance(rel_pct=5.0))
        if found is not None and found.flagged:
            return n
    return None


def test_no_single_step_of_the_planted_drift_crosses_the_tolerance() -> None:
    series = planted(10, 8, 0.0, 0)
    steps = [abs(b - a) / a * 100 for a, b in zip(series, series[1:])]
    assert max(steps) == pytest.approx(2.0) and max(steps) < 5.0


def test_a_clean_2_pct_per_run_drift_is_flagged_on_its_5th_worse_run() -> None:
    series = planted(10, 8, 0.0, 0)
    assert first_flagged(series) == 5
    found = drift_test(planted(10, 8, 0.1, 0)[:15], "higher", 5, Tolerance(rel_pct=5.0))
    # the last 5 all below the 5 before: the exact rank test's smallest p, 1/C(10,5)
    assert found.p_value == pytest.approx(1 / 252) and found.worse_pct == pytest.approx(100 * (1 - 0.98 ** 3), abs=0.3)


@pytest.mark.parametrize("seed", range(8))
def test_with_1_pct_noise_the_drift_is_flagged_after_4_to_6_runs_and_never_earlier(seed: int) -> None:
    # 4: noise can push the 4th run's median shift past 5 %; by the 6th a 2 %/run drift is always seen
    assert first_flagged(planted(10, 8, 1.0, seed)) in (4, 5, 6)


def test_latency_creeping_up_is_a_drift_too_and_improvement_is_not() -> None:
    ttft = [0.76 * (1.02 ** n if n > 0 else 1) for n in [0] * 10 + list(range(1, 6))]
    assert drift_test(ttft, "lower", 5, Tolerance(rel_pct=5.0)).flagged
    assert not drift_test(ttft, "higher", 5, Tolerance(rel_pct=5.0)).flagged   # rising tok/s is better


def test_a_noisy_flat_series_is_not_flagged() -> None:
    rng = np.random.default_rng(7)
    series = [50 * (1 + 0.03 * rng.standard_normal()) for _ in range(60)]
    assert not any(drift_test(series[:n], "higher", 5, Tolerance(rel_pct=5.0)).flagged for n in range(10, 61))


def test_false_alarm_rate_on_flat_noise() -> None:
    """Per check, on 4000 flat series each: 2 % noise ~0.01 %, 3 % ~0.14 %, 5 % ~0.6 % (bench/drift_power.py
    runs 20000); never above the exact rank test's level 2/252."""
    rng = np.random.default_rng(11)
    rates = {}
    for noise in (2.0, 3.0, 5.0):
        hits = sum(drift_test(list(50 * (1 + noise / 100 * rng.standard_normal(10))), "higher", 5,
                              Tolerance(rel_pct=5.0)).flagged for _ in range(4000))
        rates[noise] = hits / 4000
    assert rates[2.0] <= 0.002 and rates[3.0] <= 0.005 and rates[5.0] <= 2 / 252 + 0.004
    assert rates[2.0] <= rates[5.0]


def test_one_wild_run_is_not_a_drift() -> None:
    series = [50.0, 50.2, 49.9, 50.1, 49.8, 50.0, 50.3, 49.9, 50.1, 20.0]   # a single broken run
    found = drift_test(series, "higher", 5, Tolerance(rel_pct=5.0))
    assert found.p_value > ALPHA and not found.flagged


def test_too_short_or_constant_series_give_no_result() -> None:
    assert drift_test([50.0] * 9, "higher", 5) is None
    assert drift_test([7.0] * 10, "higher", 5) is None        # e.g. seats: all ties
    assert drift_test([1.0] * 6, "higher", 2) is None          # a window below 3 cannot reach p < 0.01


def test_the_tolerance_decides_what_shift_matters() -> None:
    series = planted(10, 5, 0.0, 0)                           # medians 5.9 % apart, p = 1/252
    assert drift_test(series, "higher", 5, Tolerance(rel_pct=5.0)).flagged
    assert not drift_test(series, "higher", 5, Tolerance(rel_pct=10.0)).flagged


def test_find_drifts_names_metric_key_and_runs() -> None:
    series = planted(10, 5, 0.0, 0)
    stored = {("curve", "users=48", "per_user_tok_s"): [(f"s{i}", v) for i, v in enumerate(series[:-1])],
              ("curve", "users=48", "ttft_p95_s"): [(f"s{i}", 0.76) for i in range(14)]}
    current = {("curve", "users=48", "per_user_tok_s"): series[-1], ("curve", "users=48", "ttft_p95_s"): 0.76,
               ("curve", "users=48", "spread_pct"): 99.0}
    (found,) = find_drifts(stored, current, {"curve": {"per_user_tok_s": "higher", "ttft_p95_s": "lower",
                                                        "spread_pct": "lower"}}, 5, lambda gate: None, "now")
    assert (found.gate, found.key, found.metric) == ("curve", "users=48", "per_user_tok_s")
    assert found.sessions == [f"s{i}" for i in range(5, 14)] + ["now"]
    header, _, row = [[c.strip() for c in line.split(" | ")] for line in drift_table([found]).splitlines()]
    assert header == ["metric", "median before", "median last", "change", "allowed", "p", "series (oldest first)"]
    assert row[:6] == ["curve.per_user_tok_s [users=48]", "50.0", "47.1", "-5.9 %", "5.0 %", "0.00375"]
    assert row[6].startswith("50.0 50.0 50.0 50.0 50.0 49.0 48.0 47.1")
