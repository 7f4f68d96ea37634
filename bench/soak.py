"""Soak: the curve at the simulator's full seat count, again and again, for several minutes.

    .venv/bin/python bench/soak.py                    # 4 minutes, batch lane, time scale 0.1
    .venv/bin/python bench/soak.py --minutes 10 --time-scale 0.2 --max-tokens 128

What it proves (CI does not run it; run it before a release and note the numbers):
  * the client process (the same runner and recorder the curve gate uses inside pytest) keeps its
    memory flat: RSS is sampled after every run; the growth between the first and the last quarter
    of the soak is printed (and the server's RSS beside it);
  * no record is lost: every run's per-request records are written through `SessionRecorder` (the
    session's result file path), and at the end the merged result file must hold every run with
    every user's record, and each record must have a status, a TTFT and its tokens.
Exit status 1 when a record is missing, a request failed, or RSS grew by more than --max-growth-mib.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

import psutil

from pytest_glmf.config.lanes import builtin_lanes
from pytest_glmf.launch import launch_lane
from pytest_glmf.load import LoadSettings, Workload, load_prompt_variants, run_rows
from pytest_glmf.results.recorder import SessionRecorder

MIB = 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/soak.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--lane", default="batch", choices=sorted(builtin_lanes()))
    ap.add_argument("--time-scale", type=float, default=0.1)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--users", type=int, default=None, help="default: the server's seats (boot log)")
    ap.add_argument("--max-growth-mib", type=float, default=20.0)
    ap.add_argument("--results", type=Path, default=None, help="default: a temporary directory")
    args = ap.parse_args(argv)

    results = args.results or Path(tempfile.mkdtemp(prefix="glmf-soak-"))
    lane = dataclasses.replace(builtin_lanes()[args.lane], time_scale=args.time_scale)
    session = time.strftime("soak-%Y%m%d-%H%M%S", time.gmtime())
    server = launch_lane(lane, results, session)
    me = psutil.Process()
    try:
        server_proc = psutil.Process(int(server.provenance["pid"]))
        users = args.users or int(server.boot_facts.max_running_requests or 128)
        workload = Workload(prompts=load_prompt_variants(), max_tokens=args.max_tokens)
        settings = LoadSettings(users=[users], runs=1, warmup=False)
        recorder = SessionRecorder(results, session, lane.name)
        print(f"soak: lane {lane.name} (sim, time scale {args.time_scale:g}), {users} users x "
              f"{args.max_tokens} tokens per run, {args.minutes:g} min; results in {results}")
        samples: list[tuple[float, float, float]] = []     # (t_s, client rss MiB, server rss MiB)
        t0 = time.monotonic()
        run = errors = 0
        while time.monotonic() - t0 < args.minutes * 60:
            row = run_rows(server.base_url, workload, settings, server.boot_facts.to_dict())[0]
            records = row["per_run"][0]["records"]
            errors += sum(1 for r in records if r.get("error"))
            recorder.record("soak", f"run={run}", {"users": users, "records": records,
                                                    "aggregate_tok_s": row["aggregate_tok_s"]})
            run += 1
            del row, records
            gc.collect()
            t = time.monotonic() - t0
            samples.append((t, me.memory_info().rss / MIB, server_proc.memory_info().rss / MIB))
            if run % 10 == 0 or run <= 2:
                print(f"  t={t:6.0f} s  runs={run:4d}  client rss {samples[-1][1]:7.1f} MiB  "
                      f"server rss {samples[-1][2]:7.1f} MiB  errors={errors}", flush=True)
        out = recorder.write(lane=lane.to_dict(), provenance=server.provenance)
    finally:
        server.stop()

    doc = json.loads(Path(out).read_text()) if out else {"gates": {}}
    got = doc["gates"].get("soak", {})
    lost_runs = [k for k in (f"run={i}" for i in range(run)) if k not in got]
    bad_records = sum(1 for v in got.values() for r in v["records"]
                      if r.get("status") != 200 or r.get("t_first_token_s") is None or not r.get("completion_tokens"))
    short_runs = sum(1 for v in got.values() if len(v["records"]) != users)
    q = max(1, len(samples) // 4)
    first = sum(s[1] for s in samples[:q]) / q
    last = sum(s[1] for s in samples[-q:]) / q
    srv_first = sum(s[2] for s in samples[:q]) / q
    srv_last = sum(s[2] for s in samples[-q:]) / q
    growth = last - first
    print(f"soak: {run} runs, {run * users} requests in {samples[-1][0] if samples else 0:.0f} s; "
          f"request errors {errors}")
    print(f"  client rss: first quarter {first:.1f} MiB, last quarter {last:.1f} MiB, growth {growth:+.1f} MiB, "
          f"max {max(s[1] for s in samples):.1f} MiB")
    print(f"  server rss: first quarter {srv_first:.1f} MiB, last quarter {srv_last:.1f} MiB")
    print(f"  result file {out}: {len(got)} runs recorded, {len(lost_runs)} lost, {short_runs} short, "
          f"{bad_records} records without status 200/ttft/tokens")
    ok = not lost_runs and not short_runs and not bad_records and not errors and growth <= args.max_growth_mib
    print("soak: OK" if ok else "soak: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
