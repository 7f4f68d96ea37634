"""How well the slow-drift check (pytest_glmf/results/history/drift.py) works, on simulated series.

    python bench/drift_power.py [--trials 1000] [--window 5] [--tolerance 5] [--step 2]

Detection: 10 flat runs, then each run `--step` % worse; the number of worse runs after which the
check first fires (5th/50th/95th percentile over the trials), per run-to-run noise level.
False alarms: flat series of 2K runs; the share of checks that fire, per noise level (20 x trials).
The numbers quoted in drift.py's docstring and the README come from the defaults.
"""
from __future__ import annotations

import argparse

import numpy as np

from pytest_glmf.results.baseline import Tolerance
from pytest_glmf.results.history.drift import drift_test


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--tolerance", type=float, default=5.0, help="baseline rel_pct")
    ap.add_argument("--step", type=float, default=2.0, help="drift per run, %%")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    tol, k = Tolerance(rel_pct=args.tolerance), args.window
    print(f"window K={k}, tolerance {args.tolerance} %, drift {args.step} %/run")
    print("noise %  | detected after N worse runs (p5 / p50 / p95) | never within 20")
    for noise in (0.5, 1.0, 2.0, 3.0):
        delays = []
        for _ in range(args.trials):
            series = list(50 * (1 + noise / 100 * rng.standard_normal(2 * k)))
            found_at = None
            for n in range(1, 21):
                series.append(50 * (1 - args.step / 100) ** n * (1 + noise / 100 * rng.standard_normal()))
                found = drift_test(series, "higher", k, tol)
                if found is not None and found.flagged:
                    found_at = n
                    break
            delays.append(found_at or 99)
        p5, p50, p95 = np.percentile(delays, [5, 50, 95])
        print(f"{noise:7.1f}  | {p5:.0f} / {p50:.0f} / {p95:.0f}{'':29}| {sum(d == 99 for d in delays)}")
    print("\nnoise %  | false alarms per check on flat series")
    for noise in (1.0, 2.0, 3.0, 5.0, 8.0):
        n = 20 * args.trials
        hits = sum(drift_test(list(50 * (1 + noise / 100 * rng.standard_normal(2 * k))), "higher", k, tol).flagged
                   for _ in range(n))
        print(f"{noise:7.1f}  | {hits / n:.4%} ({hits} of {n})")


if __name__ == "__main__":
    main()
