"""What agents send: the sessions file (written out or a template) through the strict loader, the
template's counts and lengths, the conversation each turn resends, the answer read back."""
from __future__ import annotations

import json

import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.agents.runner import Answer, answer_from_lines, next_messages
from pytest_glmf.gates.agents.sessions import from_template, load_sessions

WRITTEN = """\
sessions:
  - name: support
    system: You are the support agent.
    max_tokens: 32
    think_time_s: 0.5
    turns:
      - {user: "My order has not arrived."}
      - {tool_result: '{"status": "in transit"}', think_time_s: 2.0}
      - {user: "Thanks.", max_tokens: 8}
  - turns:
      - {user: "Hello"}
"""


def test_a_written_sessions_file_reads_every_key(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text(WRITTEN)
    conv = load_sessions(path)
    support, second = conv.sessions
    assert support.name == "support" and second.name == "s1"
    assert [t.kind for t in support.turns] == ["user", "tool", "user"]
    assert [support.max_tokens_of(t) for t in support.turns] == [32, 32, 8]
    assert [support.think_of(t) for t in support.turns] == [0.5, 2.0, 0.5]
    assert conv.turns == 3


@pytest.mark.parametrize("text, message", [
    ("sessions: []\n", "sessions: expected a non-empty list of sessions"),
    ("template: {sessions: 2}\nsessions: [{turns: [{user: x}]}]\n", "give exactly one of 'sessions:'"),
    ("sessions:\n  - turns: [{user: x, think_time: 1}]\n", "sessions[0].turns[0]: unknown key 'think_time'; "
                                                             "allowed: max_tokens, think_time_s, tool_result, user"),
    ("sessions:\n  - turns: [{tool_result: x}]\n", "sessions[0].turns[0]: a session starts with a user message"),
    ("sessions:\n  - turns: [{user: x, max_tokens: 0}]\n", "sessions[0].turns[0].max_tokens: must be >= 1, got 0"),
    ("sessions:\n  - {name: a, turns: [{user: x}]}\n  - {name: a, turns: [{user: y}]}\n", "the name 'a' is used twice"),
    ("template: {sessions: 2, turn: 3}\n", "template: unknown key 'turn'; allowed: max_tokens, seed, sessions"),
    ("template: {sessions: two}\n", "template.sessions: expected an integer, got 'two'"),
])
def test_a_bad_sessions_file_names_file_and_key(tmp_path, text, message):
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_sessions(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_a_duplicate_key_is_the_loaders_error(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text("template: {sessions: 2}\ntemplate: {sessions: 3}\n")
    with pytest.raises(ConfigError, match="agent.yaml:2"):
        load_sessions(path)


def test_the_template_makes_sessions_that_share_only_the_system_prompt():
    conv = from_template(sessions=3, turns=4, system_tokens=50, user_tokens=10, tool_every=2, max_tokens=16,
                         think_time_s=1.5, start_spread_s=3.0, seed=7)
    assert len(conv.sessions) == 3 and conv.turns == 4
    assert len({s.system for s in conv.sessions}) == 1
    assert len(conv.sessions[0].system.split()) == 50 + 13       # the instructions' 13 words, then the reference
    assert [t.kind for t in conv.sessions[0].turns] == ["user", "user", "tool", "user"]
    first = [s.turns[0].text for s in conv.sessions]
    assert len(set(first)) == 3 and all(len(t.split()) == 10 + 4 for t in first)
    assert [s.start_s for s in conv.sessions] == [0.0, 1.0, 2.0]
    assert from_template(sessions=3, seed=7).sessions[1].turns == from_template(sessions=3, seed=7).sessions[1].turns
    # token lengths become word counts at the served tokenizer's rate
    halved = from_template(sessions=1, user_tokens=10, system_tokens=0, tokens_per_word=2.0)
    assert len(halved.sessions[0].turns[0].text.split()) == 5 + 4 and halved.sessions[0].system is None


def test_take_cycles_a_files_sessions_into_distinct_conversations(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text(WRITTEN)
    conv = load_sessions(path).take(5)
    assert [s.name for s in conv.sessions] == ["support", "s1", "support#1", "s1#1", "support#2"]
    assert conv.sessions[2].turns[0].text == "[support#1] My order has not arrived."
    assert conv.sessions[2].turns[1:] == conv.sessions[0].turns[1:]


def test_each_turn_resends_the_conversation_with_the_previous_answer():
    session = load_sessions_text(WRITTEN).sessions[0]
    m0 = next_messages(session, 0, [], None)
    assert m0 == [{"role": "system", "content": "You are the support agent."},
                  {"role": "user", "content": "My order has not arrived."}]
    # a tool result without a tool call in the answer goes back as a user message
    m1 = next_messages(session, 1, m0, Answer(text=" w0 w1"))
    assert m1[2] == {"role": "assistant", "content": " w0 w1"}
    assert m1[3] == {"role": "user", "content": 'Tool result: {"status": "in transit"}'}
    # with a tool call it answers the call by its id
    call = {"id": "call_7", "type": "function", "function": {"name": "track", "arguments": "{}"}}
    m1b = next_messages(session, 1, m0, Answer(text="", tool_calls=[call]))
    assert m1b[2] == {"role": "assistant", "content": "", "tool_calls": [call]}
    assert m1b[3] == {"role": "tool", "tool_call_id": "call_7", "content": '{"status": "in transit"}'}


def load_sessions_text(text):
    from pytest_glmf.config.yamlfile import parse_yaml
    from pytest_glmf.gates.agents.sessions import sessions_from_data

    return sessions_from_data(parse_yaml(text, "inline.yaml"), "inline.yaml")


def sse(obj):
    return (0.0, "data: " + json.dumps(obj))


def test_the_answer_merges_tool_call_deltas_and_reads_the_cached_tokens():
    lines = [sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
             sse({"choices": [{"delta": {"content": "Let me check."}}]}),
             sse({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1",
                                                          "function": {"name": "track", "arguments": '{"id"'}}]}}]}),
             sse({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ': 4}'}}]}}]}),
             sse({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 9,
                                           "prompt_tokens_details": {"cached_tokens": 64}}}),
             (0.0, "data: [DONE]")]
    a = answer_from_lines(lines)
    assert a.text == "Let me check." and a.cached_tokens == 64
    assert a.tool_calls == [{"id": "call_1", "type": "function", "function": {"name": "track", "arguments": '{"id": 4}'}}]
    # SGLang without --enable-cache-report: prompt_tokens_details is null, so nothing is reported
    none = answer_from_lines([sse({"choices": [], "usage": {"prompt_tokens": 5, "prompt_tokens_details": None}})])
    assert none.cached_tokens is None
