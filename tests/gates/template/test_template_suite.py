"""The template gate as a user meets it: the packaged suite, the glmf_template fixture, the
thresholds file's `template` section and `glmf template`, through pytester on simulator lanes
(the built-in daily lane's flags, 1/50 of the recipe's time); the broken lane serves a template
without the tools block (`--fault template=drop-tools`), a known truth."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from pytest_glmf.cli import main as glmf_main
from pytest_glmf.config.lanes import builtin_lanes
from pytest_glmf.gates.template import load_conversations, simulator_reference
from pytest_glmf.gates.template.reference import save_reference
from pytest_glmf.gates.template.special import skip_special_default

SUITE = str(Path(str(resources.files("pytest_glmf.suites"))) / "test_template.py")


def _lane(name: str, *sim_args: str) -> str:
    lane = builtin_lanes()["daily"]
    extra = ", ".join(f"'{a}'" for a in lane.extra)
    lines = [f"  {name}:", "    launcher: sim", f"    model: {lane.model}", f"    spec: {lane.spec}", f"    kv: {lane.kv}",
             f"    ctx: {lane.ctx}", "    time_scale: 0.02", "    boot_timeout_s: 60", f"    extra: [{extra}]"]
    if sim_args:
        lines.append("    sim_args: [" + ", ".join(f"'{a}'" for a in sim_args) + "]")
    return "\n".join(lines)


LANES = "schema: 1\nlanes:\n" + _lane("daily") + "\n" + _lane("broken", "--fault", "template=drop-tools") + "\n"


def thresholds(template_section: str = "mismatched: {max: 0}") -> str:
    return (f"schema: 1\nlanes:\n  daily:\n    template: {{{template_section}}}\n"
            f"  broken:\n    template: {{{template_section}}}\n")


@pytest.fixture
def files(pytester: pytest.Pytester) -> Path:
    (pytester.path / "lanes.yaml").write_text(LANES)
    (pytester.path / "thresholds.yaml").write_text(thresholds())
    return pytester.path


def run(pytester: pytest.Pytester, lane: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(SUITE, "--glmf-lanes", "lanes.yaml", "--glmf-lane", lane,
                                         "--glmf-thresholds", "thresholds.yaml", "-p", "no:cacheprovider", "-rA",
                                         "--glmf-results", "results", *args)


def test_suite_passes_on_the_simulator_and_records_the_result(pytester, files, unfold):
    ok = run(pytester, "daily", "-s")
    ok.assert_outcomes(passed=1)
    pytest.LineMatcher(unfold(ok.stdout.str()).splitlines()).fnmatch_lines([   # folded at 120 columns
        "*template: 7/7 conversations render to the reference's prompt ids (served via "
        "tokenize; reference: the simulator's own template)"])
    doc = json.loads((files / "results" / "daily-latest.json").read_text())["gates"]["template"]
    (entry,) = doc.values()
    assert (entry["matched"], entry["mismatched"], entry["failed_requests"]) == (7, 0, 0)


def test_suite_fails_on_a_dropped_tools_block_with_the_text_around_it(pytester, files, inline_notes):
    bad = run(pytester, "broken")
    bad.assert_outcomes(failed=1)
    pytest.LineMatcher(inline_notes(bad.stdout.str()).splitlines()).fnmatch_lines([
        "template gate of lane 'broken': 5/7 conversations render to the reference's prompt ids (reference: the "
        "simulator's own template): 1 threshold(s) missed",
        "metric * | measured | expected | note",
        "*",
        "mismatched*| 2 *| <= 0 *| +2; the served chat template or tokenizer changed*(thresholds.yaml: "
        "lanes.broken.template)",
        "",
        "conversation *| first difference *| reference (⟦token⟧ differs) *| served",
        "*",
        "tools_offered *| token 9: reference id 308 (226 ids), served id 78 (24 ids) *| reference: …<sop><|system|>⏎You "
        "can look things up⟦.⏎⟧⏎# Tools⏎⏎You may call one or… | served: …<sop><|system|>⏎You can look things up⟦.⟧"
        "<|user|>⏎What's the weat…",
        # ([[] is fnmatch's literal "[")
        "tool_call_and_result *| token 2: *| reference: [[]gMASK]<sop>⟦<|system|>⟧⏎⏎# Tools* | served: "
        "[[]gMASK]<sop>⟦<|user|>⟧⏎What's the weathe…",
    ], consecutive=True)


def test_stored_reference_beside_the_thresholds_file_and_served_ids_chat(pytester, files, daily_sim, capsys, unfold):
    # a stored run of the known-good server (the clean simulator), named relative to the thresholds file
    assert glmf_main(["template", "reference", "--url", daily_sim.base_url, "--out", str(files / "ref.json")]) == 0
    assert "template reference: 7 conversations (system_prompt 31, " in capsys.readouterr().out
    (files / "thresholds.yaml").write_text(thresholds("mismatched: {max: 0}, settings: {reference: ref.json, "
                                                      "served_ids: chat}"))
    ok = run(pytester, "daily", "-s")
    ok.assert_outcomes(passed=1)
    pytest.LineMatcher(unfold(ok.stdout.str()).splitlines()).fnmatch_lines([   # folded at 120 columns
        f"*template: 7/7 conversations * (served via chat; reference: stored run of {daily_sim.base_url} (*, via "
        "tokenize))"])
    bad = run(pytester, "broken")
    bad.assert_outcomes(failed=1)
    bad.stdout.fnmatch_lines(["mismatched*| 2 *| <= 0 *"])


def test_a_settings_typo_is_refused_before_any_server_boots(pytester, files):
    (files / "thresholds.yaml").write_text(thresholds("settings: {refrence: ref.json}"))
    bad = run(pytester, "daily")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*thresholds.yaml:4: lanes.daily.template.settings: unknown key 'refrence'*"])


def test_a_missing_reference_file_fails_naming_it(pytester, files):
    (files / "thresholds.yaml").write_text(thresholds("settings: {reference: nowhere.json}"))
    bad = run(pytester, "daily")
    bad.assert_outcomes(failed=1)
    bad.stdout.fnmatch_lines(["*thresholds.yaml: lanes.daily.template: nowhere.json: template reference not found "
                              "(make one: glmf template reference --url URL --out nowhere.json)"])


def test_cli_check_exit_codes_and_json(tmp_path, daily_sim, capsys):
    ref = tmp_path / "ref.json"
    assert glmf_main(["template", "reference", "--url", daily_sim.base_url, "--out", str(ref)]) == 0
    out = tmp_path / "check.json"
    assert glmf_main(["template", "check", "--url", daily_sim.base_url, "--reference", str(ref),
                      "--json", str(out)]) == 0
    assert json.loads(out.read_text())["gates"]["template"]["check"]["matched"] == 7
    assert glmf_main(["template", "check", "--url", daily_sim.base_url, "--reference", str(tmp_path / "no.json")]) == 2
    assert "no.json: template reference not found" in capsys.readouterr().out


def test_suite_fails_when_the_default_differs_from_the_references(pytester, tmp_path, inline_notes):
    # the reference: a vLLM >= 0.33 server whose model's generation_config.json says
    # skip_special_tokens: false; the candidate: the SGLang lane, which always defaults to true
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "generation_config.json").write_text('{"skip_special_tokens": false}')
    ref = simulator_reference(load_conversations(), "glm47", skip_special_default("vllm", tmp_path / "model"))
    save_reference(ref, pytester.path / "ref.json")
    (pytester.path / "lanes.yaml").write_text("schema: 1\nlanes:\n" + _lane("daily") + "\n")
    (pytester.path / "thresholds.yaml").write_text("schema: 1\nlanes:\n  daily:\n    template: {settings: "
                                                   "{reference: ref.json}}\n")
    bad = run(pytester, "daily")
    bad.assert_outcomes(failed=1)
    pytest.LineMatcher(inline_notes(bad.stdout.str()).splitlines()).fnmatch_lines([
        "changed_defaults*| 1 *| <= 0 *| +1; the server's default skip_special_tokens*",
        "default skip_special_tokens *| changed: set with --generation-config / "
        "--override-generation-config *| reference: False (*generation_config.json (vLLM >= "
        "0.33)) *| served: True (sglang's default (not read from generation_config.json))"])
    doc = json.loads((pytester.path / "results" / "daily-latest.json").read_text())["gates"]["template"]
    (entry,) = doc.values()
    assert entry["matched"] == 7 and entry["default_changes"][0]["reference"] is False
