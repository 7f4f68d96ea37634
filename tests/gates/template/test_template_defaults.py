"""The default `skip_special_tokens` a server applies to output text (vLLM 0.33 takes it from the
model's generation_config.json, vllm/config/model.py get_diff_sampling_param): read from the
lane's model directory and its flags, kept in the reference and the result, and a change between
the two is a row of the template table naming the knob, against the simulator (whose prompt ids
do not move, so the change is the only difference) and through the CLI and the packaged suite."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_glmf.cli import main as glmf_main
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.template import assert_template, load_conversations, measure_template, simulator_reference
from pytest_glmf.gates.template.reference import load_reference, save_reference
from pytest_glmf.gates.template.special import skip_special_default

CONVERSATIONS = load_conversations()


def model_dir(root: Path, name: str, skip: bool | None) -> Path:
    d = root / name
    d.mkdir()
    config = {"bos_token_id": 1, "eos_token_id": [2]} | ({} if skip is None else {"skip_special_tokens": skip})
    (d / "generation_config.json").write_text(json.dumps(config))
    return d


@pytest.fixture
def dirs(tmp_path) -> tuple[Path, Path]:
    return model_dir(tmp_path, "absent", None), model_dir(tmp_path, "false", False)


def test_the_default_as_each_engine_derives_it(tmp_path, dirs):
    absent, false = dirs
    assert skip_special_default("vllm", false) == {"value": False, "from": f"{false}/generation_config.json "
                                                                           "(vLLM >= 0.33)"}
    assert skip_special_default("vllm", absent)["value"] is True
    assert "no skip_special_tokens in" in skip_special_default("vllm", absent)["from"]
    assert skip_special_default("vllm", false, ["--generation-config", "vllm"])["value"] is True
    assert skip_special_default("vllm", absent, ["--generation-config", str(false)])["value"] is False
    override = skip_special_default("vllm", false, ['--override-generation-config={"skip_special_tokens": true}'])
    assert override == {"value": True, "from": "--override-generation-config"}
    assert skip_special_default("sglang", false)["value"] is True            # SGLang does not read it
    assert skip_special_default("vllm", "zai-org/GLM-5.1-FP8") is None        # not local: unknown
    assert skip_special_default("vllm", tmp_path / "nowhere") is None


def test_a_changed_default_is_a_row_naming_the_knob(daily_sim, dirs, inline_notes):
    absent, false = dirs
    ref = simulator_reference(CONVERSATIONS, "glm47", skip_special_default("vllm", absent))
    same = measure_template(daily_sim.base_url, ref, CONVERSATIONS, skip_special_tokens_default=
                            skip_special_default("vllm", absent))
    assert (same.matched, same.summary()["changed_defaults"]) == (7, 0)
    assert_template(same)
    changed = measure_template(daily_sim.base_url, ref, CONVERSATIONS,
                               skip_special_tokens_default=skip_special_default("vllm", false))
    summary = changed.summary()
    assert (changed.matched, summary["changed_defaults"]) == (7, 1)
    assert summary["skip_special_tokens_default"]["value"] is False
    assert summary["reference_skip_special_tokens_default"]["value"] is True
    table = changed.table()
    assert "default skip_special_tokens | changed: set with --generation-config / --override-generation-config" in table
    assert f"reference: True (vLLM's default (no skip_special_tokens in {absent}/generation_config.json))" in table
    assert f"served: False ({false}/generation_config.json (vLLM >= 0.33))" in table
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_template(changed)
    assert re.search(r"changed_defaults \| 1 .*\| <= 0 .*generation_config.json", inline_notes(str(failed.value)))
    assert_template(changed, mismatched={"max": 0})                         # bounds without it: reported only


def test_an_old_reference_without_the_default_loads_and_compares(tmp_path, daily_sim, dirs):
    ref = simulator_reference(CONVERSATIONS, "glm47")
    del ref["skip_special_tokens_default"]                                  # as written before it was recorded
    save_reference(ref, tmp_path / "old.json")
    result = measure_template(daily_sim.base_url, load_reference(tmp_path / "old.json"), CONVERSATIONS,
                              skip_special_tokens_default=skip_special_default("vllm", dirs[1]))
    assert (result.matched, result.summary()["changed_defaults"]) == (7, 0)
    ref["skip_special_tokens_default"] = "false"
    save_reference(ref, tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="bad.json: skip_special_tokens_default must be null or"):
        load_reference(tmp_path / "bad.json")


def test_cli_records_and_compares_the_default(tmp_path, daily_sim, dirs, capsys):
    absent, false = dirs
    ref = tmp_path / "ref.json"
    assert glmf_main(["template", "reference", "--url", daily_sim.base_url, "--out", str(ref),
                      "--generation-config", str(absent)]) == 0
    assert json.loads(ref.read_text())["skip_special_tokens_default"]["value"] is True
    check = ["template", "check", "--url", daily_sim.base_url, "--reference", str(ref)]
    assert glmf_main([*check, "--generation-config", str(absent)]) == 0
    assert glmf_main([*check, "--generation-config", str(false)]) == 1
    assert "default skip_special_tokens | changed" in capsys.readouterr().out
    assert glmf_main([*check, "--generation-config", str(tmp_path / "nowhere")]) == 2
    assert f"--generation-config {tmp_path / 'nowhere'}: not a directory" in capsys.readouterr().out
