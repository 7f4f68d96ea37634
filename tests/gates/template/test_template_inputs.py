"""Bad input to the template gate is an error naming the file, the conversation or flag, and what is
allowed: a conversations file, a reference file, the simulator's template fault, and a local
reference asked of an interpreter without transformers."""
from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.template import load_conversations, load_reference, local_reference
from pytest_glmf.gates.template.reference import lane_parser
from pytest_glmf.sim.faults import Faults


@pytest.mark.parametrize("text, message", [
    ("schema: 1\nconversations: []\n", "needs `conversations:`, a non-empty list"),
    ("conversations:\n  - {id: a, messages: [{role: user, content: hi}], tool: [x]}\n",
     "conversation 'a': unknown key(s) ['tool']; allowed: id, messages, tools, chat_template_kwargs"),
    ("conversations:\n  - {id: a, messages: [{role: human, content: hi}]}\n",
     "conversation 'a': messages[0]: role must be one of system, developer, user, assistant, tool, got 'human'"),
    ("tools: {get_weather: {description: w}}\nconversations:\n  - {id: a, tools: [search], messages: [{role: user, content: hi}]}\n",
     "conversation 'a': tools: unknown tool(s) ['search']; the file's tools: get_weather"),
    ("conversations:\n  - {id: a, messages: [{role: user, content: hi}]}\n  - {id: a, messages: [{role: user, content: yo}]}\n",
     "conversation 'a': the id is used twice"),
    ("conversations:\n  - {id: a, chat_template_kwargs: [x], messages: [{role: user, content: hi}]}\n",
     "chat_template_kwargs: a mapping, e.g. {enable_thinking: false}"),
])
def test_a_bad_conversations_file_names_file_conversation_and_key(tmp_path, text, message):
    path = tmp_path / "convs.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_conversations(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_a_foreign_or_missing_reference_file_is_named(tmp_path):
    drift_like = tmp_path / "drift.json"
    drift_like.write_text(json.dumps({"schema": 1, "kind": "glmf-drift-reference"}))
    with pytest.raises(ConfigError, match=r"drift.json: not a template reference \(kind must be "
                                          r"'glmf-template-reference'"):
        load_reference(drift_like)
    with pytest.raises(ConfigError, match=r"gone.json: template reference not found \(make one: glmf template "
                                          r"reference --url URL --out .*gone.json\)"):
        load_reference(tmp_path / "gone.json")


def test_the_simulators_template_fault_names_the_changes_it_knows():
    assert Faults.parse(["template=drop-tools"]).template == "drop-tools"
    with pytest.raises(ValueError, match=r"--fault 'template=no-bos': unknown or malformed fault; valid forms: .*"
                                         r"template=drop-system\|double-bos\|drop-tools\|thinking-off"):
        Faults.parse(["template=no-bos"])


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None, reason="this interpreter has transformers")
def test_a_local_reference_without_transformers_says_which_interpreter(tmp_path):
    with pytest.raises(RuntimeError) as err:
        local_reference(tmp_path, python=sys.executable)
    assert f"transformers is not importable by {sys.executable}" in str(err.value)
    assert "exited 3" in str(err.value)


def test_a_local_reference_needs_an_existing_model_directory(tmp_path):
    with pytest.raises(ConfigError, match="model directory .*nowhere.* does not exist"):
        local_reference(tmp_path / "nowhere")


def test_the_lanes_tool_parser_in_either_spelling():
    assert lane_parser(["--tp", "1", "--tool-call-parser", "hermes"]) == "hermes"
    assert lane_parser(["--tool-call-parser=glm45"]) == "glm45"
    assert lane_parser(["--tp", "1"]) is None
