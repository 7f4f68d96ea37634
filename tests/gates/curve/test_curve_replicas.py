"""A lane of several replicas (or DP ranks without a router): two real simulators, attached by their
URLs with one boot log each. Each replica's boot facts are read on their own and the seats summed
with the per-replica breakdown; the curve deals its streams round-robin over both, which each
simulator's own /metrics counter confirms."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from pytest_glmf.config.lanes import LaneConfig, builtin_lanes
from pytest_glmf.gates.curve.checks import row_gate_checks
from pytest_glmf.launch import launch_lane, server_from_dict, server_to_dict
from pytest_glmf.load import LoadSettings, Workload, load_prompt_variants, run_rows, server_endpoints


def _sim(tmp_path_factory, slots: int):
    # the batch lane with a state budget of `slots` / 5 per request seats (the round-1 mistake at 35)
    extra = ["--max-mamba-cache-size", str(slots), "--mamba-ssm-dtype", "bfloat16", "--enable-metrics"]
    lane = dataclasses.replace(builtin_lanes()["batch"], name=f"replica{slots}", extra=extra, time_scale=0.1)
    return launch_lane(lane, tmp_path_factory.mktemp("replica"), f"replica{slots}")


@pytest.fixture(scope="module")
def two_sims(tmp_path_factory):
    sims = [_sim(tmp_path_factory, 35), _sim(tmp_path_factory, 50)]     # 7 and 10 seats
    yield sims
    for sim in sims:
        sim.stop()


@pytest.fixture(scope="module")
def replica_lane(two_sims, tmp_path_factory):
    lane = LaneConfig(name="dp2", launcher="attach", urls=[s.base_url for s in two_sims],
                      boot_logs=[str(s.boot_log_path) for s in two_sims], engine="sglang")
    return launch_lane(lane, tmp_path_factory.mktemp("attach"), "dp2")


def test_two_replica_urls_give_per_replica_boot_facts_and_summed_seats(replica_lane, two_sims):
    server = replica_lane
    assert [r.base_url for r in server.replicas] == [s.base_url for s in two_sims]
    assert server.stream_urls == [s.base_url for s in two_sims] and server.base_url == two_sims[0].base_url
    urls, facts = server_endpoints(server)
    assert urls == server.stream_urls
    assert [r["max_running_requests"] for r in facts["replicas"]] == [7, 10]
    assert facts["max_running_requests"] == 17 and facts["assigned_by"] == "client"
    assert facts["kv_tokens"] == sum(s.boot_facts.kv_tokens for s in two_sims)
    assert facts["cap_reason"].startswith(f"{two_sims[0].base_url}: max_running_requests capped to 7")
    # an xdist worker gets the same lane: replicas travel with the server
    again = server_from_dict(json.loads(json.dumps(server_to_dict(server))))
    assert server_endpoints(again) == (urls, facts)


def test_a_router_with_its_replicas_boot_logs_sums_the_seats_and_leaves_the_assignment_to_it(two_sims, tmp_path):
    # the first simulator stands in for the router: one URL, the replicas known by their boot logs
    lane = LaneConfig(name="routed", launcher="attach", url=two_sims[0].base_url,
                      boot_logs=[str(s.boot_log_path) for s in two_sims])
    server = launch_lane(lane, tmp_path, "routed")
    urls, facts = server_endpoints(server)
    assert urls == [two_sims[0].base_url] and facts["assigned_by"] == "router"
    assert facts["max_running_requests"] == 17
    assert [r["name"] for r in facts["replicas"]] == [str(s.boot_log_path) for s in two_sims]
    from pytest_glmf.load import seat_check

    seat = seat_check(16, facts)     # 16 <= 17 summed; how the router splits them is its own business
    assert not seat["shared"] and [r["users"] for r in seat["replicas"]] == [None, None]
    assert seat_check(18, facts)["shared"]


def test_the_curve_deals_its_streams_over_both_replicas(replica_lane, two_sims):
    urls, facts = server_endpoints(replica_lane)
    workload = Workload(prompts=load_prompt_variants(), max_tokens=12)
    settings = LoadSettings(users=[12, 16], runs=1, warmup=False, lag_p99_max_s=1.0, client_error_max_pct=math.inf, metrics_sample_s=0.05)
    twelve, sixteen = run_rows(urls, workload, settings, facts)
    run = twelve["per_run"][0]
    assert run["errors"] == 0 and run["token_count"]["ok"], run["token_count"]
    # each simulator's own generation counter saw exactly its half of the streams
    assert [(e["url"], e["streams"], e["metrics_delta"]) for e in run["server"]["per_endpoint"]] == \
        [(two_sims[0].base_url, 6, 6 * 12), (two_sims[1].base_url, 6, 6 * 12)]
    assert [r["endpoint"] for r in run["records"]] == [u % 2 for u in range(12)]
    assert twelve["seats"] == 17 and not twelve["seat"]["shared"] and twelve["urls"] == urls
    # 16 users fit the 17 summed seats, but round-robin puts 8 on the replica with 7
    assert sixteen["seats"] == 17 and sixteen["seat"]["shared"]
    assert f"replica 1 ({two_sims[0].base_url}): 8 clients sharing 7 seats" in sixteen["seat"]["notes"]
    failed = {c.metric: c for c in row_gate_checks(sixteen, {}) if not c.ok}
    assert set(failed) == {"seats of replica 1"}
    assert failed["seats of replica 1"].value == 7 and "--max-mamba-cache-size" in failed["seats of replica 1"].hint


def test_curve_suite_on_a_lane_of_two_replicas(pytester, two_sims):
    urls = ", ".join(f"'{s.base_url}'" for s in two_sims)
    logs = ", ".join(f"'{s.boot_log_path}'" for s in two_sims)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  dp2: {{launcher: attach, urls: [{urls}], boot_logs: [{logs}]}}\n")
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n  dp2:\n    curve:\n"
        "      settings: {max_tokens: 12, runs: 1, warmup: false, lag_p99_max_s: 1.0, client_error_max_pct: 1.0e+9, spread_max_pct: 100}\n"
        "      rows:\n        - {users: 12, per_user_tok_s: {min: 1}}\n"))
    from importlib import resources

    suite = str(resources.files("pytest_glmf.suites").joinpath("test_curve.py"))
    results = pytester.path / "results"
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "dp2", "--glmf-thresholds", str(thresholds),
                                "--glmf-results", str(results), "-v", suite)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_curve_row?users=12? PASSED*"])
    row = json.loads(next(results.rglob("*.json")).read_text())["gates"]["curve"]["users=12"]
    assert row["seats"] == 17 and row["urls"] == [s.base_url for s in two_sims]
    assert [(r["users"], r["seats"]) for r in row["seat"]["replicas"]] == [(6, 7), (6, 10)]


def test_glmf_curve_with_two_urls_their_boot_logs_and_two_workers(two_sims, tmp_path, capsys):
    from pytest_glmf.gates.curve.cli import cli as curve_cli

    out = tmp_path / "curve.json"
    argv = ["--users", "12", "--max-tokens", "12", "--runs", "1", "--no-warmup", "--lag-p99-max-ms", "1000", "--client-error-max", "inf",
            "--workers", "2", "--json", str(out)]
    for sim in two_sims:
        argv += ["--url", sim.base_url, "--boot-log", str(sim.boot_log_path)]
    assert curve_cli(argv) == 0
    text = capsys.readouterr()
    assert "client workers: 2 (set)" in text.err
    row = json.loads(out.read_text())["command_output"]["rows"][0]
    assert row["seats"] == 17 and row["workers"] == 2
    records = row["per_run"][0]["records"]
    assert sorted((r["worker"], r["endpoint"]) for r in records) == sorted((u % 2, u % 2) for u in range(12))
    assert [e["metrics_delta"] for e in row["per_run"][0]["server"]["per_endpoint"]] == [6 * 12, 6 * 12]
    # one boot log for two urls: which replica it belongs to is unknown, so it is refused
    with pytest.raises(SystemExit):
        curve_cli(argv[:-4] + ["--url", two_sims[1].base_url])
    assert "1 --boot-log for 2 --url: give one boot log per url, in order" in capsys.readouterr().err


def test_glmf_curve_on_one_url_without_a_boot_log_takes_the_servers_word(two_sims, tmp_path, capsys):
    """From a shell: the seats come from the server's /server_info (SGLang's effective seats), and a
    row shorter than its decode_log_interval gets no false "/metrics: at most 0 running" note."""
    from pytest_glmf.gates.curve.cli import cli as curve_cli

    out = tmp_path / "curve.json"
    argv = ["--url", two_sims[0].base_url, "--users", "8", "--max-tokens", "8", "--runs", "1", "--no-warmup",
            "--lag-p99-max-ms", "1000", "--client-error-max", "inf", "--json", str(out)]
    assert curve_cli(argv) == 0
    err = capsys.readouterr().err
    assert "glmf curve: the server says: speculative_algorithm null, " in err and "max_running_requests 7" in err
    row = json.loads(out.read_text())["command_output"]["rows"][0]
    notes = row["seat"]["notes"]
    assert row["seats"] == 7 and row["seat"]["shared"] and notes[0] == "8 clients sharing 7 seats", row["seat"]
    assert row["seat"]["gauge_stale"] and not any("/metrics: at most" in n for n in notes), row["seat"]
    assert row["memory"]["kv_tokens"] == 7242496   # the KV pool the server said
