"""The per-gate assertion helpers as a user's test meets them (through pytester): bounds written in a
test are refused with the thresholds loader's own sentence, naming the helper and the test line; a
missed bound fails with the gate's table and the test line as its source; every helper counts the
checks it evaluates (gates/verdict.py), so a session can tell that something was verified.

Results are built from plain data here (boot log text, tool and acceptance summaries): no server
needed; the measurements themselves are tested against servers in each gate's folder.
"""
from __future__ import annotations

import pytest

from pytest_glmf.config.thresholds import load_thresholds
from pytest_glmf.config.yamlfile import ConfigError

HEADER = '''
from pytest_glmf.gates.acceptance import AcceptanceResult, ClassAcceptance, assert_acceptance, assert_speculating
from pytest_glmf.gates.boot import assert_boot, assert_seats, parse_boot_log
from pytest_glmf.gates.tools import ToolsResult, assert_tools

LOG = """\\
[2026-09-11 10:00:00 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 597000, KV size: 3.00 GB
[2026-09-11 10:00:00 TP0] max_running_requests is capped to 7 by the mamba state cache (max_mamba_cache_size=38, 5 state slots per request)
[2026-09-11 10:00:00 TP0] max_total_num_tokens=597000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=7, context_len=1048576, available_gpu_mem=10.00 GB
[2026-09-11 10:00:03] The server is fired up and ready to roll!
"""
FACTS = parse_boot_log(LOG)


def tools(parsed=3, turns=3, leaks=0):
    return ToolsResult(turns=turns, parsed=parsed, parsed_fraction=parsed / turns, leaks=leaks, wrong_calls=0,
                       empty_args=0, bad_turns=[], skipped={}, concurrency=1, tool_choice="auto", strict=False)


def acceptance(rate=0.4):
    rows = [{"class": "prose", "tok_s": 170.0, "accept_rate": rate, "accept_length": 2.5, "requests": 2,
             "errors": 0, "speculative": True}]
    mean = {"class": "mean", "tok_s": 170.0, "accept_rate": rate, "accept_length": 2.5, "classes": 1}
    return AcceptanceResult(classes=[ClassAcceptance.from_row(r) for r in rows], mean=ClassAcceptance.from_row(mean),
                            speculative=True, engine="sglang", source="stub", prompt_format="stub")
'''


def loader_says(tmp_path, gate_yaml: str) -> str:
    """The thresholds loader's message for a section, without its `file: lanes.x.gate` prefix."""
    path = tmp_path / "t.yaml"
    path.write_text(f"schema: 1\nlanes:\n  x:\n{gate_yaml}")
    with pytest.raises(ConfigError) as exc:
        load_thresholds(path)
    return str(exc.value).split(": ", 2)[2]


@pytest.mark.parametrize("call, section", [
    ("assert_boot(FACTS, max_runing_requests={'min': 9})", "    boot: {max_runing_requests: {min: 9}}\n"),
    ("assert_boot(FACTS, kv_tokens={'min': 9, 'max': 1})", "    boot: {kv_tokens: {min: 9, max: 1}}\n"),
    ("assert_tools(tools(), parsed_fraction={'min': 1.5})", "    tools: {parsed_fraction: {min: 1.5}}\n"),
    ("assert_tools(tools(), leaks={'max': 'none'})", "    tools: {leaks: {max: none}}\n"),
    ("assert_acceptance(acceptance(), 'prose', accept_rate={'at_least': 0.3})",
     "    acceptance: {classes: {prose: {accept_rate: {at_least: 0.3}}}}\n"),
])
def test_a_bad_bound_is_the_thresholds_loaders_error_at_the_test_line(pytester, tmp_path, call, section):
    pytester.makepyfile(test_user=HEADER + f"\n\ndef test_it():\n    {call}\n")
    result = pytester.runpytest("test_user.py")
    result.assert_outcomes(failed=1)
    helper = call.split("(")[0]
    line = HEADER.count("\n") + 3
    # the same sentence; only the section's other keys (settings:, baseline:) are no helper's business
    said = loader_says(tmp_path, section).split("; other keys:")[0]
    expected = f"{helper}() at test_user.py:{line}: {said}"
    result.stdout.fnmatch_lines([expected.replace("[", "?").replace("]", "?") + "*"])
    assert "Traceback" not in result.stdout.str()


def test_missed_bounds_fail_with_the_gate_table_and_the_test_line(pytester, inline_notes):
    pytester.makepyfile(test_user=HEADER + '''

def test_boot():
    assert_boot(FACTS, lane="daily", max_running_requests={"min": 9}, kv_pool_dtypes=["fp8_e4m3", "bfloat16"])


def test_seats():
    assert_seats(FACTS, [4, 8, 16], lane="daily")


def test_tools():
    assert_tools(tools(parsed=2), leaks={"max": 0}, parsed_fraction={"min": 1.0})


def test_acceptance():
    assert_acceptance(acceptance(0.2), "prose", accept_rate={"min": 0.3})
''')
    line = HEADER.count("\n") + 3
    result = pytester.runpytest("test_user.py")
    result.assert_outcomes(failed=4)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "boot facts of lane 'daily': 1 threshold(s) missed",
        "metric * | measured | expected | note",
        "*",
        f"max_running_requests | 7 * | >= 9 * | -22.2 %; max_running_requests capped to 7 by the mamba state cache "
        f"(max_mamba_cache_size=38, 5 state slots per request): *--max-mamba-cache-size*; (test_user.py:{line})",
        "",
        "KV pool dtypes of lane 'daily' differ from the thresholds",
        "metric * | measured | expected * | note",
        "*",
        f"kv_pool_dtypes | fp8_e4m3 | bfloat16, fp8_e4m3 | layout: one line per KV pool; check --kv-cache-dtype (not set) and the attention "
        f"backend; (test_user.py:{line})",
    ], consecutive=True)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "lane 'daily': 2 curve row(s) would queue behind the seat cap",
        "*",
        "*",
        f"seats < users @ 8 users * | 7 * | >= 8 * | *--max-mamba-cache-size* (test_user.py:{line + 4})",
        "seats < users @ 16 users | 7 * | >= 16 * | *",
    ], consecutive=True)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "tool gate @ 1 user(s): parsed 2/3, leaks 0, wrong calls 0: 1 threshold(s) missed",
        "*",
        "*",
        f"parsed_fraction @ 1 user(s) | 0.667 * | >= 1 * | -33.3 %; check --tool-call-parser*; (test_user.py:{line + 8})",
        "",
        "bad turns:",
    ], consecutive=True)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "speculative acceptance, class 'prose': 1 threshold(s) missed",
        "*",
        "*",
        f"accept_rate class=prose | 0.2 * | >= 0.3 * | -33.3 %; drafts rejected more often*(test_user.py:{line + 12})",
    ], consecutive=True)


def test_helpers_without_bounds_hold_the_recipes_bar_or_the_measurement_itself(pytester, inline_notes):
    pytester.makepyfile(test_user=HEADER + '''

def test_tools_default_bar():
    assert_tools(tools(parsed=2))


def test_not_speculating():
    result = acceptance()
    result.speculative = False
    assert_speculating(result)


def test_unknown_class():
    assert_acceptance(acceptance(), "poetry", accept_rate={"min": 0.1})
''')
    result = pytester.runpytest("test_user.py")
    result.assert_outcomes(failed=3)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "*parsed_fraction @ 1 user(s) | 0.667 * | >= 1 * | -33.3 %; *(default: the recipe's 10/10 parsed, no leaks)",
        "the server reports no speculative decoding (stub): check --speculative-algorithm and the draft model in the "
        "boot log",
        "assert_acceptance() at test_user.py:*: unknown prompt class 'poetry'; measured: prose, mean",
    ])


def test_every_helper_counts_the_checks_it_evaluates():
    """The signal of the "nothing was verified" rule (plugin/verified.py): each helper call adds the
    checks it evaluated to the process's tally, passed or failed; reading a number adds nothing."""
    from pytest_glmf.gates.verdict import evaluated_count

    namespace: dict = {}
    exec(HEADER, namespace)

    def counted(call: str) -> int:
        before = evaluated_count()
        try:
            eval(call, namespace)
        except pytest.fail.Exception:
            pass
        return evaluated_count() - before

    assert counted("assert_boot(FACTS, max_running_requests={'min': 7}, kv_tokens={'min': 1})") == 2
    assert counted("assert_boot(FACTS, kv_pool_dtypes=['fp8_e4m3'])") == 1
    assert counted("assert_seats(FACTS, [4, 8, 16])") == 3                  # fails at 8 and 16: still counted
    assert counted("assert_tools(tools())") == 2                            # the recipe's two default bounds
    assert counted("assert_acceptance(acceptance(0.1), 'mean', accept_rate={'min': 0.3})") == 1
    assert counted("assert_acceptance(acceptance(), 'prose')") == 1         # no bound: the class was measured
    assert counted("assert_speculating(acceptance())") == 3                 # speculated, answered, drafted
    assert counted("FACTS.max_running_requests == 7") == 0


def test_one_import_path_per_name_loaded_on_first_use():
    """The public names live in the gates' packages; importing the plugin and the packages loads no
    measurement code (the plugin loads on every pytest run), asking for a name does."""
    import subprocess
    import sys

    code = """
import sys
import pytest_glmf.plugin
import pytest_glmf.gates.acceptance, pytest_glmf.gates.boot, pytest_glmf.gates.curve
import pytest_glmf.gates.drift, pytest_glmf.gates.tools
heavy = ("httpx", "numpy", "jsonschema", "pytest_glmf.gates.curve.api", "pytest_glmf.gates.drift.api")
print(sorted(m for m in heavy if m in sys.modules))
from pytest_glmf.gates.drift import measure_drift
print(measure_drift.__module__, "numpy" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "pytest_glmf.gates.drift.api True"]
    import pytest_glmf.gates.curve as curve
    import pytest_glmf.gates.tools as tools

    assert {"measure_curve", "assert_curve", "CurveRow"} <= set(dir(curve)) and "Scenario" in tools.__all__
    with pytest.raises(AttributeError, match="module 'pytest_glmf.gates.curve' has no attribute 'run_curve'"):
        _ = curve.run_curve
