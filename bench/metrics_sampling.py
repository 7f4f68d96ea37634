"""What reading a GPU vLLM's /metrics during a run costs the loop that stamps the tokens (issue 31).

Runs one curve row against the truth server at GPU pace (625 tok/s per stream) serving the /metrics
vLLM 0.26.0 served on an H200 (tests/testing/data/vllm_0.26.0_h200_metrics.txt, 57 KB), twice:
with /metrics read the old way (fetched and fully parsed on the event loop every 0.2 s) and the
current way (runner.MetricsSampler: a thread, only the needed lines parsed). Prints per mode the
client's event-loop lag p99, the token events that shared a read, the error bound on per-user
tok/s and ITL p95 and the verdict, plus the parse cost of that text, with the load average.

    .venv/bin/python bench/metrics_sampling.py [--users 8] [--runs 3]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

from pytest_glmf.engine.introspect import parse_metrics
from pytest_glmf.load import LoadSettings, Workload, run_rows
from pytest_glmf.load import run as runner
from pytest_glmf.testing.truth_server import TruthServer

METRICS = Path(__file__).parents[1] / "tests" / "testing" / "data" / "vllm_0.26.0_h200_metrics.txt"


class OnTheLoop:
    """The old sampler: the /metrics fetch and the full parse run on the stamping loop."""

    def __init__(self, endpoints, every_s):
        self.endpoints, self.every_s, self.samples = endpoints, every_s, []
        self.task = None

    async def _run(self):
        while True:
            for t in self.endpoints.targets:
                status, body = await t.call("/metrics")
                parse_metrics(body.decode())
            self.samples.append((time.perf_counter(), None, None))
            await asyncio.sleep(self.every_s)

    def __enter__(self):
        self.task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc):
        self.task.cancel()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    text = METRICS.read_text()
    t0 = time.perf_counter()
    for _ in range(20):
        parse_metrics(text)
    full = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    for _ in range(20):
        parse_metrics(text, runner.MetricsSampler.NAMES)
    few = (time.perf_counter() - t0) / 20
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; /metrics {len(text):,} bytes: "
          f"full parse {full * 1e3:.1f} ms, the sampler's lines {few * 1e3:.2f} ms")
    print("mode      | run | lag p99 ms | shared reads | per-user ± % | ITL p95 ± % | verdict")
    real = runner.MetricsSampler
    for mode in ("on-loop", "thread"):
        runner.MetricsSampler = OnTheLoop if mode == "on-loop" else real   # type: ignore[misc,assignment]
        with TruthServer(ttft_ms=30, itl_ms=1.6, metrics_file=str(METRICS)) as ts:
            rows = run_rows(ts.url, Workload(prompts=["Summarise the briefing. " * 40], max_tokens=384),
                            LoadSettings(users=[a.users], runs=a.runs, client_retries=0))
        for i, run in enumerate(rows[0]["per_run"], 1):
            c, e = run["client"], run["client"]["error"]
            print(f"{mode:9} | {i:3} | {c['lag_p99_s'] * 1e3:10.2f} | {e['shared_events']:5} of {c['token_events']:5} "
                  f"| {e['per_user_tok_s']['bound_pct']:12.2f} | {e['itl_p95_s']['bound_pct']:11.2f} | "
                  f"{'client-bound' if c['client_bound'] else 'valid'}")
    runner.MetricsSampler = real   # type: ignore[misc]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
