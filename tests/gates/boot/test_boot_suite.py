"""The ready-made boot suite (pytest_glmf/suites/test_boot.py) on an attached server with a known boot log."""
from __future__ import annotations

import pytest

CAPPED_LOG = """\
[2026-09-11 10:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 597000, KV size: 30.00 GB
[2026-09-11 10:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 597000, KV size: 3.00 GB
[2026-09-11 10:00:00 TP0] max_running_requests is capped to 7 by the mamba state cache (max_mamba_cache_size=38, 5 state slots per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16.
[2026-09-11 10:00:00 TP0] max_total_num_tokens=597000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=7, context_len=1048576, available_gpu_mem=10.00 GB
[2026-09-11 10:00:03] The server is fired up and ready to roll!
"""
GOOD_LOG = (CAPPED_LOG.replace("torch.bfloat16, #tokens: 597000, KV size: 3.00", "torch.float8_e4m3fn, #tokens: 597000, KV size: 3.00")
            .replace("max_running_requests=7,", "max_running_requests=9,").splitlines(keepends=True))
GOOD_LOG = "".join(line for line in GOOD_LOG if "is capped to" not in line)

THRESHOLDS = """\
schema: 1
lanes:
  daily:
    boot:
      max_running_requests: {min: 9}
      context_len: {min: 1048576}
      kv_pool_dtypes: [fp8_e4m3, bfloat16]
    curve:
      rows:
        - {users: 1}
        - {users: 8}
        - {users: 9}
        - {users: 32, allow_queueing: true}
"""


# the boot suite's tests by full name: -k also matches the folders above the bundled suites (a checkout
# in a folder named "bootseats" would match "seats")
BOOT_TESTS = ("test_boot_log_has_no_problems or test_boot_facts_meet_thresholds or test_kv_pool_dtypes or "
              "test_seats_cover_every_curve_row")


def run_boot_suite(pytester: pytest.Pytester, server, log: str, thresholds_text: str = THRESHOLDS) -> pytest.RunResult:
    (pytester.path / "boot.log").write_text(log)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  daily: {{launcher: attach, url: '{server.base_url}', "
                                             "boot_log: boot.log}\n")
    thresholds = pytester.makefile(".yaml", thresholds=thresholds_text)
    # no path arguments: the plugin collects its bundled suites; -k keeps it to the boot gate
    return pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "daily", "--glmf-thresholds",
                              str(thresholds), "-k", BOOT_TESTS, "-p", "no:cacheprovider")


def test_boot_suite_passes_on_the_recipe_daily_boot(pytester, running_fake_server) -> None:
    result = run_boot_suite(pytester, running_fake_server, GOOD_LOG)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.assert_outcomes(passed=4)


def test_boot_suite_fails_with_cap_reason_dtypes_and_queued_rows(pytester, running_fake_server, unfold) -> None:
    result = run_boot_suite(pytester, running_fake_server, CAPPED_LOG)
    result.assert_outcomes(passed=1, failed=3)
    out = pytest.LineMatcher(unfold(result.stdout.str()).splitlines())   # notes too long for 120 columns: under
    out.fnmatch_lines([
        "boot facts of lane 'daily': 1 threshold(s) missed",
        "metric               | measured | expected | note",
        "---------------------+-*",
        "max_running_requests | 7        | >= 9     | note 1",
        "note 1: -22.2 %; max_running_requests *capped to 7 by the mamba state "
        "cache (max_mamba_cache_size=38, 5 state slots per request)*--max-mamba-cache-size*"
        "(thresholds.yaml: lanes.daily.boot)",
    ], consecutive=True)
    out.fnmatch_lines([
        "KV pool dtypes of lane 'daily' differ from the thresholds",
        "metric         | measured           | expected           | note",
        "---------------*",
        "kv_pool_dtypes | bfloat16, bfloat16 | bfloat16, fp8_e4m3 | note 1",
        "note 1: layout: one line per KV pool; check "
        "--kv-cache-dtype (not set) and the attention backend; (thresholds.yaml: lanes.daily.boot)",
    ], consecutive=True)
    out.fnmatch_lines([
        "lane 'daily': 2 curve row(s) would queue behind the seat cap",
        "metric                  | measured | expected | note",
        "------------------------*",
        "seats < users @ 8 users | 7        | >= 8     | note 1",
        "seats < users @ 9 users | 7        | >= 9     | note 1",           # the same note, once
        "note 1: max_running_requests *--max-mamba-cache-size* (thresholds.yaml: lanes.daily.curve)",
    ], consecutive=True)


def test_boot_suite_skips_on_an_attached_server_without_boot_log(pytester, running_fake_server) -> None:
    result = pytester.runpytest_subprocess("--glmf-url", running_fake_server.base_url, "--glmf-lane", "batch",
                                           "-k", BOOT_TESTS, "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=4)
    # the fake server tells nothing of itself either: every test says how to give the boot log
    result.stdout.fnmatch_lines([f"SKIPPED ?1? *test_boot.py*: no boot log for lane 'batch' (attached to "
                                 f"{running_fake_server.base_url}); give it with --glmf-boot-log FILE or boot_log: "
                                 "FILE in the lane"])
    result.stdout.fnmatch_lines([f"SKIPPED ?1? *test_boot.py*: no boot log for lane 'batch' and the server at "
                                 f"{running_fake_server.base_url} tells no seats, KV pool or context (/server_info); "
                                 "give the boot log with --glmf-boot-log FILE or boot_log: FILE in the lane"])


RELEASED_LOG = """\
[2026-10-30 10:00:00] server_args={'model_path': '/models/GLM-5.3-Flash-NVFP4', 'max_running_requests': None}
[2026-10-30 10:00:01 TP0] Load weight end. elapsed=23.18 s, type=Glm5NextForConditionalGeneration, avail mem=91.56 GB, mem usage=158.44 GB.
[2026-10-30 10:00:02 TP0] KV Cache is allocated. dtype: {dtype}, #tokens: 597120, KV size: 3.45 GB
[2026-10-30 10:00:03 TP0] max_total_num_tokens=597120, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=9, context_len=1048576, available_gpu_mem=37.50 GB
[2026-10-30 10:00:04] The server is fired up and ready to roll!
"""


def test_kv_pool_check_understands_the_0_5_23_layout(pytester, running_fake_server, unfold) -> None:
    """0.5.23 logs one DSA pool line (MLA + indexer): an expected dtype passes, another fails naming the layout."""
    ok = run_boot_suite(pytester, running_fake_server, RELEASED_LOG.replace("{dtype}", "torch.float8_e4m3fn"))
    assert ok.ret == 0, ok.stdout.str()[-3000:]
    bad = run_boot_suite(pytester, running_fake_server, RELEASED_LOG.replace("{dtype}", "torch.float8_e5m2"))
    bad.assert_outcomes(passed=3, failed=1)
    pytest.LineMatcher(unfold(bad.stdout.str()).splitlines()).fnmatch_lines([
        "KV pool dtypes of lane 'daily' differ from the thresholds",
        "metric         | measured | expected                  | note",
        "---------------*",
        "kv_pool_dtypes | fp8_e5m2 | one of bfloat16, fp8_e4m3 | note 1",
        "note 1: layout: one DSA pool line, MLA and indexer "
        "together; only the MLA dtype is printed, the indexer keys are fp8 with scales (SGLang 0.5.23, "
        "sglang/srt/mem_cache/memory_pool.py DSATokenToKVPool); check --kv-cache-dtype (not set) and the attention "
        "backend; (thresholds.yaml: lanes.daily.boot)",
    ], consecutive=True)
