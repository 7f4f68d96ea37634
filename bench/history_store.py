"""How long the history store takes for what a session does with it, on a store already holding
many runs: storing one run (the session's end), the history baseline and the slow-drift series
(once per process), and `glmf history` listing / CSV export.

    python bench/history_store.py [--runs 1000] [--store PATH_OR_URL]

Default store: a new SQLite file in a temporary directory; pass a postgresql:// URL (e.g. the one
`.ci/postgres up` prints) for PostgreSQL (it must be an empty database: the bench fills it).
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import statistics
import tempfile
import time
from pathlib import Path

from pytest_glmf.results.history import open_store, parse_location, queries
from pytest_glmf.results.history.schema import LaneKey


def doc(i: int) -> dict:
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=i)
    prov = {"lane": "batch", "engine": "sglang", "image": f"sglang:n{i}", "model_revision": "rev1",
            "gpu_name": "NVIDIA GB300", "gpu_count": 1, "started_at": when.isoformat(timespec="seconds")}
    rows = {f"users={u}": {"users": u, "per_user_tok_s": 50.0 - u / 10, "aggregate_tok_s": 50.0 * u,
                           "ttft_p50_s": 0.2, "ttft_p95_s": 0.76, "itl_p95_s": 0.02, "spread_pct": 2.0}
            for u in (1, 8, 16, 32, 48, 64, 96, 128)}
    return {"schema": 1, "session_id": f"{when:%Y%m%d-%H%M%S}-{i:04x}", "lane": {"name": "batch"},
            "provenance": prov, "gates": {"curve": rows, "boot": {"facts": {"max_running_requests": 128}}},
            "incomplete": [], "exitstatus": 0}


def ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1000:.1f} ms, max {max(samples) * 1000:.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--store")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    location = parse_location(args.store or str(tmp / "history.sqlite"), tmp, tmp)
    key = LaneKey("batch", "NVIDIA GB300 x1", "rev1", "sglang")
    print(f"store {location.display}, {args.runs} runs of 8 curve rows + boot ({8 * 7 + 1} metrics each); "
          f"load average {os.getloadavg()[0]:.2f}")
    with open_store(location) as store:
        t0 = time.perf_counter()
        for i in range(args.runs - 20):
            store.add_run(doc(i))
        print(f"fill: {(time.perf_counter() - t0) / (args.runs - 20) * 1000:.1f} ms per run")
    adds, opens = [], []
    for i in range(args.runs - 20, args.runs):   # what a session's end does: open, migrate, store, close
        t0 = time.perf_counter()
        with open_store(location) as store:
            opens.append(time.perf_counter() - t0)
            store.add_run(doc(i))
        adds.append(time.perf_counter() - t0)
    print(f"open + migrate check: {ms(opens)}; open + store one run + close: {ms(adds)}")
    with open_store(location) as store:
        for name, call in (("history baseline (last 5 passing)", lambda: queries.history_baseline(store, key, 5)),
                           ("drift series (last 10 complete)", lambda: queries.metric_series(store, key, 10)),
                           ("glmf history list (all runs)", lambda: queries.runs_table(store.runs())),
                           ("glmf history export (CSV, all)", lambda: queries.write_csv(store, io.StringIO()))):
            samples = []
            for _ in range(5):
                t0 = time.perf_counter()
                call()
                samples.append(time.perf_counter() - t0)
            print(f"{name}: {ms(samples)}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
