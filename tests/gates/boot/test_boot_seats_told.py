"""Seats from the server's word where the boot log has none (issue 31 item 4, issue 33 item 4), every
cap vLLM applies read from its boot log (issue 32 item 2), and the boot table's units and hints
(issue 33 item 12).

The vLLM logs here are written from vLLM 0.33.0's own format strings (the released wheel's source,
file:line cited at each), %-formatted the way its logger does, behind vLLM's line prefix.
"""
from __future__ import annotations

import dataclasses
import re

import pytest

from pytest_glmf.config.lanes import builtin_lanes
from pytest_glmf.engine.serverconfig import ServerConfig
from pytest_glmf.gates.boot import assert_boot, assert_seats, parse_boot_log
from pytest_glmf.gates.boot.hints import MAMBA_ADVICE, seat_cap_hint
from pytest_glmf.gates.boot.table import render_facts
from pytest_glmf.gates.boot.told import complete_facts
from pytest_glmf.gates.boot.vllm import VLLM_LINES

# vLLM 0.33.0 (vllm-0.33.0 wheel), the format strings the boot gate reads:
NON_DEFAULT = "non-default args: %s"                                     # entrypoints/common/startup.py:96
ENGINE = "Initializing a V1 LLM engine (v%s) with config: %s"            # v1/engine/core.py:140
MAX_MODEL_LEN = "Using max model len %s"                                 # config/model.py:2170
KV_MEMORY = "Available KV cache memory: %s GiB"                          # v1/worker/gpu_worker.py:773
KV_SIZE = ("%s KV cache size: %s tokens, "                               # v1/core/kv_cache_utils.py:1148
           "Maximum concurrency for %s tokens per request: %.2fx")
AUTO_FIT = ("Auto-fit max_model_len: reduced from %d to %d to fit in "   # v1/core/kv_cache_planning.py:1405
            "available KV cache memory (%s)")
OVERRIDE = ("The %s draft pass needs %d query tokens per request within "  # config/vllm.py:2387
            "max_num_batched_tokens=%d. Overriding max_num_active_seqs "
            "from %d to %d.")


def line(fmt: str, *args: object, proc: str = "EngineCore_DP0 pid=7", where: str = "core.py:140") -> str:
    return f"({proc}) INFO 11-29 14:28:17 [{where}] " + (fmt % args) + "\n"


def vllm_033_log(args: dict, *extra: str, tokens: int = 4_123_456, ctx: int = 4096, factor: float = 1006.66) -> str:
    return (line(NON_DEFAULT, args, proc="APIServer pid=1", where="startup.py:96")
            + line(ENGINE, "0.33.0", "model='m', dtype=torch.bfloat16, max_seq_len=4096, tensor_parallel_size=1, "
                   "kv_cache_dtype=auto, device_config=cuda")
            + line(MAX_MODEL_LEN, ctx, where="model.py:2170")
            + "".join(extra)
            + line(KV_MEMORY, "64.00", proc="Worker_TP0 pid=9", where="gpu_worker.py:773")
            + line(KV_SIZE, "GPU", f"{tokens:,}", f"{ctx:,}", factor, where="kv_cache_utils.py:1148")
            + "(APIServer pid=1) INFO:     Application startup complete.\n")


def test_the_declared_formats_are_the_ones_these_logs_are_written_from() -> None:
    """The one declared place a census reads (gates/boot/vllm.py VLLM_LINES) holds these strings."""
    declared = {x.fmt for x in VLLM_LINES.values() if x.fmt}
    assert {NON_DEFAULT, ENGINE, MAX_MODEL_LEN, KV_MEMORY, KV_SIZE, AUTO_FIT, OVERRIDE} <= declared
    assert VLLM_LINES["active_seqs_override"].source == "vllm/config/vllm.py"
    assert VLLM_LINES["context_auto_fit"].source == "vllm/v1/core/kv_cache_planning.py"
    assert VLLM_LINES["non_default_args"].source == "vllm/entrypoints/common/startup.py"


def test_a_0_33_boot_log_parses() -> None:
    f = parse_boot_log(vllm_033_log({"max_model_len": 4096, "max_num_seqs": 512}))
    assert (f.engine, f.ready, f.problems) == ("vllm", True, [])
    assert (f.max_running_requests, f.kv_tokens, f.context_len, f.kv_cache_memory_gib) == (512, 4_123_456, 4096, 64.0)
    assert f.max_concurrency == {"tokens_per_request": 4096, "factor": 1006.66}
    assert f.kv_pools == [{"tokens": 4_123_456, "dtype": "bfloat16", "size_gb": 64.0}]
    # the pool holds 1006.66 full-length requests for 512 seats: not what limits, no KV note
    assert f.cap_reason == "max_running_requests is vLLM's --max-num-seqs 512: raise --max-num-seqs"


def test_the_dflash_override_gives_the_seats_with_the_line_and_the_flag_that_lifts_it() -> None:
    quoted = OVERRIDE % ("dflash", 16, 2048, 256, 128)
    f = parse_boot_log(vllm_033_log({"max_num_seqs": 256, "max_num_batched_tokens": 2048},
                                    line(OVERRIDE, "dflash", 16, 2048, 256, 128, proc="APIServer pid=1",
                                         where="vllm.py:2387")))
    assert (f.max_running_requests, f.requested_max_running_requests) == (128, 256)
    assert f.cap_reason == (f'max_running_requests is vLLM\'s max_num_active_seqs 128, lowered from 256 at boot: '
                            f'"{quoted}": raise --max-num-batched-tokens (>= 4,096 = 256 x 16 for 256 seats)')


def test_the_override_of_the_gpu_default_gives_seats_the_log_otherwise_never_says() -> None:
    f = parse_boot_log(vllm_033_log({"max_num_batched_tokens": 1024},
                                    line(OVERRIDE, "dspark", 16, 1024, 1024, 64, where="vllm.py:2387")))
    assert (f.max_running_requests, f.requested_max_running_requests) == (64, 1024)
    assert "dspark draft pass" in f.cap_reason and "raise --max-num-batched-tokens" in f.cap_reason


def test_max_num_active_seqs_flag_is_the_cap_below_max_num_seqs(unfold) -> None:
    f = parse_boot_log(vllm_033_log({"max_num_seqs": 256, "max_num_active_seqs": 32}))
    assert (f.max_running_requests, f.requested_max_running_requests) == (32, 256)
    assert f.cap_reason == ("max_running_requests is vLLM's --max-num-active-seqs 32 (the requests admitted into "
                            "RUNNING; --max-num-seqs 256 sizes the runner): raise --max-num-active-seqs")
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_seats(f, [8, 48], source="t")
    assert re.search(r"seats < users @ 48 users \| 32 .*\| note 1\nnote 1: .*raise --max-num-active-seqs",
                     unfold(str(failed.value))), str(failed.value)


def test_auto_fit_context_wins_over_the_requested_one() -> None:
    f = parse_boot_log(vllm_033_log({}, line(AUTO_FIT, 131072, 65536, "12.5 GiB", where="kv_cache_planning.py:1405"),
                                    ctx=131072))
    assert f.context_len == 65536


# -- the server's word ---------------------------------------------------------------------------

VLLM_SAYS_1024 = ServerConfig(engine="vllm", max_running_requests=1024, seats_told="scheduler_config.max_num_seqs",
                              told={"max_running_requests": "/server_info", "speculative_algorithm": "/server_info"})


def test_gpu_seats_come_from_server_info_and_say_so(unfold) -> None:
    """vLLM on a GPU never prints max_num_seqs; /server_info says 1024 (the H200 of issue 31)."""
    logged = parse_boot_log(vllm_033_log({"max_model_len": 4096}))
    assert logged.max_running_requests is None
    f = complete_facts(logged, VLLM_SAYS_1024)
    assert f.max_running_requests == 1024 and f.kv_tokens == 4_123_456
    assert f.sources == {"max_running_requests": "/server_info", "kv_tokens": "boot log", "context_len": "boot log"}
    assert f.cap_reason == ("max_running_requests is vLLM's scheduler_config.max_num_seqs 1024 as /server_info says "
                            "(the boot log does not print it): raise --max-num-seqs")
    assert_seats(f, [1, 8, 32, 128], source="t")
    assert_boot(f, source="t", max_running_requests={"min": 1024})
    table = render_facts(f)
    assert "max_running_requests           | 1024 (/server_info)" in table
    assert "kv_pool[0]                     | 4,123,456 tokens, bfloat16, 64.00 GiB" in table
    assert "max_concurrency                | 1006.66x at 4,096 tokens/request (fewer full-length requests " \
           "than the 1,024 seats)" in table
    assert "holds only" not in table and " GB" not in table
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_seats(f, 2048, source="t")
    assert "seats < users @ 2048 users | 1024     | >= 2048  | note 1\nnote 1: max_running_requests is vLLM's " \
           "scheduler_config.max_num_seqs 1024 as /server_info says (the boot log does not print it): raise " \
           "--max-num-seqs (t)" in unfold(str(failed.value))


def test_the_log_wins_where_it_speaks() -> None:
    f = complete_facts(parse_boot_log(vllm_033_log({"max_num_seqs": 64})), VLLM_SAYS_1024)
    assert f.max_running_requests == 64 and f.sources["max_running_requests"] == "boot log"
    assert f.cap_reason == "max_running_requests is vLLM's --max-num-seqs 64: raise --max-num-seqs"


def test_nothing_said_names_how_to_say_it(unfold) -> None:
    f = complete_facts(parse_boot_log(vllm_033_log({})), ServerConfig(engine="vllm"))
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_seats(f, 8, source="t")
    assert re.search(r"seats < users @ 8 users \| -  .*\| note 1\nnote 1: neither the boot log nor the server says it: "
                     r"give the server's boot log .*--glmf-boot-log FILE.*VLLM_SERVER_DEV_MODE=1",
                     unfold(str(failed.value))), str(failed.value)


def test_a_mamba_hint_names_only_what_the_lane_does_not_set() -> None:
    """The batch lane passes --mamba-ssm-dtype bfloat16: halving the state with it is no advice."""
    reason = f"max_running_requests is capped to 7 by the mamba state cache. To raise it: {MAMBA_ADVICE}."
    lanes = builtin_lanes()
    assert "--mamba-ssm-dtype bfloat16" in seat_cap_hint(reason, lanes["daily"])
    hint = seat_cap_hint(reason, lanes["batch"])
    assert "--mamba-ssm-dtype" not in hint and "--max-mamba-cache-size" in hint
    as_one_word = dataclasses.replace(lanes["daily"], extra=[*lanes["daily"].extra, "--mamba-ssm-dtype=bfloat16"])
    assert "--mamba-ssm-dtype" not in seat_cap_hint("capped by the mamba state cache", as_one_word)


def test_an_entry_without_a_value_in_any_column_is_no_table_row() -> None:
    from pytest_glmf.results.report import gate_table

    facts = {k: 1 for k in ("max_running_requests", "requested_max_running_requests", "kv_tokens", "context_len",
                            "cap_reason", "engine", "max_mamba_cache_size", "state_slots_per_request",
                            "kv_pool_layout", "kv_cache_memory_gib", "ready", "problems_count")}
    _, rows = gate_table("boot", {"facts": facts, "state_pool": {"slots": 48, "parts_gb": {"conv": 1.0}}})
    assert [r[0] for r in rows] == ["facts"]


# -- the attach path, the simulator as "my server" --------------------------------------------

MY_TESTS = """
from pytest_glmf.gates.boot import assert_boot, assert_boot_log_clean, assert_seats


def test_every_user_gets_a_seat(glmf_boot_facts, glmf_lane):
    assert_seats(glmf_boot_facts, [1, {seats}], lane=glmf_lane)


def test_seats_bound(glmf_boot_facts, glmf_lane):
    assert_boot(glmf_boot_facts, lane=glmf_lane, max_running_requests={{"min": {seats}}})


def test_seats_short(glmf_boot_facts, glmf_lane):
    assert_seats(glmf_boot_facts, {more}, lane=glmf_lane)


def test_log_clean(glmf_boot_facts, glmf_lane):
    assert_boot_log_clean(glmf_boot_facts, lane=glmf_lane)
"""


def test_attached_without_a_boot_log_the_helpers_and_the_suite_agree_with_the_header(pytester, daily_sim,
                                                                                     unfold) -> None:
    """Issue 33 item 4: --glmf-url to a healthy server failed with "measured None" while the header
    said its seats from /server_info."""
    seats = parse_boot_log(daily_sim.boot_log).max_running_requests   # the simulator's truth, from its own log
    assert seats
    pytester.makepyfile(test_mine=MY_TESTS.format(seats=seats, more=seats + 1))
    thresholds = pytester.makefile(".yaml", thresholds=f"schema: 1\nlanes:\n  daily:\n    curve:\n      rows:\n"
                                                       f"        - {{users: 1}}\n        - {{users: {seats}}}\n")
    result = pytester.runpytest_subprocess("--glmf-url", daily_sim.base_url, "--glmf-lane", "daily",
                                           "--glmf-thresholds", str(thresholds), "-p", "no:cacheprovider", "-rs",
                                           "test_mine.py", "-k", "test_seats_cover_every_curve_row or test_mine")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    # no boot log read: the log's own check says so and how to give one, as the suite's does (it passed silently)
    result.stdout.fnmatch_lines(["SKIPPED * no boot log for lane 'daily': nothing was checked for problems; give it "
                                 "with --glmf-boot-log FILE (an attached server) or boot_log: FILE in the lane"])
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        f"seats < users @ {seats + 1} users | {seats} * | >= {seats + 1} * | note 1",
        "note 1: max_running_requests is SGLang's "
        f"internal_states[].effective_max_running_requests_per_dp {seats} as /server_info says (the boot log does not "
        "print it): raise --max-running-requests, or the cache that caps it (give the boot log to see which) "
        "(test_mine.py:*)"])
    assert "measured None" not in result.stdout.str()
    # the ready-made suite, same server: seats from /server_info, the log-only checks skipped with the way out
    suite = pytester.runpytest_subprocess("--glmf-url", daily_sim.base_url, "--glmf-lane", "daily",
                                          "--glmf-thresholds", str(thresholds), "-p", "no:cacheprovider", "-rs",
                                          "-k", "test_seats_cover_every_curve_row or test_boot_log_has_no_problems",
                                          "--glmf-allow-unverified")
    suite.assert_outcomes(passed=1, skipped=1)
    suite.stdout.fnmatch_lines(["SKIPPED * no boot log for lane 'daily' (attached to *); give it with "
                                "--glmf-boot-log FILE or boot_log: FILE in the lane"])


def test_glmf_boot_log_gives_an_attached_server_its_log(pytester, daily_sim) -> None:
    log = pytester.path / "my-server.log"
    log.write_text(daily_sim.boot_log)
    seats = parse_boot_log(daily_sim.boot_log).max_running_requests
    pytester.makeini(f"[pytest]\nglmf_boot_log = {log.name}\n")
    pytester.makepyfile(test_log="""
def test_the_log_is_read(glmf_server, glmf_boot_facts):
    assert glmf_server.boot_log_path is not None and glmf_boot_facts.ready
    assert glmf_boot_facts.sources["max_running_requests"] == "boot log"
    print("SEATS", glmf_boot_facts.max_running_requests)
""")
    result = pytester.runpytest_subprocess("--glmf-url", daily_sim.base_url, "-p", "no:cacheprovider", "-s",
                                           "test_log.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*SEATS {seats}*"])
    # the suite's log-only check now runs (the ini twin gave the log, the CLI flag wins over it)
    suite = pytester.runpytest_subprocess("--glmf-url", daily_sim.base_url, "--glmf-boot-log", str(log),
                                          "-p", "no:cacheprovider", "-k", "test_boot_log_has_no_problems",
                                          "--glmf-allow-unverified")
    suite.assert_outcomes(passed=1)


@pytest.mark.parametrize(("args", "message"), [
    (["--glmf-boot-log", "nope.log", "--glmf-url", "http://127.0.0.1:9"],
     "ERROR: --glmf-boot-log: nope.log is not a readable file (expected the attached server's boot log, e.g. the "
     "file its stdout went to, or `docker logs NAME > boot.log`)"),
    (["--glmf-boot-log", "boot.log", "--glmf-lane", "daily"],
     "ERROR: --glmf-boot-log is for attached servers (--glmf-url, or launcher attach); lane 'daily' (<built-in>) uses "
     "launcher sim, whose boot log the plugin writes itself"),
    (["--glmf-boot-log", "boot.log"],
     "ERROR: --glmf-boot-log needs an attached server: pass --glmf-url URL (or a lane with launcher attach)"),
    (["--glmf-boot-log", "boot.log", "--glmf-lane", "daily", "--glmf-lane", "batch"],
     "ERROR: --glmf-boot-log is one attached server's boot log; it cannot be the 2 lanes daily, batch (set each "
     "lane's boot_log: in the lanes file)"),
])
def test_glmf_boot_log_mistakes_are_one_line(pytester, args, message) -> None:
    (pytester.path / "boot.log").write_text("x\n")
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


VLLM_GPU_SERVER = r'''
import http.server, json, sys

port = int(sys.argv[1])
ROUTES = {
    "/v1/models": {"object": "list", "data": [{"id": "llama-1b", "owned_by": "vllm", "max_model_len": 4096}]},
    "/version": {"version": "0.26.0"},
    # VLLM_SERVER_DEV_MODE=1 (vllm/entrypoints/serve/dev/server_info/api_router.py)
    "/server_info?config_format=json": {"vllm_config": {"speculative_config": None,
                                        "scheduler_config": {"max_num_seqs": 1024, "max_num_active_seqs": None}}},
}

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ROUTES.get(self.path)
        raw = json.dumps(body if body is not None else {"detail": "Not Found"}).encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


@pytest.fixture
def vllm_gpu_server(pytester):
    """A vLLM 0.26 on an H200 as issue 31 met it, as far as the boot gate asks: its log (written from
    the format strings above) never prints max_num_seqs; its dev-mode /server_info says 1024."""
    import socket
    import subprocess
    import sys
    import time

    import httpx

    pytester.makepyfile(vllm_gpu_server=VLLM_GPU_SERVER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "vllm_gpu_server.py", str(port)], cwd=pytester.path)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(url + "/v1/models", timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_boot_suite_on_a_gpu_vllm_takes_its_seats_from_server_info(pytester, vllm_gpu_server) -> None:
    """Issue 31: seats "unknown" and test_seats_cover_every_curve_row failed while the header said 1024."""
    (pytester.path / "vllm.log").write_text(vllm_033_log({"max_model_len": 4096}))
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  gpu: {{engine: vllm, launcher: attach, url: '{vllm_gpu_server}', "
                                             "boot_log: vllm.log}\n")
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n  gpu:\n    boot:\n      max_running_requests: {min: 1024}\n    curve:\n      rows:\n"
        + "".join(f"        - {{users: {u}}}\n" for u in (1, 8, 32, 128))))
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "gpu", "--glmf-thresholds",
                                           str(thresholds), "-p", "no:cacheprovider", "-k",
                                           "test_seats_cover_every_curve_row or test_boot_facts_meet_thresholds or "
                                           "test_boot_log_has_no_problems")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.assert_outcomes(passed=3)
    # the end-of-session boot table: the seats and where they came from
    result.stdout.fnmatch_lines(["key   | max_running | *cap *", "      | requests    | *reason *",
                                 "facts | 1024        | 4,123,456 | * | note 1 *",
                                 "note 1: max_running_requests is vLLM's scheduler_config.max_num_seqs 1024 as /server_info*"])


def test_kv_pool_dtypes_without_a_log_say_how_to_give_it(unfold) -> None:
    f = complete_facts(parse_boot_log(""), ServerConfig(engine="sglang", max_running_requests=10,
                                                         told={"max_running_requests": "/server_info"}))
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_boot(f, source="t", kv_pool_dtypes=["bfloat16"])
    assert re.search(r"\(no KV pool line in the boot log\) .*\| note 1\nnote 1: .*the KV pool dtypes are only in the "
                     r"boot log: give it \(boot_log: in the lane, or --glmf-boot-log FILE\)",
                     unfold(str(failed.value))), str(failed.value)
