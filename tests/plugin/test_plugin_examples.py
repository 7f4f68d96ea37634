"""The user-style example file runs with the public fixtures and fails with a readable table."""
from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"
SUMMARY = ("[2026-09-11 10:00:00 TP0] max_total_num_tokens={kv}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
           "max_running_requests={seats}, context_len=131072, available_gpu_mem=10.00 GB\n"
           "[2026-09-11 10:00:03] The server is fired up and ready to roll!\n")


def run_example(pytester: pytest.Pytester, server, kv: int, seats: int) -> pytest.RunResult:
    pytester.makefile(".py", test_my_service=(EXAMPLES / "test_my_service.py").read_text())
    (pytester.path / "boot.log").write_text(SUMMARY.format(kv=kv, seats=seats))
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  batch: {{launcher: attach, url: '{server.base_url}', "
                                             "boot_log: boot.log}\n")
    return pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "batch", "test_my_service.py")


def test_user_example_passes_on_a_server_that_keeps_the_promise(pytester, running_fake_server) -> None:
    run_example(pytester, running_fake_server, kv=201_000, seats=128).assert_outcomes(passed=2)


def test_user_example_fails_with_a_table(pytester, running_fake_server, inline_notes) -> None:
    result = run_example(pytester, running_fake_server, kv=50_000, seats=7)
    result.assert_outcomes(passed=1, failed=1)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "our 48-user promise on lane 'batch': 2 threshold(s) missed",
        "metric                        | measured | expected | note",
        "------------------------------+----------+----------+-*",
        "kv_tokens per user @ 48 users | 1041.7   | >= 2000  | -47.9 %; fewer state slots (--max-mamba-cache-size) "
        "or more memory (--mem-fraction-static); (examples/test_my_service.py)",
        "seats @ 48 users              | 7        | >= 48    | -85.4 %; (examples/test_my_service.py)",
    ], consecutive=True)
