"""Benchmark of the measurement itself: our load generator (and, in the same run, an httpx client and a
peer tool from PyPI) against the ground-truth SSE server, which records when it really sent each chunk.

    .venv/bin/python bench/fidelity.py                       # fidelity at 1/32/128 users + capacity ramp
    .venv/bin/python bench/fidelity.py --peer-aiperf /tmp/peer-venv/bin/aiperf --peer-tokenizer /tmp/peer-tok

On a multi-core box the truth server is pinned to the last core and our client and httpx to core 0,
so "one client core" is literal; aiperf (a multi-process tool) keeps every core.
Reported per client and users value:
  ttft bias   measured TTFT - the true TTFT (the kernel's receive time of the request at the
              server, SO_TIMESTAMPNS -> the server's send of the first content chunk), per request
              (p50/p99, ms): the client's send-stamp and receive-stamp errors plus both loopback
              hops, so an upper bound of the client's error; the server's own delay in reading a
              burst is in the truth, as a user would feel it
  recv lag    client receive time of the first content chunk - the server's send time of it: the
              client's own share of the TTFT bias (aiperf's wall-clock start is mapped onto
              perf_counter's clock; the send side is the server's wake-up, not the client)
  tok/s err   |per-user tok/s - truth| / truth, per request (p50/max, %); aggregate error vs truth
  mismatch    requests whose completion-token count differs from what the server sent
  cpu/event   client CPU seconds / SSE events received (whole run: connect, stream, decode, metrics)
  lag p99     the client self-check (ours, httpx): event-loop lag; stamps = where receive times came
              from (kernel: SO_TIMESTAMPNS; user: perf_counter on arrival); merged = token events that
              shared a socket read with a later one; client-bound = the self-check's verdict (ours: the
              error bound over the row's spread, pytest_glmf/load/selfcheck.py; httpx: no bound is computed, so
              its lag and CPU are printed and nothing marks it)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from pytest_glmf.engine.client import DONE, parse_sse_line
from pytest_glmf.load import (
    LagProbe,
    LoadSettings,
    Target,
    Workload,
    client_check,
    event_loop_factory,
    measure_run,
    per_user_tok_s,
    percentile,
    run_metrics,
    ttft_s,
)
from pytest_glmf.testing.truth_server import TruthServer, true_metrics
from pytest_glmf.text import render_table

PROMPT = "Write a synthesis of the briefing. " * 40
perf = time.perf_counter
WALL_MINUS_PERF = time.time() - time.perf_counter()   # both clocks tick at the same rate over a run


def pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {core})


class PinnedTruth(TruthServer):
    def __enter__(self) -> "PinnedTruth":
        last = (os.cpu_count() or 1) - 1
        if last > 0 and shutil.which("taskset"):
            self.argv = ["taskset", "-c", str(last)] + self.argv
        super().__enter__()
        return self


def summarize(name: str, users: int, pairs: list[tuple[dict, float | None, float | None, int | None]],
              truth: list[dict], cpu_s: float | None, events: int | None, client: dict | None,
              aggregate: float | None, first_send: float | None, extra: dict | None = None,
              recv_lag_s: list[float] | None = None) -> dict[str, Any]:
    """pairs: (truth job, measured ttft s, measured per-user tok/s, measured completion tokens);
    recv_lag_s: per request, the client's first-content receive time - the server's send time."""
    bias = [m - true_metrics(t)["ttft_s"] for t, m, _, _ in pairs if m is not None]
    tok_err = [abs(s - true_metrics(t)["tok_s"]) / true_metrics(t)["tok_s"] * 100
               for t, _, s, _ in pairs if s is not None and true_metrics(t)["tok_s"]]
    mismatch = sum(1 for t, _, _, n in pairs if n != true_metrics(t)["tokens"])
    tokens = sum(true_metrics(t)["tokens"] for t in truth)
    t0 = first_send if first_send is not None else min(t["t_recv_s"] for t in truth)
    true_agg = tokens / (max(true_metrics(t)["t_last_s"] for t in truth) - t0)
    true_rate = percentile([true_metrics(t)["tok_s"] for t in truth], 50)
    return {"client": name, "users": users, "requests": len(pairs),
            "ttft_bias_p50_ms": _ms(percentile(bias, 50)), "ttft_bias_p99_ms": _ms(percentile(bias, 99)),
            "tok_s_err_p50_pct": percentile(tok_err, 50), "tok_s_err_max_pct": max(tok_err, default=None),
            "aggregate_err_pct": abs(aggregate - true_agg) / true_agg * 100 if aggregate else None,
            "count_mismatches": mismatch, "cpu_us_per_event": cpu_s / events * 1e6 if cpu_s and events else None,
            "lag_p99_ms": _ms(client["lag_p99_s"]) if client else None,
            "cpu_frac": client["cpu_frac"] if client else None,
            "client_bound": client["client_bound"] if client else None,
            "stamps": client.get("stamps") if client else None,
            "merged": client.get("merged_events") if client and client.get("stamps") == "kernel" else None,
            "true_tok_s_per_user": true_rate,
            "recv_lag_p50_ms": _ms(percentile(recv_lag_s or [], 50)), "recv_lag_p99_ms": _ms(percentile(recv_lag_s or [], 99)),
            **(extra or {})}


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1e3


# -- ours -----------------------------------------------------------------------------------------------

def run_ours(ts: TruthServer, users: int, tokens: int) -> dict[str, Any]:
    workload = Workload(prompts=[PROMPT], max_tokens=tokens)
    settings = LoadSettings(users=[users], runs=1, metrics_sample_s=0)

    async def go():
        target = Target(ts.url)
        await measure_run(target, [workload.body("warm", u, 0) for u in range(min(users, 8))], settings,
                          workload.path)
        ts.reset()
        c0 = time.process_time()
        out = await measure_run(target, [workload.body("m", u, 0) for u in range(users)], settings, workload.path)
        metrics = run_metrics(out["records"])
        return out, metrics, time.process_time() - c0

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        out, metrics, cpu_s = runner.run(go())
    truth = ts.truth()
    by_id = {t["id"]: t for t in truth}
    recs = out["records"]
    pairs = [(by_id[r.response_id], ttft_s(r), per_user_tok_s(r), r.completion_tokens) for r in recs if r.response_id]
    events = sum(len(r.chunk_times_s) + 2 for r in recs)   # content chunks + role + usage
    recv_lag = [r.t_first_token_s - true_metrics(by_id[r.response_id])["t_first_s"] for r in recs if r.response_id]
    send_lag = [by_id[r.response_id]["t_recv_s"] - r.t_send_s for r in recs if r.response_id]
    return summarize("glmf (ours)", users, pairs, truth, cpu_s, events, out["client"], metrics["aggregate_tok_s"],
                     min(r.t_send_s for r in recs), {"send_lag_p99_ms": _ms(percentile(send_lag, 99))}, recv_lag)


# -- httpx (what a straightforward client would do) -------------------------------------------------------

def run_httpx(ts: TruthServer, users: int, tokens: int) -> dict[str, Any]:
    body = Workload(prompts=[PROMPT], max_tokens=tokens).body("h", 0, 0)

    async def one(client: httpx.AsyncClient, out: list) -> None:
        t_send = perf()
        first = last = None
        n_events = 0
        usage = None
        rid = None
        async with client.stream("POST", "/v1/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                t = perf()
                ev = parse_sse_line(line)
                if ev is DONE:
                    break
                if ev is None:
                    continue
                n_events += 1
                rid = rid or ev.get("id")
                ch = ev.get("choices") or []
                if ch and ch[0].get("delta", {}).get("content"):
                    first = first if first is not None else t
                    last = t
                if ev.get("usage"):
                    usage = ev["usage"]["completion_tokens"]
        out.append((rid, t_send, first, last, usage, n_events))

    async def go():
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(base_url=ts.url, limits=limits, timeout=120) as client:
            warm: list = []
            await asyncio.gather(*(one(client, warm) for _ in range(min(users, 8))))
            ts.reset()
            out: list = []
            loop = asyncio.get_running_loop()
            with LagProbe(loop, 0.005) as lag:
                c0, w0 = time.process_time(), perf()
                await asyncio.gather(*(one(client, out) for _ in range(users)))
                cpu_s, wall = time.process_time() - c0, perf() - w0
            return out, cpu_s, client_check(lag.lags_s, cpu_s / wall)

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        out, cpu_s, check = runner.run(go())
    truth = ts.truth()
    by_id = {t["id"]: t for t in truth}
    pairs = [(by_id[rid], f - s, (n - 1) / (t_last - f) if t_last and f and t_last > f else None, n)
             for rid, s, f, t_last, n, _ in out if rid in by_id]
    tokens_total = sum(n or 0 for *_, n, _ in out)
    agg = tokens_total / (max(t_last for _, _, _, t_last, _, _ in out) - min(s for _, s, *_ in out))
    recv_lag = [f - true_metrics(by_id[rid])["t_first_s"] for rid, _, f, *_ in out if rid in by_id and f]
    return summarize("httpx AsyncClient", users, pairs, truth, cpu_s, sum(e for *_, e in out), check, agg,
                     min(s for _, s, *_ in out), recv_lag_s=recv_lag)


# -- peer: aiperf (NVIDIA), installed from PyPI in its own venv ------------------------------------------

def run_aiperf(ts: TruthServer, users: int, tokens: int, aiperf: str, tokenizer: str) -> dict[str, Any]:
    ts.reset()
    with tempfile.TemporaryDirectory(prefix="aiperf-") as art:
        argv = [aiperf, "profile", "--model-names", "truth", "--tokenizer", tokenizer, "--url", ts.url,
                "--endpoint-type", "chat", "--streaming", "--concurrency", str(users), "--request-count", str(users),
                "--output-tokens-mean", str(tokens), "--extra-inputs", "ignore_eos:true", "--use-server-token-count",
                "--ui-type", "none", "--artifact-dir", art]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        w0 = perf()
        # aiperf is a set of processes talking over ZMQ; pinned to one core of a busy 2-core box its
        # services miss their registration timeout, so it gets every core (an advantage it keeps).
        all_cores = (lambda: os.sched_setaffinity(0, range(os.cpu_count() or 1))) if hasattr(os, "sched_setaffinity") else None
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, preexec_fn=all_cores)
        wall = perf() - w0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"aiperf failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        recs = [json.loads(line) for line in Path(art, "profile_export.jsonl").read_text().splitlines() if line.strip()]
        summary = json.loads(Path(art, "profile_export_aiperf.json").read_text())
    truth = ts.truth()
    by_tag = {t["request_tag"]: t for t in truth if t.get("request_tag")}
    pairs, recv_lag = [], []
    for rec in recs:
        m, meta = rec["metrics"], rec["metadata"]
        job = by_tag.get(meta.get("x_request_id"))
        if job is None:
            continue
        ttft = m["time_to_first_token"]["value"] / 1e3
        pairs.append((job, ttft, (m.get("output_token_throughput_per_user") or {}).get("value"),
                      (m.get("output_sequence_length") or {}).get("value")))
        # aiperf stamps request_start_ns on the wall clock: map it onto perf_counter's clock
        recv_first = meta["request_start_ns"] / 1e9 + ttft - WALL_MINUS_PERF
        recv_lag.append(recv_first - true_metrics(job)["t_first_s"])
    agg = ((summary.get("output_token_throughput") or {}).get("avg")
           if isinstance(summary.get("output_token_throughput"), dict) else None)
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    events = sum(len(t["sends"]) + 2 for t in truth)
    return summarize("aiperf " + _version(aiperf), users, pairs, truth, None, events, None, agg, None,
                     {"cpu_s_total_incl_startup": cpu_s, "wall_s": wall, "paired": len(pairs),
                      "cpu_us_per_event_incl_startup": cpu_s / events * 1e6 if events else None}, recv_lag)


def _version(aiperf: str) -> str:
    try:
        return subprocess.run([aiperf, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "?"


# -- the table ----------------------------------------------------------------------------------------------

COLS = [("client", "client"), ("users", "users"), ("ttft_bias_p50_ms", "TTFT bias p50 ms"),
        ("ttft_bias_p99_ms", "p99 ms"), ("recv_lag_p50_ms", "recv lag p50 ms"), ("recv_lag_p99_ms", "p99 ms"), ("tok_s_err_p50_pct", "tok/s err p50 %"), ("tok_s_err_max_pct", "max %"),
        ("aggregate_err_pct", "agg err %"), ("count_mismatches", "count mism."), ("cpu_us_per_event", "CPU us/event"),
        ("lag_p99_ms", "lag p99 ms"), ("cpu_frac", "CPU frac"), ("stamps", "stamps"), ("merged", "merged"),
        ("client_bound", "client-bound"), ("true_tok_s_per_user", "true tok/s/user")]


def table(rows: list[dict[str, Any]]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)
    return render_table([[cell(r.get(k)) for k, _ in COLS] for r in rows], [h for _, h in COLS])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/fidelity.py")
    p.add_argument("--users", default="1,32,128")
    p.add_argument("--capacity", default="256,384,512", help="users values for the one-core capacity ramp")
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0, help="10 ms = 100 tok/s per stream")
    p.add_argument("--no-httpx", action="store_true")
    p.add_argument("--peer-aiperf", help="path to an aiperf executable (own venv)")
    p.add_argument("--peer-tokenizer", help="a local HF tokenizer dir for aiperf (no hub access here)")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    pin(0)
    rows: list[dict[str, Any]] = []
    users_list = [int(u) for u in a.users.split(",") if u]
    with PinnedTruth(ttft_ms=a.ttft_ms, itl_ms=a.itl_ms) as ts:
        for users in users_list:
            rows.append(run_ours(ts, users, a.tokens))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
            if not a.no_httpx:
                rows.append(run_httpx(ts, users, a.tokens))
                print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
            if a.peer_aiperf:
                try:
                    rows.append(run_aiperf(ts, users, a.tokens, a.peer_aiperf, a.peer_tokenizer or "builtin"))
                except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
                    print(f"aiperf at {users} users failed: {str(exc)[:300]}", file=sys.stderr)
                    rows.append({"client": "aiperf (failed)", "users": users})
                print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        capacity = []
        for users in [int(u) for u in a.capacity.split(",") if u]:
            capacity.append(run_ours(ts, users, a.tokens))
            print(table(capacity[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(f"fidelity (truth: TTFT {a.ttft_ms:g} ms, ITL {a.itl_ms:g} ms, {a.tokens} tokens; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(table(rows))
    print("\ncapacity of one client core (ours)")
    print(table(capacity))
    green = [r["users"] for r in capacity if not r["client_bound"] and (r["ttft_bias_p99_ms"] or 0) <= 2.0]
    print(f"most streams with the self-check green and TTFT bias p99 <= 2 ms: {max(green) if green else 'none'}")
    if a.json:
        a.json.write_text(json.dumps({"fidelity": rows, "capacity": capacity}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
