"""The user test files of pytest_glmf/examples/ (one per gate), run as a user runs them: written out
by `glmf init`, then `pytest examples/test_my_<gate>.py --glmf-lane ...` with the plugin, on the
simulator's batch and daily lanes (the built-in lanes' flags, faster). Each passes as written and,
with one of its bounds made impossible to meet, fails with the gate's table naming the bound and
the test line it was written on.

The simulator shares this box's two cores with the load generator, so the thresholds file relaxes
the curve's client self-check for the lanes, as the curve suite's own tests do (a user's lane on
its own machine keeps the defaults); the examples themselves are run unchanged.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_glmf.config.lanes import builtin_lanes
from pytest_glmf.starter import write_examples

TIME_SCALE = 0.2


def _lane_yaml(name: str, **extra: str) -> str:
    """A built-in lane as a lanes-file entry, at TIME_SCALE."""
    lane = builtin_lanes()[name]
    fields = {"launcher": "sim", "model": lane.model, "spec": lane.spec or "none", "kv": lane.kv, "mem": lane.mem,
              "ctx": lane.ctx, "maxbs": lane.maxbs, "time_scale": TIME_SCALE, "boot_timeout_s": 60}
    if lane.draft:
        fields["draft"] = lane.draft
    lines = [f"  {name}:"] + [f"    {k}: {v}" for k, v in fields.items() if v is not None]
    lines.append("    extra: [" + ", ".join(f"'{a}'" for a in lane.extra) + "]")
    lines += [f"    {k}: {v}" for k, v in extra.items()]
    return "\n".join(lines)


LANES = "schema: 1\nlanes:\n" + _lane_yaml("batch") + "\n" + _lane_yaml("daily") + "\n"
THRESHOLDS = """\
schema: 1
lanes:
  batch:
    curve:
      settings: {lag_p99_max_s: 1.0, cpu_max_frac: 1.0, client_error_max_pct: 1.0e+9}
  daily:
    curve:
      settings: {lag_p99_max_s: 1.0, cpu_max_frac: 1.0, client_error_max_pct: 1.0e+9}
"""


@pytest.fixture
def examples(pytester: pytest.Pytester) -> Path:
    """`glmf init` into the pytester directory, plus lanes and thresholds files for the run."""
    target = pytester.path / "examples"
    write_examples(target)
    (pytester.path / "lanes.yaml").write_text(LANES)
    (pytester.path / "thresholds.yaml").write_text(THRESHOLDS)
    return target


def run(pytester: pytest.Pytester, example: str, lane: str, *args: str) -> pytest.RunResult:
    """`example`: a file of examples/, or one test of it (FILE::TEST[ID])."""
    return pytester.runpytest_subprocess(f"examples/{example}", "--glmf-lanes", "lanes.yaml", "--glmf-lane", lane,
                                         "--glmf-thresholds", "thresholds.yaml", "-p", "no:cacheprovider", "-rA",
                                         *args)


def tighten(path: Path, old: str, new: str) -> int:
    """Replace one bound in an example; returns the line of the assertion that holds it (what the
    failure must name)."""
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} not (once) in {path.name}"
    path.write_text(text.replace(old, new))
    lines = text[:text.index(old)].split("\n")
    return max(i for i, ln in enumerate(lines, 1) if "assert_" in ln)


def test_examples_cover_every_gate_and_use_only_the_public_api(examples: Path) -> None:
    gates = ("boot", "curve", "drift", "acceptance", "tools", "template")
    # the drift example also shows the template gate: drift scores ids, the template makes them
    also = {"drift": ["pytest_glmf.gates.template"]}
    for gate in gates:
        text = (examples / f"test_my_{gate}.py").read_text()
        imports = re.findall(r"^from (pytest_glmf\S*) import", text, re.M)
        assert imports == [f"pytest_glmf.gates.{gate}", *also.get(gate, [])], (gate, imports)


def test_curve_example_passes_and_fails_with_the_table(pytester: pytest.Pytester, examples: Path) -> None:
    ok = run(pytester, "test_my_curve.py", "batch")
    ok.assert_outcomes(passed=3)
    ok.stdout.fnmatch_lines(["users | aggregate tok/s | per-user tok/s | p5 tok/s | TTFT p50 s | TTFT p95 s *",
                             "*", "8     | * | * | * | * | * | * | * | *"], consecutive=True)
    line = tighten(examples / "test_my_curve.py", 'per_user_tok_s={"min": 40}', 'per_user_tok_s={"min": 4000}')
    bad = run(pytester, "test_my_curve.py::test_support_bot_speed[users=1]", "batch")
    bad.assert_outcomes(failed=1)
    bad.stdout.fnmatch_lines([
        f"curve of lane 'batch' @ 1 users (simulator time scale {TIME_SCALE:g}: numbers in recipe units): "
        "1 threshold(s) missed",
        "metric * | measured | expected | note",
        "*",
        f"per_user_tok_s @ 1 users | * | >= 4000 * | -*; (examples/test_my_curve.py:{line})",
        "",
        "the row:",
        "users | aggregate tok/s | per-user tok/s *",
    ], consecutive=True)


def test_boot_example_passes_and_fails_with_the_table(pytester: pytest.Pytester, examples: Path, inline_notes) -> None:
    run(pytester, "test_my_boot.py", "batch").assert_outcomes(passed=3)
    # the daily lane's 48 state slots give 9 seats: the 48-user promise fails with the cap's knob
    seats = run(pytester, "test_my_boot.py", "daily")
    seats.assert_outcomes(passed=2, failed=1)
    pytest.LineMatcher(inline_notes(seats.stdout.str()).splitlines()).fnmatch_lines([
        "lane 'daily': 1 curve row(s) would queue behind the seat cap",
        "metric * | measured | expected | note",
        "*",
        "seats < users @ 48 users | 9 * | >= 48 * | max_running_requests capped to 9 by the mamba state cache "
        "*--max-mamba-cache-size* (examples/test_my_boot.py:*)",
    ], consecutive=True)
    line = tighten(examples / "test_my_boot.py", 'context_len={"min": 32768}', 'context_len={"min": 4194304}')
    bad = run(pytester, "test_my_boot.py::test_every_user_has_room_for_a_document", "batch")
    bad.assert_outcomes(failed=1)
    pytest.LineMatcher(inline_notes(bad.stdout.str()).splitlines()).fnmatch_lines([
        "boot facts of lane 'batch': 1 threshold(s) missed",
        "metric * | measured | expected * | note",
        "*",
        f"context_len | 131,072 * | >= 4,194,304 | -96.9 %; (examples/test_my_boot.py:{line})",
    ], consecutive=True)


def test_tools_example_passes_and_fails_with_the_table(pytester: pytest.Pytester, examples: Path, inline_notes) -> None:
    ok = run(pytester, "test_my_tools.py", "batch")
    ok.assert_outcomes(passed=2)
    ok.stdout.fnmatch_lines(["tool turns parsed 9/9 at concurrency 8 (tool_choice=auto); leaks 0, *"])
    # a turn that wants a call the model cannot make from the message: the table shows what came back
    scenarios = examples / "my_tools.yaml"
    scenarios.write_text(scenarios.read_text().replace("Thanks, that answers my question.", "Refund it, please."))
    line = tighten(examples / "test_my_tools.py", 'wrong_calls={"max": 0}', 'wrong_calls={"max": 0}, parsed={"min": 3}')
    bad = run(pytester, "test_my_tools.py::test_our_tools_parse", "batch")
    bad.assert_outcomes(failed=1)
    pytest.LineMatcher(inline_notes(bad.stdout.str()).splitlines()).fnmatch_lines([
        "tool gate of lane 'batch' @ 1 user(s): parsed 2/3, leaks 0, wrong calls 1: 3 threshold(s) missed",
        "metric * | measured | expected | note",
        "*",
        f"parsed_fraction @ 1 user(s) | 0.667 * | >= 1 * | -33.3 %; *(examples/test_my_tools.py:{line})",
        f"wrong_calls @ 1 user(s) * | 1 * | <= 0 * | +1; calls with wrong names*(examples/test_my_tools.py:{line})",
        f"parsed @ 1 user(s) * | 2 * | >= 3 * | -33.3 %; *(examples/test_my_tools.py:{line})",
        "",
        "bad turns:",
        "turn * | expected * | came back * | problems",
        "*",
        "thanks#0 | (no call)*| *issue_refund(*WRONG_CALL: no call wanted, got issue_refund*",
    ], consecutive=True)


def test_acceptance_example_passes_and_fails_with_the_table(pytester: pytest.Pytester, examples: Path,
                                                            inline_notes) -> None:
    ok = run(pytester, "test_my_acceptance.py", "daily")
    ok.assert_outcomes(passed=4)
    ok.stdout.fnmatch_lines(["order lines as JSON | * | 0.* | *", "customer replies * | * | 0.* | *"])
    # the batch lane runs no draft model: the acceptance tests do not apply there
    run(pytester, "test_my_acceptance.py", "batch").assert_outcomes(skipped=4)
    line = tighten(examples / "test_my_acceptance.py", 'accept_rate={"min": 0.25}', 'accept_rate={"min": 0.9}')
    bad = run(pytester, "test_my_acceptance.py::test_mean_acceptance", "daily")
    bad.assert_outcomes(failed=1)
    pytest.LineMatcher(inline_notes(bad.stdout.str()).splitlines()).fnmatch_lines([
        "speculative acceptance of lane 'daily', mean over 2 classes: 1 threshold(s) missed",
        "metric * | measured | expected | note",
        "*",
        f"accept_rate mean over classes | 0.* | >= 0.9 * | -*; drafts rejected more often*(examples/test_my_acceptance.py:{line})",
    ], consecutive=True)


def test_drift_example_passes_and_fails_with_the_table(pytester: pytest.Pytester, examples: Path, inline_notes) -> None:
    ok = run(pytester, "test_my_drift.py", "batch")
    ok.assert_outcomes(passed=4)   # exact scoring, drift, drift above the floor, and the template beside it
    ok.stdout.fnmatch_lines(["quant (vs batch-oracle) | mean |dlogp| *", "batch * | 0.* | ?0.*, 0.*? | *| 0 (exact) *",
                             "6 prompts, 192 tokens, top-8; oracle self-check: 0 (exact); exact mode: the floor is 0, "
                             "nothing is subtracted",
                             "*6 prompts, 192 tokens, top-8; oracle self-check: 0 (exact); floor mode: judged on the drift "
                             "above the floor (excess = mean |dlogp| - floor)"])
    refs = sorted(p.name for p in (pytester.path / "glmf-results" / "drift").glob("*-reference.json"))
    assert refs == ["batch (my_drift_prompts.json)-reference.json"]
    line = tighten(examples / "test_my_drift.py", 'mean_abs_dlogp={"max": 0.2}', 'mean_abs_dlogp={"max": 0.01}')
    bad = run(pytester, "test_my_drift.py::test_quantization_drift", "batch")
    bad.assert_outcomes(failed=1)
    pytest.LineMatcher(inline_notes(bad.stdout.str()).splitlines()).fnmatch_lines([
        "drift of batch against the oracle",
        "quant (vs batch-oracle) | mean |dlogp| *",
        "*",
        "batch * | 0.* | *",
        "6 prompts, 192 tokens, top-8; *",
        ": 1 threshold(s) missed",
        "metric * | measured | expected | note",
        "*",
        f"mean_abs_dlogp batch vs oracle (95% CI 0.*..0.*) | 0.* | <= 0.01 * | +*; the checkpoint/quantization moved "
        f"the model*(examples/test_my_drift.py:{line})",
    ], consecutive=True)


def test_template_example_passes_and_fails_with_the_text_around_the_difference(pytester: pytest.Pytester,
                                                                               examples: Path, inline_notes) -> None:
    ok = run(pytester, "test_my_template.py", "batch", "-s")
    ok.assert_outcomes(passed=1)
    pytest.LineMatcher(inline_notes(ok.stdout.str()).splitlines()).fnmatch_lines([   # folded at 120 columns
        "*template: 7/7 conversations render to the reference's prompt ids (served via tokenize; "
        "reference: the simulator's own template)"])
    # the same lane serving a template whose BOS is doubled (a known truth of the simulator)
    lanes = pytester.path / "lanes.yaml"
    lanes.write_text(lanes.read_text().replace("  daily:", "    sim_args: ['--fault', 'template=double-bos']\n  daily:"))
    line = max(i for i, ln in enumerate((examples / "test_my_template.py").read_text().split("\n"), 1)
               if "assert_template" in ln)
    bad = run(pytester, "test_my_template.py", "batch")
    bad.assert_outcomes(failed=1)
    pytest.LineMatcher(inline_notes(bad.stdout.str()).splitlines()).fnmatch_lines([
        "template gate of lane 'batch': 0/7 conversations render to the reference's prompt ids (reference: the "
        "simulator's own template): 1 threshold(s) missed",
        "metric *| measured | expected | note",
        "*",
        f"mismatched *| 7 *| <= 0 *| +7; the served chat template or tokenizer changed*(examples/test_my_template.py:{line})",
        "",
        "conversation *| first difference *| reference (⟦token⟧ differs) *| served",
        "*",
        "system_prompt *| token 1: reference id 2 (31 ids), served id 1 (32 ids) *| reference: [[]gMASK]⟦<sop>⟧<|system|>*"
        "| served: [[]gMASK]⟦[[]gMASK]⟧<sop><|system|>*",
    ], consecutive=True)


def test_agent_example_passes_and_fails_with_the_table(pytester: pytest.Pytester, examples: Path) -> None:
    imports = re.findall(r"^from (pytest_glmf\S*) import", (examples / "test_my_agent.py").read_text(), re.M)
    assert imports == ["pytest_glmf.gates.agents"]
    ok = run(pytester, "test_my_agent.py", "daily")
    ok.assert_outcomes(passed=1)
    ok.stdout.fnmatch_lines(["agents of lane 'daily' (simulator time scale 0.2: recipe units)",
                             "turn | turns | TTFT p50 s | TTFT p95 s | prompt tok p50 | cached tok p50 | cache hit *",
                             "sessions: 8/8 completed (100.0 %), 32 turns answered*"])
    line = tighten(examples / "test_my_agent.py", 'ttft_p95_s={"max": 1.0}', 'ttft_p95_s={"max": 0.001}')
    bad = run(pytester, "test_my_agent.py", "daily")
    bad.assert_outcomes(failed=1)
    bad.stdout.fnmatch_lines(["agents of lane 'daily': 1 threshold(s) missed",
                              f"ttft_p95_s | 0.* | <= 0.001 | *(examples/test_my_agent.py:{line})"])
