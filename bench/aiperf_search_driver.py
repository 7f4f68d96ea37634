"""AIPerf's own SLA search planner, driven over stdin/stdout by bench/capacity_search.py. Runs in
AIPerf's venv (never imports pytest_glmf); the measurements come from the bench, so both searches
probe the same servers.

    /tmp/aiperf-venv/bin/python bench/aiperf_search_driver.py

One process for many searches (AIPerf takes seconds to import). Each search starts with a line
{"search": [STYLE, LO, HI, ITL_P95_MS]}. STYLE: smooth_isotonic (the max-concurrency-under-sla recipe's default) or monotonic. The planner
is built by the recipe's own builders (MaxConcurrencyUnderSLA._build_<style>_output) with the
recipe's filter for --tpot-sla-ms (inter_token_latency p95 < ITL_P95_MS): per request, ITL =
(latency - TTFT) / (tokens - 1) = 1 / our per-user tok/s, so "p95 ITL < 1000 / 45 ms" is "95 % of
users at 45 tok/s or faster". Protocol, one JSON object per line: out {"ask": users}; in
{"runs": [{"itl_p95_ms": .., "itl_avg_ms": .., "tok_s": ..}, ...]} (one per measured run, each
a trial); at the end out {"done": boundary_summary, "reason": .., "probes": [users, ...]}.
"""
from __future__ import annotations

import json
import sys

from aiperf.common.models.export_models import JsonMetricResult
from aiperf.config.config import BenchmarkConfig
from aiperf.orchestrator.models import RunResult
from aiperf.orchestrator.search_planner.monotonic import MonotonicSLASearchPlanner
from aiperf.orchestrator.search_planner.smooth_isotonic import SmoothIsotonicSLAPlanner
from aiperf.search_recipes._base import SLAFilter
from aiperf.search_recipes._max_concurrency_under_sla import MaxConcurrencyUnderSLA

BASE = {"models": ["bench"], "endpoint": {"urls": ["http://127.0.0.1:1"], "streaming": True},
        "datasets": [{"name": "main", "type": "synthetic", "entries": 10}],
        "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 1, "requests": 10}]}


def main() -> None:
    for line in sys.stdin:
        style, lo, hi, itl_ms = json.loads(line)["search"]
        one_search(style, int(lo), int(hi), float(itl_ms))


def one_search(style: str, lo: int, hi: int, itl_ms: float) -> None:
    recipe = MaxConcurrencyUnderSLA()
    filters = [SLAFilter(metric_tag="inter_token_latency", stat="p95", op="lt", threshold=itl_ms)]
    build = {"smooth_isotonic": (recipe._build_smooth_isotonic_output, SmoothIsotonicSLAPlanner),
             "monotonic": (recipe._build_monotonic_output, MonotonicSLASearchPlanner)}[style]
    planner = build[1](BenchmarkConfig.model_validate(BASE), build[0](filters, lo, hi).adaptive_search)
    probes = []
    while True:
        asked = planner.ask()
        if asked is None:
            break
        _, variation = asked
        users = int(next(iter(variation.values.values())))
        probes.append(users)
        print(json.dumps({"ask": users}), flush=True)
        runs = json.loads(sys.stdin.readline())["runs"]
        results = [RunResult(label=f"{variation.label}_t{i}", success=True, trial_index=i, summary_metrics={
            "inter_token_latency": JsonMetricResult(unit="ms", p95=r["itl_p95_ms"], avg=r["itl_avg_ms"]),
            "output_token_throughput": JsonMetricResult(unit="tokens/sec", avg=r["tok_s"])})
            for i, r in enumerate(runs)]
        planner.tell(variation, results)
    print(json.dumps({"done": planner.boundary_summary(), "reason": planner.convergence_reason(), "probes": probes},
                     default=str), flush=True)


if __name__ == "__main__":
    main()
