"""Sharded load: a row's streams read by several worker processes on the host's one monotonic clock,
started on one barrier and merged into one row. Proven against the known-truth server (it records
when it received each request and sent each chunk, on the same clock) and with a worker really
starved (SIGSTOP), not simulated."""
from __future__ import annotations

import asyncio
import math
import os
import random
import signal
import threading
import time

import pytest
from scipy import stats

from pytest_glmf.gates.curve.checks import row_gate_checks
from pytest_glmf.gates.curve.spec import SPEC
from pytest_glmf.load import (
    ClientCost,
    Endpoints,
    LoadSettings,
    Workload,
    describe_flags,
    event_loop_factory,
    measure_run,
    run_row,
    workers_check,
)
from pytest_glmf.load.records import (
    RequestRecord,
    merge_records,
    run_metrics,
    send_lateness_s,
    token_count_check,
    ttft_s,
)
from pytest_glmf.load.streams import ShardResult
from pytest_glmf.load.workers import WorkerError, WorkerPool, arrival_offsets, auto_workers, deal
from pytest_glmf.testing.truth_server import TruthServer, true_metrics

PROMPTS = ["Summarise the briefing. " * 20]
TOL_S = 0.003   # as in test_curve_definitions: generous for a shared 2-core CI box; bench/ measures the bias


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=20, itl_ms=5) as ts:
        yield ts


def run(coro):
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(coro)


def measure(url, users, settings, pool, max_tokens=20, seed=0):
    workload = Workload(prompts=PROMPTS, max_tokens=max_tokens)
    bodies = [workload.body("w", u, u) for u in range(users)]
    return run(measure_run(Endpoints.from_urls(url), bodies, settings, workload.path, pool, seed=seed))


# -- the plan -------------------------------------------------------------------------------------

def test_auto_workers_cover_the_measured_cost_and_stop_at_the_cores():
    # 1,000 streams x 100 events/s x 20 us = 2 cores of reading; at half a core per worker: 4
    assert auto_workers(1000, 100.0, 20e-6, cores=8)[0] == 4
    n, why = auto_workers(1000, 100.0, 20e-6, cores=2)
    assert n == 2 and why.endswith("-> 2 of 2 cores (capped by the cores)")
    assert auto_workers(128, 50.0, 25e-6, cores=8)[0] == 1          # the recipe's rows: one core is plenty
    assert auto_workers(1000, None, None, cores=8) == (1, "auto: 1 (no measured client cost yet; set workers to shard)")
    # a small row: one worker, even when its short pass cost a lot per event (fixed costs dominate)
    assert auto_workers(8, 200.0, 2e-3, cores=8) == (1, "auto: 1 (8 streams x 200 events/s = 1,600 token events/s)")


def test_one_arrival_process_at_the_total_rate_is_dealt_to_the_workers():
    offsets = arrival_offsets(4000, 200.0, "poisson", seed=7)
    assert offsets == arrival_offsets(4000, 200.0, "poisson", seed=7)       # drawn once, reproducible
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    assert stats.kstest(gaps, "expon", args=(0, 1 / 200.0)).pvalue > 0.01  # exponential gaps, mean 1/rate
    assert arrival_offsets(5, 10.0) == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert arrival_offsets(5, None) is None
    with pytest.raises(ValueError, match="arrival must be one of uniform, poisson, got 'bursty'"):
        arrival_offsets(5, 10.0, "bursty")
    dealt = deal(list(range(10)), 3)                                        # round-robin in arrival order
    assert dealt == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        LoadSettings(users=[1], workers=0)


# -- merging --------------------------------------------------------------------------------------

def _record(user: int, rng: random.Random) -> RequestRecord:
    t0 = rng.uniform(0, 0.01)
    first = t0 + rng.uniform(0.02, 0.2)
    n = rng.randint(2, 40)
    chunks = sorted(first + rng.uniform(0, 0.5) for _ in range(n - 1))
    times = [first] + chunks
    ok = rng.random() > 0.1
    return RequestRecord(user=user, t_send_s=t0, status=200, t_first_chunk_s=t0 + 0.001,
                         t_first_token_s=first if ok else None, t_last_token_s=times[-1] if ok else None,
                         chunk_times_s=times if ok else [], completion_tokens=n + rng.randint(0, 2),
                         prompt_tokens=100, error=None if ok else "stream ended without [DONE]")


def test_merged_statistics_equal_the_statistics_of_the_concatenated_records():
    rng = random.Random(3)
    shards = [[_record(u, rng) for u in range(k, 300, 3)] for k in range(3)]   # dealt like deal()
    concatenated = [r for shard in shards for r in shard]
    merged = merge_records(shards)
    assert [r.user for r in merged] == list(range(300))
    assert run_metrics(merged) == run_metrics(concatenated)
    assert token_count_check(merged, 12_345) == token_count_check(concatenated, 12_345)
    with pytest.raises(ValueError, match="two workers returned a record for the same user"):
        merge_records([shards[0], shards[0][:1]])


def test_a_sharded_run_merges_into_the_truth(truth):
    """Two workers, 40 streams: every stream's TTFT is the truth server's (its first content send on
    the same clock), each worker read its dealt half, and the run's statistics are those of the
    two workers' records put together."""
    settings = LoadSettings(users=[40], runs=1, metrics_sample_s=0.05, lag_p99_max_s=1.0, client_error_max_pct=math.inf)
    truth.reset()
    with WorkerPool(2) as pool:
        out = measure(truth.url, 40, settings, pool)
        pids = pool.pids
    records, client = out["records"], out["client"]
    sent = {t["id"]: true_metrics(t) for t in truth.truth()}
    for rec in records:
        assert rec.ok, rec.error
        assert rec.worker == rec.user % 2 and rec.endpoint == 0
        assert ttft_s(rec) == pytest.approx(sent[rec.response_id]["t_first_s"] - rec.t_send_s, abs=TOL_S)
        assert ttft_s(rec) >= sent[rec.response_id]["ttft_s"]
    assert client["workers"] == 2 and [w["pid"] for w in client["per_worker"]] == pids
    assert [w["streams"] for w in client["per_worker"]] == [20, 20]
    assert client["token_events"] == sum(w["token_events"] for w in client["per_worker"]) == 40 * 20
    assert client["start_skew_s"] is not None and client["start_skew_s"] < 0.05
    by_worker = [[r for r in records if r.worker == k] for k in (1, 0)]            # any order
    assert run_metrics(records) == run_metrics(by_worker[0] + by_worker[1])
    assert out["server"]["metrics_delta"] == 40 * 20 and token_count_check(records, 800)["ok"]


def test_open_loop_arrivals_across_workers_keep_the_one_process(truth):
    """Poisson at 150 requests/s over two workers: each request goes out when the one drawn schedule
    says (not two processes at half the rate), so the merged sends' gaps are the drawn gaps."""
    settings = LoadSettings(users=[60], runs=1, rate_per_s=150.0, arrival="poisson", metrics_sample_s=0,
                             lag_p99_max_s=1.0, client_error_max_pct=math.inf)
    with WorkerPool(2) as pool:
        out = measure(truth.url, 60, settings, pool, max_tokens=5, seed=11)
    records = sorted(out["records"], key=lambda r: r.t_due_s)
    drawn = arrival_offsets(60, 150.0, "poisson", seed=11)
    t0 = records[0].t_due_s
    assert [r.t_due_s - t0 for r in records] == pytest.approx(drawn, abs=1e-9)
    assert {r.worker for r in records[:10]} == {0, 1}                       # interleaved, not split in halves
    late = sorted(send_lateness_s(records))
    # sent at their times, to the event loop timers' 1 ms resolution (early by < 1 ms, a few ms late at worst)
    assert late[0] > -0.0015 and abs(late[len(late) // 2]) < 0.002, late
    sends = sorted(r.t_send_s for r in records)                             # what the server saw arrive
    gaps = [b - a for a, b in zip(sends, sends[1:])]
    assert stats.kstest(gaps, "expon", args=(0, 1 / 150.0)).pvalue > 0.001


# -- the self-check judges each worker ----------------------------------------------------------

def _starve(pid: int, stop: threading.Event, stopped_s: float = 0.03, every_s: float = 0.06) -> None:
    """SIGSTOP the worker for `stopped_s` out of every `every_s`: descheduled, as by a busy neighbour."""
    while not stop.is_set():
        os.kill(pid, signal.SIGSTOP)
        time.sleep(stopped_s)
        os.kill(pid, signal.SIGCONT)
        time.sleep(every_s - stopped_s)


def test_a_starved_worker_is_named_and_what_it_could_not_tell_is_not_measured(truth, inside):
    settings = LoadSettings(users=[16], runs=1, warmup=False, metrics_sample_s=0, workers=2, client_retries=0)
    workload = Workload(prompts=PROMPTS, max_tokens=120)
    with WorkerPool(2) as pool:
        victim = pool.pids[1]
        stop = threading.Event()
        hog = threading.Thread(target=_starve, args=(victim, stop))
        hog.start()
        try:
            row = run(run_row(Endpoints.from_urls(truth.url), 16, workload, settings, None, pool=pool))
        finally:
            stop.set()
            hog.join()
            os.kill(victim, signal.SIGCONT)
    client = row["per_run"][0]["client"]
    starved, other = client["per_worker"][1], client["per_worker"][0]
    assert starved["unmeasured"] and starved["pid"] == victim and starved["lag_p99_s"] > 0.02
    assert starved["merged_events"] > 0.05 * starved["token_events"]
    assert other["lag_p99_s"] < starved["lag_p99_s"]
    # the numbers the run could not tell are not measured (None), the starved worker named in the reason
    name = f"worker 2 of 2 (pid {victim}, 8 streams): "
    gated = [m for m in row["unmeasured"] if m in SPEC.metrics]
    assert gated and all(row[m] is None for m in gated), row["unmeasured"]
    assert any(name in why for why in row["unmeasured"].values())
    # a bound set on one, inside its interval, fails as the client's and names the worker
    metric = next(m for m in gated if name in row["unmeasured"][m])
    failed = {c.metric: c for c in row_gate_checks(row, {metric: {"max": inside(row["client_error"][metric])}})
              if not c.ok}
    assert name in failed[metric].hint and failed[metric].cause == "client-bound"
    assert any("not measured (client timestamps can be off by up to" in f or "not measured (ITL" in f
               for f in describe_flags(row))


def test_workers_check_with_one_worker_is_that_workers_check():
    rec = RequestRecord(user=0, t_send_s=0.0, status=200, t_first_token_s=0.1, t_last_token_s=0.2,
                        chunk_times_s=[0.1, 0.15, 0.2], completion_tokens=3)
    one = ShardResult(worker=0, workers=1, pid=1, records=[rec], lags_s=[0.001] * 99 + [0.05], stall_max_s=0.0,
                      cpu_s=0.95, wall_s=1.0, t_start_s=0.0, stamps="kernel")
    check = workers_check([one])
    # a busy core is named, but the records' times are exact: nothing is marked
    assert check["info"] == ["client event-loop lag p99 1.5 ms > 2 ms"][:0] + ["client CPU 95 % of a core > 85 %"]
    assert check["notes"] == [] and not check["client_bound"]
    assert check["error"]["per_user_tok_s"]["bound"] == 0.0
    assert check["workers"] == 1 and check["per_worker"][0]["pid"] == 1 and "pid" not in check
    two = [one, ShardResult(worker=1, workers=2, pid=2, records=[], lags_s=[0.001], cpu_s=0.1, wall_s=1.0,
                            stamps="kernel")]
    check = workers_check(two, cores=2)
    assert check["notes"] == [] and check["per_worker"][0]["info"] == ["client CPU 95 % of a core > 85 %"]
    assert check["cpu_cores"] == pytest.approx(1.05) and check["cpu_frac"] == pytest.approx(0.95)
    assert math.isclose(check["per_worker"][1]["cpu_frac"], 0.1)


def test_a_worker_that_cannot_connect_fails_the_run_naming_it(truth):
    from pytest_glmf.launch.process import free_port

    settings = LoadSettings(users=[4], runs=1, metrics_sample_s=0)
    dead = f"http://127.0.0.1:{free_port()}"
    with WorkerPool(2) as pool:
        with pytest.raises(WorkerError, match=r"worker 1 of 2 \(pid \d+\): (ConnectionRefusedError|OSError).*; "
                                              r"worker 2 of 2 \(pid \d+\): (ConnectionRefusedError|OSError)"):
            run(measure_run(Endpoints.from_urls(dead), [{"x": 1}] * 4, settings, "/v1/chat/completions", pool))
        # the pool is usable again after a failed run
        out = measure(truth.url, 4, settings, pool)
    assert all(r.ok for r in out["records"])


def test_closing_the_pool_mid_run_stops_it_at_once(truth):
    """Ctrl-C or a failing test closes the pool while a run is going: the run returns at once with
    a WorkerError and no worker is left behind."""
    settings = LoadSettings(users=[4], runs=1, metrics_sample_s=0)
    pool = WorkerPool(2)
    pids = pool.pids
    timer = threading.Timer(0.5, pool.close)
    timer.start()
    t0 = time.perf_counter()
    with pytest.raises(WorkerError, match="exited with code -15 during the run"):
        measure(truth.url, 4, settings, pool, max_tokens=2000)        # 10 s of tokens
    assert time.perf_counter() - t0 < 5
    timer.join()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_auto_workers_at_default_settings_stay_in_process(truth):
    """The default: a row one core reads easily runs in this process, as before sharding."""
    from pytest_glmf.load import run_rows

    row = run_rows(truth.url, Workload(prompts=PROMPTS, max_tokens=10),
                   LoadSettings(users=[4], runs=1, lag_p99_max_s=1.0, client_error_max_pct=math.inf))[0]
    assert row["workers"] == 1 and row["workers_plan"].startswith("auto: 1 (4 streams x ")
    assert row["per_run"][0]["client"]["per_worker"][0]["pid"] == os.getpid()
    cost = ClientCost()
    cost.update({"records": [RequestRecord(user=0, t_send_s=0.0, t_first_token_s=0.1, t_last_token_s=0.2,
                                           chunk_times_s=[0.1, 0.15, 0.2], completion_tokens=3)],
                 "client": {"per_worker": [{"token_events": 3, "cpu_s": 0.00006}]}})
    assert cost.events_per_stream_s == pytest.approx(20.0) and cost.cpu_per_event_s == pytest.approx(2e-5)


# -- a client-bound run is measured again ---------------------------------------------------------

@pytest.fixture
def quiet_truth():
    """A truth server of its own: a module-wide one may still stream to a run an earlier test
    abandoned, and its /metrics counter would then disagree with this run's usage."""
    with TruthServer(ttft_ms=20, itl_ms=5) as ts:
        yield ts


def test_a_client_bound_run_is_measured_again_in_its_place(quiet_truth, monkeypatch):
    """Run 2's self-check says client-bound (a stand-in for a stall of the machine): the runner
    measures a third run in its place, the row is valid, the table names what was replaced, and
    the server saw exactly three runs of requests."""
    from pytest_glmf.load import run as runner
    from pytest_glmf.load import run_rows

    real, calls = runner.workers_check, []

    def second_run_stalls(*args, **kw):
        out = real(*args, **kw)
        calls.append(out)
        if len(calls) == 2:
            out = {**out, "client_bound": True, "notes": ["client event-loop lag p99 2047.7 ms (a stall)"]}
        return out

    monkeypatch.setattr(runner, "workers_check", second_run_stalls)
    truth = quiet_truth
    row = run_rows(truth.url, Workload(prompts=PROMPTS, max_tokens=10),
                   LoadSettings(users=[4], runs=2, warmup=False, lag_p99_max_s=1.0, client_error_max_pct=math.inf, client_retries=3,
                                 flush_cache=False))[0]
    assert len(calls) == 3 and len(truth.truth()) == 4 * 3
    assert row["runs"] == 2 and row["replaced_runs"] == 1 and row["valid"] and not row["client_bound"]
    assert row["replaced_why"] == ["run 2: client event-loop lag p99 2047.7 ms (a stall)"]
    assert "1 run(s) measured again for the client (run 2: client event-loop lag p99 2047.7 ms (a stall))" \
        in describe_flags(row)
    assert [c.metric for c in row_gate_checks(row, {}) if not c.ok] == []


def test_retries_are_bounded_and_what_stays_unmeasured_fails_only_its_own_bound(quiet_truth, inside):
    """A self-check no run can pass (user-space stamps, every event's time off by the loop's lag
    and the probe's interval, allowed 0.001 %): `client_retries` more runs, then the numbers it could not
    tell are None with the reason; the row stays valid, and a bound set on one fails as the
    client's; every request the server saw is accounted for."""
    from pytest_glmf.load import run_rows

    truth = quiet_truth
    row = run_rows(truth.url, Workload(prompts=PROMPTS, max_tokens=5),
                   LoadSettings(users=[2], runs=1, warmup=False, client_error_max_pct=0.001, client_retries=2,
                                 flush_cache=False, kernel_stamps=False))[0]
    assert len(truth.truth()) == 2 * 3 and row["runs"] == 1 and row["replaced_runs"] == 2
    assert row["valid"] and row["client_bound"] and row["per_user_tok_s"] is None and row["ttft_p95_s"] is None
    assert [c for c in row_gate_checks(row, {}) if not c.ok] == []
    failed = [c for c in row_gate_checks(row, {"ttft_p95_s": {"max": inside(row["client_error"]["ttft_p95_s"])}})
              if not c.ok]
    assert [(c.metric, c.cause) for c in failed] == [("ttft_p95_s", "client-bound")]
    assert failed[0].change() == "not measured" and failed[0].hint.startswith("client timestamps can be off by up to")
