"""The one YAML loader (config/yamlfile.py): duplicate keys at any depth and unset `${VAR}` are
refused with file:line; `${VAR:-default}`, `$${` and merge keys work. Through pytest and the glmf
checkers: tests/reliability/test_reliability_config.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_glmf.config.lanes import load_lanes
from pytest_glmf.config.yamlfile import ConfigError, parse_yaml, read_yaml
from pytest_glmf.gates.acceptance.probe import load_prompt_classes
from pytest_glmf.gates.tools.harness import load_scenarios


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "f.yaml")
    return str(info.value)


DUP_TAIL = "YAML would keep only the last one and silently drop the first: remove or merge one of them"


@pytest.mark.parametrize("text, line", [
    ("a: 1\na: 2\n", "f.yaml:2: duplicate key 'a' (first at f.yaml:1); "),
    ("lanes:\n  batch:\n    boot: {max_running_requests: {min: 8}}\n    curve: {}\n    boot: {kv_tokens: {min: 1}}\n",
     "f.yaml:5: duplicate key 'boot' in lanes.batch (first at f.yaml:3); "),
    ("lanes:\n  b:\n    boot:\n      max_running_requests: {min: 8, min: 1}\n",
     "f.yaml:4:38: duplicate key 'min' in lanes.b.boot.max_running_requests (first at f.yaml:4:30); "),
    ("scenarios:\n  - id: x\n    expect: []\n    id: y\n", "f.yaml:4: duplicate key 'id' in scenarios[0] (first at f.yaml:2); "),
    ("1: a\n2: b\n1: c\n", "f.yaml:3: duplicate key 1 (first at f.yaml:1); "),
])
def test_a_key_written_twice_at_any_depth_names_both_lines(text: str, line: str) -> None:
    assert error_of(text) == line + DUP_TAIL


def test_merge_keys_with_an_override_are_not_duplicates() -> None:
    doc = parse_yaml("base: &b {min: 8, max: 9}\nx:\n  <<: *b\n  min: 1\n", "f.yaml")
    assert doc["x"] == {"min": 1, "max": 9}


def test_env_references_expand_defaults_and_escapes(monkeypatch) -> None:
    monkeypatch.setenv("GLMF_T_DIR", "/opt/engine")
    monkeypatch.setenv("GLMF_T_PORT", "31000")
    monkeypatch.setenv("GLMF_T_EMPTY", "")
    monkeypatch.delenv("GLMF_T_UNSET", raising=False)
    doc = parse_yaml("a: ${GLMF_T_DIR}/bin/python\n"
                     "port: ${GLMF_T_PORT}\n"                # unquoted and only a reference: typed
                     "quoted: '${GLMF_T_PORT}'\n"            # quoted: stays a string
                     "mem: ${GLMF_T_UNSET:-0.85}\n"
                     "empty: ${GLMF_T_EMPTY:-fallback}\n"     # :- also covers set-but-empty
                     "literal: echo $${HOME} $HOME\n"
                     "${GLMF_T_PORT}-key: 1\n", "f.yaml")
    assert doc == {"a": "/opt/engine/bin/python", "port": 31000, "quoted": "31000", "mem": 0.85,
                   "empty": "fallback", "literal": "echo ${HOME} $HOME", "31000-key": 1}


def test_an_unset_variable_is_named_with_file_and_line(monkeypatch) -> None:
    monkeypatch.delenv("UNSET_VAR_XYZ", raising=False)
    assert error_of("lanes:\n  b:\n    model: ${UNSET_VAR_XYZ}/GLM\n") == (
        "f.yaml:3: ${UNSET_VAR_XYZ} is not set in the environment; set UNSET_VAR_XYZ, "
        "or write ${UNSET_VAR_XYZ:-default} for an intended default")


@pytest.mark.parametrize("ref", ["${}", "${1X}", "${A B}", "${OPEN"])
def test_a_malformed_reference_says_how_to_write_one(ref: str) -> None:
    assert error_of(f"a: '{ref}'\n") == (
        f"f.yaml:1: {ref!r} is not a variable reference; write ${{NAME}}, or ${{NAME:-default}} for an "
        "intended default ($${ is a literal ${)")


def test_every_yaml_file_the_plugin_reads_goes_through_the_loader(tmp_path: Path, monkeypatch) -> None:
    """Lanes, thresholds (tests/reliability), prompt classes and tool scenarios: one loader."""
    monkeypatch.delenv("GLMF_T_UNSET", raising=False)
    lanes = tmp_path / "lanes.yaml"
    lanes.write_text("lanes:\n  a: {launcher: sim}\n  a: {launcher: sim, maxbs: 1}\n")
    classes = tmp_path / "classes.yaml"
    classes.write_text("classes:\n  - name: prose\n    max_tokens: 8\n    max_tokens: 9\n    prompts: [x]\n")
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text("tools: {}\nscenarios:\n  - {id: a, tools: [], expect: [], messages: [{role: user, "
                         "content: 'cd ${GLMF_T_UNSET}'}]}\n")
    with pytest.raises(ConfigError, match=rf"^{lanes}:3: duplicate key 'a' in lanes \(first at {lanes}:2\)"):
        load_lanes(lanes)
    with pytest.raises(ConfigError, match=rf"^{classes}:4: duplicate key 'max_tokens' in classes\[0\]"):
        load_prompt_classes(classes)
    with pytest.raises(ConfigError, match=rf"^{scenarios}:3: \$\{{GLMF_T_UNSET\}} is not set"):
        load_scenarios(scenarios)


def test_read_yaml_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"^{tmp_path}/nope.yaml: lanes file not found$"):
        read_yaml(tmp_path / "nope.yaml", "lanes")


def test_the_packaged_files_load_cleanly() -> None:
    assert load_scenarios() and load_prompt_classes()
