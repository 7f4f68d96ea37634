"""The recipe's round-2 slots table on the simulator, from one multi-lane session: DFlash2 at 38
(7 seats), 48 (9 seats) and 120 (24 seats) state slots and autoregressive (640 slots, 128 seats) at
8, 16 and 24 users (the recipe's rows) and 32 (above the 120-slot lane's seats), on the recipe's
workload, each lane booted in turn, then the comparison (users as rows, lanes as columns, over-seat
rows flagged) and the crossover of every pair. About 10 minutes at --time-scale 1.0.

    .venv/bin/python bench/round2.py [--results DIR] [--time-scale 0.25]

It runs exactly:
    pytest --glmf-lanes bench/round2/lanes.yaml --glmf-thresholds bench/round2/thresholds.yaml \\
           --glmf-lane all -k "test_curve_row or test_boot_log_has_no_problems" --glmf-results DIR
and prints the load average before and after (the simulator shares the box with the client: on a
busy box rows come out noisier, and client-bound rows are excluded by the comparison, named).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "round2"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=None, help="results directory (default: a new temporary one)")
    ap.add_argument("--time-scale", default="0.25", help="simulator time scale (1.0: the recipe's GB300 speed)")
    args = ap.parse_args()
    results = args.results or tempfile.mkdtemp(prefix="glmf-round2-")
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
            "--glmf-lanes", str(HERE / "lanes.yaml"), "--glmf-thresholds", str(HERE / "thresholds.yaml"),
            "--glmf-lane", "all", "-k", "test_curve_row or test_boot_log_has_no_problems", "--glmf-results", results]
    before = os.getloadavg()
    t0 = time.time()
    rc = subprocess.call(argv, env={**os.environ, "GLMF_ROUND2_TIME_SCALE": args.time_scale}, cwd=tempfile.gettempdir())
    after = os.getloadavg()
    print(f"\nround2: {time.time() - t0:.0f} s, exit {rc}; load average before {before[0]:.2f} {before[1]:.2f} "
          f"{before[2]:.2f}, after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f} ({os.cpu_count()} cores); "
          f"results in {results}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
