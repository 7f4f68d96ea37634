"""Benchmark of sharded load: the curve's client at 1, 2 ... all worker processes against the
ground-truth SSE server (pytest_glmf/testing/truth_server.py), in one run, as ratios.

    .venv/bin/python bench/shard.py                           # 1 and all workers, ramp to 1,000 streams
    .venv/bin/python bench/shard.py --workers 1,2 --ramp 256,512,768,1000 --json /tmp/shard.json

The truth server is pinned to the last core ("given one core"); the one-worker client runs in this
process pinned to core 0 (the curve's default path), worker k of a sharded client is pinned to
core (k - 1) mod cores, so on a 2-core box the second worker shares the truth server's core.
Reported, with the load average beside each table (other load on the box shows there first):

  per-core    token events per second per client core = token events / client CPU seconds inside
              the timed window (every worker's, summed), at `--per-worker` streams per worker: the
              sharded client's cost per event against one worker's (goal: within 10 %)
  ramp        per worker count, each stream count of --ramp until the client's self-check first
              flags a run (per worker and whole: lag with merged events, CPU, start); the largest
              green count is the most this box feeds with that many workers
  fidelity    at the largest green count of the most workers (and the same count with one worker):
              TTFT bias p50/p99 against the truth (the server's kernel receive time of the request
              to its send of the first content chunk), per-user tok/s error, recv lag, as
              bench/fidelity.py defines them
  the row     --row streams (1,000) with one worker and with all: green or client-bound, and why
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity import PinnedTruth, summarize, table  # noqa: E402  (the sibling bench script)

from pytest_glmf.load import (  # noqa: E402  # noqa: E402
    Endpoints,  # noqa: E402
    LoadSettings,
    WorkerPool,
    Workload,
    available_cores,
    event_loop_factory,
    measure_run,
    percentile,  # noqa: E402
)
from pytest_glmf.testing.truth_server import true_metrics  # noqa: E402
from pytest_glmf.text import render_table  # noqa: E402

PROMPT = "Write a synthesis of the briefing. " * 40


def load() -> str:
    return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg())


def pin_pool(pool: WorkerPool | None, cores: int, where: str) -> None:
    """spread: worker k on core (k - 1) mod cores (the last one shares the truth server's core);
    first: every worker on core 0 (the client never runs on the truth server's core)."""
    if pool is not None and hasattr(os, "sched_setaffinity") and cores > 1:
        for k, pid in enumerate(pool.pids):
            os.sched_setaffinity(pid, {k % cores} if where == "spread" else {0})


def one_run(ts: PinnedTruth, streams: int, tokens: int, pool: WorkerPool | None) -> dict[str, Any]:
    """A short warm pass and one measured run of `streams` at once; the truth of the measured run."""
    workload = Workload(prompts=[PROMPT], max_tokens=tokens)
    settings = LoadSettings(users=[streams], runs=1, metrics_sample_s=0)
    endpoints = Endpoints.from_urls(ts.url)

    async def go():
        await measure_run(endpoints, [workload.body("warm", u, 0) for u in range(min(streams, 16))], settings,
                          workload.path, pool)
        ts.reset()
        return await measure_run(endpoints, [workload.body("m", u, 0) for u in range(streams)], settings,
                                 workload.path, pool)

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        out = runner.run(go())
    return {"out": out, "truth": ts.truth(), "load": os.getloadavg()[0]}


def per_core(run: dict[str, Any]) -> dict[str, Any]:
    c = run["out"]["client"]
    events = c["token_events"]
    cpu = sum(w["cpu_s"] for w in c["per_worker"])
    wall = max(w["wall_s"] for w in c["per_worker"])
    return {"workers": c["workers"], "streams": len(run["out"]["records"]), "token_events": events,
            "events_per_s": events / wall, "client_cpu_s": cpu, "events_per_core_s": events / cpu if cpu else None,
            "cpu_us_per_event": cpu / events * 1e6 if events else None, "busiest_cpu_frac": c["cpu_frac"],
            "client_bound": c["client_bound"], "load": run["load"]}


def fidelity(name: str, run: dict[str, Any]) -> dict[str, Any]:
    out, truth = run["out"], run["truth"]
    by_id = {t["id"]: t for t in truth}
    recs = [r for r in out["records"] if r.response_id in by_id]
    from pytest_glmf.load import per_user_tok_s, run_metrics, ttft_s

    pairs = [(by_id[r.response_id], ttft_s(r), per_user_tok_s(r), r.completion_tokens) for r in recs]
    recv_lag = [r.t_first_token_s - true_metrics(by_id[r.response_id])["t_first_s"] for r in recs]
    c = out["client"]
    cpu = sum(w["cpu_s"] for w in c["per_worker"])
    row = summarize(name, len(out["records"]), pairs, truth, cpu, c["token_events"], c,
                    run_metrics(out["records"])["aggregate_tok_s"], min(r.t_send_s for r in out["records"]),
                    {"workers": c["workers"], "load": run["load"],
                     "true_tok_s_p50": percentile([true_metrics(t)["tok_s"] for t in truth], 50),
                     "notes": "; ".join(c["notes"])[:300]}, recv_lag)
    return row


def main(argv: list[str] | None = None) -> int:
    cores = available_cores()
    p = argparse.ArgumentParser(prog="bench/shard.py")
    p.add_argument("--workers", default=f"1,{cores}" if cores > 1 else "1", help="worker counts (default 1 and all)")
    p.add_argument("--per-worker", type=int, default=160, help="streams per worker for the per-core figure")
    p.add_argument("--ramp", default="256,384,512,640,768,896,1000")
    p.add_argument("--row", type=int, default=1000, help="the issue's row: this many streams at 100 tok/s")
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0, help="10 ms = 100 tok/s per stream")
    p.add_argument("--worker-cores", choices=("spread", "first"), default="spread",
                   help="spread: worker k on core k-1 mod cores; first: all workers on core 0")
    p.add_argument("--truth-nice", type=int, default=0,
                   help="run the truth server at this nice level (negative: it owns its core, a client worker "
                        "there only gets its idle time; needs CAP_SYS_NICE)")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    counts = [int(w) for w in a.workers.split(",") if w]
    ramp = [int(u) for u in a.ramp.split(",") if u]
    result: dict[str, Any] = {"cores": cores, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                              "load_start": os.getloadavg(), "per_core": [], "ramp": {}, "fidelity": [], "row": []}
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if hasattr(os, "sched_setaffinity") and cores > 1:
        os.sched_setaffinity(0, {0})          # this process (the one-worker client, the pool's parent): core 0
    truth = PinnedTruth(ttft_ms=a.ttft_ms, itl_ms=a.itl_ms)
    if a.truth_nice:
        truth.argv = ["nice", "-n", str(a.truth_nice)] + truth.argv
    with truth as ts:
        pools = {w: (WorkerPool(w) if w > 1 else None) for w in counts}
        try:
            for pool in pools.values():
                pin_pool(pool, cores, a.worker_cores)
            for w, pool in pools.items():                   # 1. cost per event, unsaturated
                r = per_core(one_run(ts, a.per_worker * w, a.tokens, pool))
                result["per_core"].append(r)
                say(f"per-core: {w} worker(s), {r['streams']} streams: {r['events_per_core_s']:,.0f} events/s per core "
                    f"({r['cpu_us_per_event']:.1f} us/event), client-bound {r['client_bound']} ({load()})")
            for w, pool in pools.items():                   # 2. ramp until the self-check flags
                steps = []
                for streams in ramp:
                    run = one_run(ts, streams, a.tokens, pool)
                    c = run["out"]["client"]
                    steps.append({"streams": streams, "client_bound": c["client_bound"], "notes": c["notes"][:3],
                                  "lag_p99_ms": (c["lag_p99_s"] or 0) * 1e3, "busiest_cpu_frac": c["cpu_frac"],
                                  "merged": c["merged_events"], "token_events": c["token_events"],
                                  "true_tok_s_p50": percentile([true_metrics(t)["tok_s"] for t in run["truth"]], 50),
                                  "load": run["load"], "run": run})
                    say(f"ramp: {w} worker(s), {streams} streams (truth: {steps[-1]['true_tok_s_p50']:.1f} tok/s per "
                        f"stream): client-bound {c['client_bound']} "
                        f"{'; '.join(c['notes'])[:200]} ({load()})")
                    if c["client_bound"]:
                        break
                result["ramp"][w] = steps
            most = max(counts)
            green = [s for s in result["ramp"][most] if not s["client_bound"]]
            if green:                                        # 3. fidelity at the most the box feeds
                n = green[-1]["streams"]
                result["fidelity"].append(fidelity(f"glmf, {most} workers", green[-1]["run"]))
                if 1 in pools and most != 1:
                    result["fidelity"].append(fidelity("glmf, 1 worker", one_run(ts, n, a.tokens, pools[1])))
            for w in sorted({1, most} & set(counts)):       # 4. the row
                run = one_run(ts, a.row, a.tokens, pools[w])
                result["row"].append(fidelity(f"glmf, {w} worker{'s' if w > 1 else ''}", run))
                say(f"row: {a.row} streams, {w} worker(s): client-bound {run['out']['client']['client_bound']} ({load()})")
        finally:
            for pool in pools.values():
                if pool is not None:
                    pool.close()
    result["load_end"] = os.getloadavg()
    report(result, a)
    if a.json:
        for steps in result["ramp"].values():
            for s in steps:
                s.pop("run", None)
        a.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


def report(result: dict[str, Any], a: argparse.Namespace) -> None:
    print(f"sharded load (truth: TTFT {a.ttft_ms:g} ms, ITL {a.itl_ms:g} ms, {a.tokens} tokens; {result['cores']} "
          f"cores; truth server pinned to the last core at nice {a.truth_nice}; workers {a.worker_cores}; "
          f"started {result['started']}, load average at start "
          f"{result['load_start'][0]:.2f}, at end {result['load_end'][0]:.2f})")
    base = next((r for r in result["per_core"] if r["workers"] == 1), None)
    rows = [[str(r["workers"]), str(r["streams"]), f"{r['events_per_s']:,.0f}", f"{r['events_per_core_s']:,.0f}",
             f"{r['cpu_us_per_event']:.1f}",
             f"{r['events_per_core_s'] / base['events_per_core_s']:.3f}" if base else "-",
             f"{r['busiest_cpu_frac'] * 100:.0f} %", str(r["client_bound"]), f"{r['load']:.2f}"]
            for r in result["per_core"]]
    print("\nevents per second per client core")
    print(render_table(rows, ["workers", "streams", "events/s", "events/s per core", "CPU us/event", "ratio to 1",
                              "busiest worker CPU", "client-bound", "load avg"]))
    print("\nramp: the stream count at which the self-check first flags")
    rows = []
    for w, steps in result["ramp"].items():
        green = [s["streams"] for s in steps if not s["client_bound"]]
        flagged = next((s for s in steps if s["client_bound"]), None)
        rows.append([str(w), str(max(green)) if green else "none", str(flagged["streams"]) if flagged else "none",
                     "; ".join(flagged["notes"])[:160] if flagged else "-",
                     " / ".join(f"{s['true_tok_s_p50']:.1f}" for s in steps),
                     " / ".join(f"{s['load']:.2f}" for s in steps)])
    print(render_table(rows, ["workers", "largest green", "first flagged", "why", "truth tok/s per stream per step",
                              "load avg per step"]))
    if result["fidelity"]:
        print("\nfidelity at the largest green stream count of the most workers")
        print(table(result["fidelity"]))
    if result["row"]:
        print(f"\nthe row: {a.row} streams at {1000 / a.itl_ms:g} tok/s")
        print(table(result["row"]))
        for r in result["row"]:
            print(f"  {r['client']}: {'client-bound: ' + r['notes'] if r['client_bound'] else 'green'} "
                  f"(true per-user tok/s p50 {r['true_tok_s_p50']:.1f}; load average {r['load']:.2f})")


if __name__ == "__main__":
    raise SystemExit(main())
