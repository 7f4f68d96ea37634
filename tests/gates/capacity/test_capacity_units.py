"""The service level on plain data: what a probe's numbers are, what it missed, on a simulator's
time scale; the thresholds section's checks; the tables."""
from __future__ import annotations

import pytest

from pytest_glmf.config.thresholds import load_thresholds
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.capacity.measure import CapacityResult, FrontierResult
from pytest_glmf.gates.capacity.search import Bound, SearchResult
from pytest_glmf.gates.capacity.slo import Miss, Probe, judge
from pytest_glmf.gates.capacity.spec import SLO, CapacitySettings
from pytest_glmf.gates.capacity.table import capacity_report, capacity_sentence, frontier_table, probes_table
from pytest_glmf.load import RequestRecord


def record(user: int, ttft: float, tok_s: float, tokens: int = 101, error: str | None = None) -> dict:
    t0 = 100.0
    first = t0 + ttft
    return RequestRecord(user=user, t_send_s=t0, status=200, t_first_chunk_s=first, t_first_token_s=first,
                         t_last_token_s=first + (tokens - 1) / tok_s, chunk_times_s=[first], completion_tokens=tokens,
                         prompt_tokens=2400, error=error).to_dict()


def row(runs: list[list[dict]], **flags) -> dict:
    per_run = [{"records": recs, "requests": len(recs), "errors": sum(1 for r in recs if r["error"]),
                "error_examples": sorted({r["error"] for r in recs if r["error"]}), "server": {},
                "client": {"client_bound": False, "notes": []}, "token_count": {"ok": True, "problems": []}}
               for recs in runs]
    return {"per_run": per_run, "aggregate_tok_s": 1000.0, "prompt_tokens_p50": 2400, "client_bound": False,
            "count_mismatch": False, **flags}


SLO95 = SLO(per_user_tok_s=50, users_pct=95, ttft_s=1.0, ttft_pct=95)


def test_95_percent_of_users_at_speed_counts_users_and_reports_the_p5_speed():
    fast = [record(u, 0.5, 55) for u in range(19)]
    p = judge(20, row([fast + [record(19, 0.5, 40)]]), SLO95)     # 1 of 20 slow: 95 % still meet it
    assert p.passed and p.users_meeting_pct == 95.0 and p.per_user_tok_s_at_pct < 55
    p = judge(20, row([fast[:18] + [record(18, 0.5, 40), record(19, 0.5, 40)]]), SLO95)
    assert not p.passed and p.users_meeting_pct == 90.0
    assert [m.text() for m in p.misses] == [f"per-user tok/s: 90 % of users >= 50 (p5 {p.per_user_tok_s_at_pct:.1f}), "
                                            "needs 95 %"]


def test_ttft_percentile_and_the_median_over_runs():
    ok = [record(u, 0.4, 60) for u in range(10)]
    slow = [record(u, 0.4 if u < 9 else 2.0, 60) for u in range(10)]
    p = judge(10, row([ok, slow, ok]), SLO95)            # one run's p95 is high, the median run's is not
    assert p.passed and p.ttft_s == pytest.approx(0.4) and p.runs == 3
    p = judge(10, row([slow, slow, ok]), SLO95)
    assert [m.what for m in p.misses] == ["TTFT p95"] and p.ttft_s > 1.0


def test_failed_requests_and_an_invalid_client_fail_the_probe_whatever_the_numbers():
    recs = [record(u, 0.4, 60) for u in range(9)] + [record(9, 0.4, 60, error="HTTP 503")]
    p = judge(10, row([recs]), SLO95)
    assert "failed requests" in [m.what for m in p.misses]
    p = judge(10, row([[record(u, 0.4, 60) for u in range(10)]], client_bound=True), SLO95)
    assert [m.what for m in p.misses] == ["client self-check"]


def test_a_simulators_time_scale_converts_to_the_modelled_gpus_units():
    # at time scale 0.1 the simulator runs ten times faster: 520 tok/s and 0.05 s are 52 tok/s and 0.5 s
    p = judge(10, row([[record(u, 0.05, 520) for u in range(10)]]), SLO95, time_scale=0.1)
    assert p.passed and p.per_user_tok_s == pytest.approx(52) and p.ttft_s == pytest.approx(0.5)
    p = judge(10, row([[record(u, 0.11, 520) for u in range(10)]]), SLO95, time_scale=0.1)
    assert [m.text() for m in p.misses] == ["TTFT p95: 1.100 s, needs <= 1 s"]
    assert SLO95.scaled(0.1).per_user_tok_s == pytest.approx(500) and SLO95.scaled(0.1).ttft_s == pytest.approx(0.1)


def write(tmp_path, text: str):
    path = tmp_path / "th.yaml"
    path.write_text("schema: 1\nlanes:\n  batch:\n    capacity:\n" + text)
    return path


@pytest.mark.parametrize("section, message", [
    ("      slo: {users_pct: 90}\n",
     "lanes.batch.capacity.slo: a service level needs per_user_tok_s and/or ttft_s, e.g. {per_user_tok_s: 50, ttft_s: 1.0}"),
    ("      slo: {per_user_tok_s: 50, ttft_p99: 1}\n",
     "lanes.batch.capacity.slo: unknown key 'ttft_p99'; allowed: allow_queueing, per_user_tok_s, ttft_pct, ttft_s, "
     "users_pct"),
    ("      slo: {per_user_tok_s: 50, users_pct: 120}\n",
     "lanes.batch.capacity.slo.users_pct: expected a number > 0 and <= 100, got 120"),
    ("      users: {min: -1}\n", "lanes.batch.capacity: users: min -1 gates nothing: users is a count, >= 0"),
    ("      settings: {resolution: 4}\n", "lanes.batch.capacity.settings: unknown key 'resolution'; allowed: "),
    ("      settings: {frontier: {contexts: [2048, x]}}\n",
     "lanes.batch.capacity.settings.frontier.contexts[1]: expected an integer, got 'x'"),
])
def test_the_section_is_checked_when_the_file_is_read(tmp_path, section, message):
    with pytest.raises(ConfigError) as err:
        load_thresholds(write(tmp_path, section))
    assert message in str(err.value)


def test_the_shipped_batch_lane_holds_the_recipes_capacity():
    t = load_thresholds()
    assert t.bounds("batch", "capacity") == {"users": {"min": 44}}
    s = t.settings("batch", "capacity")
    assert (s.prompt_tokens, s.max_tokens, s.runs, s.start_users) == (2400, 384, 3, 48)
    assert s.frontier.contexts == [2400, 8192, 32768, 57344]
    assert t.for_gate("batch", "capacity")["slo"] == {"per_user_tok_s": 50, "users_pct": 50, "ttft_s": 1.0,
                                                     "ttft_pct": 95}


def test_the_sentence_names_the_bound_and_its_knob_when_the_bound_stopped_it():
    probe = judge(23, row([[record(u, 0.5, 60) for u in range(23)]]), SLO95)
    bound = Bound(23, "kv_pool", "KV pool 201,280 tokens / (8,608 per user)", "raise --mem-fraction-static")
    result = CapacityResult(users=23, slo=SLO95, workload={"prompt_tokens": 8192, "max_tokens": 384},
                            search=SearchResult(value=23, last_pass=probe, first_fail=None, stopped_by="kv_pool",
                                                bound=bound, step=2, probes=[probe], wall_s=40.0),
                            bounds=[bound])
    assert capacity_sentence(result) == (
        "capacity at >= 50 tok/s for 95 % of users, TTFT p95 <= 1 s, no queueing past the seats and KV pool "
        "(8,192 prompt + 384 output tokens): 23 users, stopped by the KV pool: KV pool 201,280 tokens / (8,608 per "
        "user): raise --mem-fraction-static (the service level still held there); 1 probe(s), 23 requests, 40 s")
    lines = probes_table(result.probes, result.search, slo=SLO95).splitlines()
    assert [c.strip() for c in lines[0].split(" | ")[:4]] == ["users", "verdict", "p5 tok/s", "users"]
    assert lines[1].split(" | ")[3].strip() == ">= 50"       # headers on two lines: the table fits 120 columns
    assert lines[3].startswith("23    | pass (last pass) | 60")


def test_the_probes_and_frontier_tables_fit_120_columns_and_keep_every_number():
    """Issue 33: the demo's probes table was 218 columns wide (14 columns and the missed bound in
    its row), the frontier's 166. Now: what the users saw, the miss as a note under it, then what
    measuring took; the frontier's headers on two lines. Every number that was shown still is."""
    slo = SLO(per_user_tok_s=50, users_pct=50, ttft_s=1.0, ttft_pct=95)
    miss = Miss("per-user tok/s", "44 % of users >= 50 (p50 49.9)", "50 %")
    fail = Probe(x=48, passed=False, misses=[miss], users_meeting_pct=44, per_user_tok_s_at_pct=49.93,
                 per_user_tok_s=49.91, ttft_s=0.76, ttft_p50_s=0.559, aggregate_tok_s=2237.0, spread_pct=0.1,
                 margin=-0.00267, runs=3, requests=144, wall_s=40.3)
    held = Probe(x=44, passed=True, users_meeting_pct=77, per_user_tok_s_at_pct=51.0, per_user_tok_s=51.02,
                 ttft_s=0.728, ttft_p50_s=0.52, aggregate_tok_s=2104.6, spread_pct=0.1, margin=0.02, runs=3,
                 requests=132, wall_s=25.9, flags=["client-bound run(s) measured again with 2 client processes"])
    search = SearchResult(value=44, last_pass=held, first_fail=fail, stopped_by="slo", bound=None, step=4,
                          probes=[fail, held], wall_s=66.0, boundary_ci95=(46, 48), boundary_x=47.5)
    result = CapacityResult(users=44, slo=slo, workload={"prompt_tokens": 2400, "max_tokens": 384}, search=search,
                            bounds=[])
    tables = capacity_report(result).splitlines()[1:]          # the sentence above them is prose: it folds
    assert max(map(len, tables)) <= 120, tables
    assert tables[:2] == ["users | verdict           | p50   | users | per-user | TTFT  | TTFT  | aggregate | missed",
                          "      |                   | tok/s | >= 50 | tok/s    | p95 s | p50 s | tok/s     | / flags"]
    assert tables[3:7] == [
        "48    | FAIL (first fail) | 49.9  | 44 %  | 49.9     | 0.76  | 0.559 | 2237.0    | note 1",
        "44    | pass (last pass)  | 51.0  | 77 %  | 51.0     | 0.728 | 0.52  | 2104.6    | note 2",
        "note 1: per-user tok/s: 44 % of users >= 50 (p50 49.9), needs 50 %",
        "note 2: client-bound run(s) measured again with 2 client processes"]
    assert tables[7:] == ["users | spread | margin   | runs | requests | wall s",
                          "------+--------+----------+------+----------+-------",
                          "48    | 0.1 %  | -0.00267 | 3    | 144      | 40",
                          "44    | 0.1 %  | 0.02     | 3    | 132      | 26"]
    wide = CapacityResult(users=21, slo=slo, workload={"prompt_tokens": 8192, "max_tokens": 384},
                          search=SearchResult(value=21, last_pass=held, first_fail=fail, stopped_by="slo", bound=None,
                                              step=2, probes=[fail, held], wall_s=90.0, boundary_ci95=(21, 22)),
                          bounds=[])
    frontier = frontier_table(FrontierResult(points=[result, wide], slo=slo, seats=128, kv_tokens=201_280),
                              {"kv_tokens": 201_280})
    assert max(map(len, frontier.splitlines())) <= 120, frontier
    assert frontier.splitlines()[:2] == [
        "context     | users  | boundary | stopped              | KV pool | seats | KV tokens/user | probes | requests | wall s",
        "tokens/user | at SLO | 95 % CI  | by                   | users   |       | at capacity    |        |          |"]
    assert frontier.splitlines()[3].split(" | ")[:4] == ["2,400      ", "44    ", "46-48   ", "per-user tok/s at 48"]


def test_settings_defaults_are_the_recipes_workload():
    s = CapacitySettings()
    assert (s.prompt_tokens, s.max_tokens, s.runs, s.resolution_pct, s.client_retries) == (2400, 384, 3, 10.0, 2)


def test_the_report_shows_the_boundarys_interval_named_as_such_and_the_cost():
    from pytest_glmf.results.report import gate_table

    header, body = gate_table("capacity", {"users@2400+384": {
        "users": 47, "boundary_ci95": [47, 50], "stopped_by": "slo", "probes": 4, "requests": 375, "wall_s": 120.0}})
    assert header == ["key", "users", "boundary_ci95", "stopped_by", "probes", "requests", "wall_s"]
    assert body == [["users@2400+384", "47", "[47, 50]", "slo", "4", "375", "120.0"]]


def test_a_probe_the_client_could_not_measure_is_neither_a_pass_nor_a_miss():
    recs = [record(u, 0.4, 60) for u in range(10)]
    bound = judge(10, row([recs], client_bound=True, workers=2), SLO95)
    assert not bound.passed and bound.workers == 2 and bound.margin is None
    assert bound.unmeasured.startswith("client self-check: client-bound run(s)")
    assert judge(10, row([recs], count_mismatch=True), SLO95).unmeasured.startswith("token counts")
    failed = judge(10, row([recs[:9] + [record(9, 0.4, 60, error="HTTP 503")]]), SLO95)
    assert failed.unmeasured == "" and not failed.passed      # the server's own failure is a verdict


def test_the_search_stops_undecided_at_an_unmeasured_probe_never_calling_it_a_miss():
    """Issue 31: a probe the client could not measure used to count as a miss ("none: even 1 users
    missed the service level")."""
    from pytest_glmf.gates.capacity.search import search, users_step
    from pytest_glmf.gates.capacity.slo import Miss, Probe

    def probe(x: float) -> Probe:
        if x < 12:
            return Probe(x=x, passed=True)
        return Probe(x=x, passed=False, misses=[Miss("client self-check", "client-bound", "a client that keeps up")],
                     unmeasured="client self-check: client-bound", workers=4)

    r = search(probe, start=8, floor=1, bound=Bound(1024, "max_users", "ceiling"), step=users_step(1, 10))
    assert [p.x for p in r.probes] == [8, 9, 11, 15]      # up while passing, then stopped at the first unmeasured
    assert r.stopped_by == "undecided" and r.value is None and r.first_fail is None and r.last_pass.x == 11
    assert r.undecided == ("at 15 the numbers are not the server's with 4 client process(es) (client self-check: "
                           "client-bound); the service level held at 11: the capacity is at least that")
    result = CapacityResult(users=None, slo=SLO95, workload={"prompt_tokens": 2400, "max_tokens": 384}, search=r,
                            bounds=[r.bound])
    assert capacity_sentence(result).endswith(f"(2,400 prompt + 384 output tokens): undecided: {r.undecided}; "
                                              f"4 probe(s), 0 requests, {r.wall_s:.0f} s")
    assert result.to_dict()["undecided"] == r.undecided and result.to_record()["users"] is None


def test_a_capacity_without_an_answer_fails_its_test_whatever_the_bounds():
    from pytest_glmf.gates.capacity import assert_capacity
    from pytest_glmf.gates.capacity.slo import Miss, Probe

    unmeasured = Probe(x=8, passed=False, unmeasured="client self-check: client-bound", workers=2)
    undecided = SearchResult(value=None, last_pass=None, first_fail=None, stopped_by="undecided",
                             bound=Bound(1024, "max_users", "ceiling"), step=1, probes=[unmeasured],
                             undecided="at 8 the numbers are not the server's")
    result = CapacityResult(users=None, slo=SLO95, workload={"prompt_tokens": 2400, "max_tokens": 384},
                            search=undecided, bounds=[])
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_capacity(result, source="thresholds.yaml: lanes.x.capacity", lane="x")
    assert str(failed.value).splitlines()[0] == ("capacity of lane 'x': no capacity: undecided: at 8 the numbers are "
                                                 "not the server's (thresholds.yaml: lanes.x.capacity)")
    missed = Probe(x=1, passed=False, misses=[Miss("TTFT p95", "3.000 s", "<= 1 s")])
    floor = SearchResult(value=None, last_pass=None, first_fail=missed, stopped_by="floor",
                         bound=Bound(1024, "max_users", "ceiling"), step=1, probes=[missed])
    result.search = floor
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_capacity(result)
    assert str(failed.value).splitlines()[0] == "no capacity: nothing passed: TTFT p95: 3.000 s, needs <= 1 s"


def test_the_interval_beside_the_answer_is_the_boundarys_named_as_such():
    """Issue 33: "44 users, 95 % CI 46-48" put the boundary's interval beside the last pass."""
    probes = [judge(44, row([[record(u, 0.5, 60) for u in range(44)]]), SLO95),
              judge(48, row([[record(u, 0.5, 40) for u in range(48)]]), SLO95)]
    search_ = SearchResult(value=44, last_pass=probes[0], first_fail=probes[1], stopped_by="slo",
                           bound=Bound(1024, "max_users", "ceiling"), step=4, probes=probes, boundary="smooth",
                           boundary_x=46.4, boundary_ci95=[46, 47])
    result = CapacityResult(users=44, slo=SLO95, workload={"prompt_tokens": 2400, "max_tokens": 384},
                            search=search_, bounds=[])
    text = capacity_sentence(result)
    assert ": 44 users (the last probe that passed: the service level held at 44, 48 missed " in text
    assert text.endswith("resolution 4); the boundary (a fit of the probes' margins) at 46.4, 95 % CI 46-47; "
                         "2 probe(s), 92 requests, 0 s")
    assert "95 % CI" not in text.split("the boundary")[0]
    doc = result.to_dict()
    assert doc["boundary_users"] == 46.4 and doc["boundary_ci95"] == [46, 47] and "ci95" not in doc
    # the baseline's spread: a resolution step (4 of 44), the boundary's interval being narrower
    assert result.to_record()["spread_by_metric_pct"] == {"users": pytest.approx(100 * 4 / 44)}


def test_the_public_api_is_importable_from_the_package_and_capacity_tests_run_alone():
    import pytest_glmf.gates.capacity as capacity
    from pytest_glmf.gates.capacity import (
        SLO,
        CapacityResult,
        CapacitySettings,
        FrontierResult,
        RateResult,
        assert_capacity,
        measure_capacity,
        measure_frontier,
        measure_rate_capacity,
    )
    from pytest_glmf.gates.capacity.check import assert_capacity as home
    from pytest_glmf.plugin import FIXTURE_MODULES
    from pytest_glmf.plugin.measuring import serial_fixtures

    assert assert_capacity is home and SLO is SLO95.__class__ and CapacitySettings().runs == 3
    assert all(callable(f) for f in (measure_capacity, measure_frontier, measure_rate_capacity))
    assert {CapacityResult.__name__, FrontierResult.__name__, RateResult.__name__} <= set(dir(capacity))
    assert "glmf_capacity" in serial_fixtures(FIXTURE_MODULES)


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], "glmf capacity: error: --workers: expected an integer >= 1, got 0"),
    (["--lag-p99-max-ms", "0"], "glmf capacity: error: --lag-p99-max-ms: expected a number > 0, got 0.0"),
    (["--client-error-max", "0"], "glmf capacity: error: --client-error-max: expected a number > 0, got 0.0"),
    (["--client-retries", "-1"], "glmf capacity: error: --client-retries: expected an integer >= 0, got -1"),
])
def test_the_curves_client_flags_are_checked_like_the_settings(args, message, capsys):
    from pytest_glmf.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["capacity", "--url", "http://127.0.0.1:9", "--slo", "ttft_s=1", *args])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(message)


def test_a_probe_is_judged_by_the_curves_error_bound_setting():
    # the client self-check's deciding setting (issue 31): capacity passes it to every probe's load run
    from pytest_glmf.gates.capacity.measure import _Session
    from pytest_glmf.load import LOAD_DEFAULTS

    settings = CapacitySettings(client_error_max_pct=12.5, lag_p99_max_s=0.05)
    probe = _Session("http://127.0.0.1:9", settings, SLO95).load_settings(settings, 8)
    assert (probe.client_error_max_pct, probe.error_max_pct, probe.lag_p99_max_s) == (12.5, 12.5, 0.05)
    assert (probe.users, probe.warmup, probe.runs) == ([8], False, settings.runs)   # the probe's warm pass is its own
    assert CapacitySettings().client_error_max_pct == LOAD_DEFAULTS.client_error_max_pct


def _frontier(*users_steps: tuple[int | None, float]) -> FrontierResult:
    points = []
    for i, (users, step) in enumerate(users_steps):
        search = SearchResult(value=users, last_pass=None, first_fail=None, stopped_by="slo",
                              bound=Bound(1024, "max_users", "ceiling"), step=step, probes=[])
        points.append(CapacityResult(users=users, slo=SLO95, workload={"prompt_tokens": 2048 * 2 ** i, "max_tokens": 64},
                                     search=search, bounds=[]))
    return FrontierResult(points=points, slo=SLO95)


def test_the_frontier_verdict_is_the_gates_own_and_counts_its_checks():
    """Issue 41: the frontier's verdict lived in the suite and counted nothing, so a session of
    only the frontier test had verified nothing; and it took no bounds as the other asserts do."""
    from pytest_glmf.gates.capacity import assert_frontier
    from pytest_glmf.gates.verdict import evaluated_count

    before = evaluated_count()
    assert_frontier(_frontier((40, 1), (20, 1), (8, 1)))
    assert evaluated_count() - before == 3 + 2 + 0     # each point, each neighbouring pair (no bounds)
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_frontier(_frontier((20, 1), (24, 1)), details="the table")
    assert str(failed.value) == ("capacity frontier not measured cleanly:\ncapacity rises with context: 20 users at "
                                 "2,048 tokens, 24 at 4,096 (more than the resolution, 1): noisy measurements"
                                 "\n\nthe table")
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_frontier(_frontier((40, 1), (6, 1)), lane="x", users={"min": 8})
    lines = str(failed.value).splitlines()
    assert lines[0] == "capacity frontier of lane 'x': 1 threshold(s) missed" and "test_capacity_units.py:" in lines[-1]
    with pytest.raises(pytest.fail.Exception) as failed:       # a bound is checked as the thresholds loader checks it
        assert_frontier(_frontier((40, 1)), user={"min": 8})
    assert "assert_frontier() at " in str(failed.value) and "unknown key 'user'" in str(failed.value)


def test_assert_capacity_takes_bounds_as_the_other_gates_do_and_counts_the_answer():
    """Issue 41: assert_capacity took a positional mapping, unchecked, and counted nothing without bounds."""
    from pytest_glmf.gates.capacity import assert_capacity
    from pytest_glmf.gates.verdict import evaluated_count

    result = _frontier((12, 1)).points[0]
    before = evaluated_count()
    assert_capacity(result)
    assert_capacity(result, users={"min": 8})
    assert evaluated_count() - before == 1 + 2          # the answer, then the answer and the bound
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_capacity(result, users={"min": 1e9, "max": 2})
    assert str(failed.value).startswith("assert_capacity() at ") and "min 1000000000 > max 2" in str(failed.value)
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_capacity(result, lane="x", users={"min": 16})
    assert str(failed.value).splitlines()[0] == "capacity of lane 'x': 1 threshold(s) missed"
