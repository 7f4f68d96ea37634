"""The capacity search against the ground-truth server with a known service curve: per-user speed
1 / (itl + k * (running - 1)), TTFT ttft + j * (k-th running - 1). The search returns the true
capacity (resolution 1), stops at the seats or the KV pool with the reason and the flag when they
bind first, and every probe is a full curve row (warm pass, runs, client self-check)."""
from __future__ import annotations

import os
from dataclasses import replace

import pytest

from pytest_glmf.gates.capacity.measure import measure_capacity
from pytest_glmf.gates.capacity.spec import SLO, CapacitySettings, RateSettings
from pytest_glmf.load import load_prompt_variants, median, percentile
from pytest_glmf.testing.truth_server import TruthServer, true_metrics

# slow streams (20-50 tok/s): a loaded CI box keeps up with them. The client's self-check is sized
# to them: event-loop lag up to 20 ms (under 1 % of a 2 s stream, a tenth of the 0.2 s TTFT bound
# below) does not make a probe unmeasurable; the default 2 ms is for GPU-rate streams, and a probe
# it marks now leaves the search undecided (no longer a miss), as it did at load average 9 here.
CLIENT = {"lag_p99_max_s": 0.02}
SETTINGS = CapacitySettings(prompt_tokens=None, max_tokens=60, runs=2, resolution_users=1, start_users=20, **CLIENT)


def speed(n: int, itl_ms: float = 20.0, per_running_ms: float = 0.8) -> float:
    return 1000.0 / (itl_ms + per_running_ms * (n - 1))


def true_probes(result, truth: list[dict], slo: SLO) -> list[tuple[int, float, bool]]:
    """Each probe as the truth server's own send times say it went: (users, the p5 speed, whether
    it met the service level). The measured runs are the bursts of max_tokens requests, in order."""
    jobs = sorted((j for j in truth if j["max_tokens"] == result.workload["max_tokens"]), key=lambda j: j["t_recv_s"])
    out = []
    for p in result.probes:
        runs = []
        for _ in range(p.runs + p.replaced_runs):
            burst, jobs = jobs[:p.users], jobs[p.users:]
            runs.append(percentile([true_metrics(j)["tok_s"] for j in burst], 100 - slo.users_pct))
        # the judge's runs are the kept ones; a replaced run was the client's, the server's sends held
        p5 = median(runs)
        out.append((p.users, p5, p5 >= slo.per_user_tok_s))
    return out


def test_speed_bound_capacity_is_the_truth_on_a_busy_machine():
    """5 users: 19.23 tok/s, 6 users: 16.67 (1000 / (20 + 8 (running - 1))); the bound 17.9 sits 7 %
    from each. Why not 22 and 23 users 1.1 % apart, as before: measured on this 2-core box at load
    average 9.4 (two CPU hogs beside the test), the truth server's own sends at 22 users gave a p5 of
    27.31 tok/s (it kept its schedule), while the client measured 26.87, 1.6 % slow (its stamps of the
    last tokens came late) and under the bound; the self-check marked the probe client-bound, and the
    search counted that as a miss: 21. Now a probe the client cannot measure is never a miss (it is
    measured again with more client processes, else the search is undecided), and a client 1-2 %
    late no longer crosses the bound. Asserted is what stays true under load: every probe's p5 and
    verdict agree with the server's recorded send times (within 1 %), and the answer they give is the
    designed 5 (this test passed twice beside the same two hogs, load average 9.6-10.7)."""
    slo = SLO(per_user_tok_s=17.9, ttft_s=1.0)
    settings = replace(SETTINGS, max_tokens=40, start_users=5)
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=8) as ts:
        r = measure_capacity(ts.url, slo, settings)
        truth = ts.truth()
    said = true_probes(r, truth, slo)
    for p, (users, p5, passed) in zip(r.probes, said):
        assert p.per_user_tok_s_at_pct == pytest.approx(p5, rel=0.01), (users, p5)
        assert p.passed == passed, (users, p5)
    true_answer = max(u for u, _, ok in said if ok)
    assert r.users == true_answer == 5 and r.stopped_by == "slo", (said, r.undecided, os.getloadavg())
    assert r.first_fail.users == 6 and [m.what for m in r.first_fail.misses] == ["per-user tok/s"]
    assert r.last_pass.per_user_tok_s == pytest.approx(speed(5, per_running_ms=8), rel=0.03)
    assert r.first_fail.per_user_tok_s == pytest.approx(speed(6, per_running_ms=8), rel=0.03)
    assert r.last_pass.runs == 2 and r.last_pass.requests == 2 * 5
    # the model: 5 passes (load 0.93: proportional to users, the boundary at 5.4), so 6 (one past it)
    # fails; each value once
    assert [p.users for p in r.probes] == [5, 6] and r.search.model_probes == 1
    # the boundary sits between them (the line between their margins: ~5.5), and its interval, of
    # the same fractional quantity, holds it and cannot leave [5, 6] (issue 40: it was [5, 5])
    low, high = r.boundary_ci95
    assert 5 <= low <= r.boundary_x <= high <= 6 and r.search.boundary == "smooth"
    # each probe: a warm pass of warm_tokens (discarded) and `runs` measured runs of max_tokens (and a
    # run for each one the client's self-check threw out)
    assert sorted({j["max_tokens"] for j in truth}) == [16, 40]
    assert len(truth) == sum(p.users * (1 + 2 + p.replaced_runs) for p in r.probes)


def test_ttft_bound_capacity_is_the_truth():
    # TTFT of the k-th request: 20 + 40 (k - 1) ms; p95 over 12 users 438 ms, over 13 users 476 ms
    slo = SLO(ttft_s=0.457)
    with TruthServer(ttft_ms=20, itl_ms=20, ttft_per_running_ms=40) as ts:
        r = measure_capacity(ts.url, slo, replace(SETTINGS, max_tokens=30, start_users=10))
    assert r.users == 12 and r.stopped_by == "slo"
    assert [m.what for m in r.first_fail.misses] == ["TTFT p95"]
    assert r.last_pass.ttft_s == pytest.approx(0.438, abs=0.012)
    assert r.first_fail.ttft_s == pytest.approx(0.476, abs=0.012)


CAP = "max_running_requests is capped to 12 by the mamba state cache (max_mamba_cache_size=60, 5 state slots per request)"


def test_the_seats_stop_it_first_with_the_flag_that_raises_them():
    facts = {"engine": "sglang", "max_running_requests": 12, "cap_reason": CAP, "kv_tokens": 10_000_000}
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8, seats=12) as ts:
        r = measure_capacity(ts.url, SLO(per_user_tok_s=26.88), SETTINGS, facts=facts)
    assert r.users == 12 and r.stopped_by == "seats" and r.first_fail is None
    assert max(p.users for p in r.probes) == 12 and r.last_pass.users == 12
    assert r.search.bound.hint == (f"{CAP}: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve "
                                   "the state size with --mamba-ssm-dtype bfloat16")


def test_the_seat_hint_leaves_out_what_the_lane_already_passes():
    """The capacity's seat bound knows the lane's engine flags, as the boot gate's hint does
    (boot/hints.py): the lane's fixture hands it over, and a lane passing `--mamba-ssm-dtype
    bfloat16` is not told to halve its state with it."""
    from pytest_glmf.config.lanes import builtin_lanes
    from pytest_glmf.gates.capacity.fixture import LaneCapacity

    batch = builtin_lanes()["batch"]          # passes --mamba-ssm-dtype bfloat16
    facts = {"engine": "sglang", "max_running_requests": 12, "cap_reason": CAP, "kv_tokens": 10_000_000}
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8, seats=12) as ts:
        r = LaneCapacity(base_url=ts.url, settings=SETTINGS, facts=facts, lane=batch).measure(SLO(per_user_tok_s=26.88))
    assert r.users == 12 and r.stopped_by == "seats"
    assert r.search.bound.hint == f"{CAP}: increase --mamba-full-memory-ratio or --max-mamba-cache-size"


def test_the_kv_pool_stops_it_first_with_the_flag_that_raises_it():
    prompt = max(len(p) for p in load_prompt_variants()) // 4 + 16     # the estimate without /tokenize
    facts = {"engine": "sglang", "max_running_requests": 128, "kv_tokens": 9 * (prompt + SETTINGS.max_tokens) + 10,
             "max_mamba_cache_size": 640}
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8) as ts:
        r = measure_capacity(ts.url, SLO(per_user_tok_s=26.88), SETTINGS, facts=facts)
    assert r.users == 9 and r.stopped_by == "kv_pool" and max(p.users for p in r.probes) == 9
    assert r.search.bound.hint.startswith("raise --mem-fraction-static, or trade state slots for KV tokens "
                                          "(fewer --max-mamba-cache-size than 640")
    assert {b.kind: b.value for b in r.bounds} == {"max_users": 1024, "seats": 128, "kv_pool": 9}


def test_allow_queueing_probes_past_the_seats_and_the_queue_shows_in_ttft():
    facts = {"max_running_requests": 6}
    settings = replace(SETTINGS, max_tokens=30, start_users=6)
    with TruthServer(ttft_ms=20, itl_ms=20, seats=6) as ts:
        r = measure_capacity(ts.url, SLO(ttft_s=0.3, allow_queueing=True), settings, facts=facts)
    # the 7th user waits for a whole request (20 + 29 x 20 ms) before its own 20 ms: TTFT 0.62 s;
    # p95 over 7 users interpolates 70 % of the way from 0.02 s to it
    assert r.users == 6 and r.stopped_by == "slo" and r.first_fail.users == 7
    assert r.first_fail.ttft_s == pytest.approx(0.02 + 0.7 * 0.6, abs=0.03)
    assert r.search.bound.kind == "max_users"


def test_open_loop_rate_capacity_sits_below_what_the_seats_can_serve():
    """4 seats, each request holds one for 20 + 19 x 20 ms = 0.4 s: at most 10 requests/s can be served;
    below that Poisson arrivals still queue now and then, and TTFT p95 <= 0.2 s holds only well under it."""
    from pytest_glmf.gates.capacity.measure import measure_rate_capacity

    settings = CapacitySettings(prompt_tokens=None, max_tokens=20, runs=1, resolution_pct=10,
                                rate=RateSettings(requests=24, start_per_s=6.0), **CLIENT)
    with TruthServer(ttft_ms=20, itl_ms=20, seats=4) as ts:
        r = measure_rate_capacity(ts.url, SLO(ttft_s=0.2), settings)
        truth = ts.truth()
    assert r.stopped_by == "slo" and 1.0 <= r.rate_per_s < 10.0, (r.undecided, os.getloadavg())
    assert r.search.first_fail.x - r.rate_per_s <= 0.1 * r.rate_per_s
    assert r.search.first_fail.misses and r.search.last_pass.ttft_s <= 0.2
    # the requests of one measured run arrived as a Poisson process at the probed rate
    run = sorted(j["t_recv_s"] for j in truth if j["max_tokens"] == 20)[:24]
    gaps = [b - a for a, b in zip(run, run[1:])]
    mean = sum(gaps) / len(gaps)
    assert mean == pytest.approx(1 / r.search.probes[0].x, rel=0.5)
    cv = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5 / mean
    assert 0.4 < cv < 1.8          # exponential gaps (uniform spacing would give ~0)
