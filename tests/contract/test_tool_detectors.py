"""The simulator's tool-call text, read by SGLang 0.5.23's own function-call detectors.

For each parser the lanes can name (glm47, glm45, hermes, qwen25), the text the simulator's model
writes (pytest_glmf/sim/tools.py `render_calls`) goes through SGLang's `FunctionCallParser`
(sglang/srt/function_call/function_call_parser.py, with glm47_moe_detector.py,
glm4_moe_detector.py, hermes_detector.py and qwen25_detector.py), whole and in chunks as
serving_chat streams it. The calls (names, arguments as JSON) and the leftover content must be the
ones the simulator's own parser gives, which is what the tool gate sees in the API answer.
End to end: a turn answered with the markup left in content (`--tool-leak-rate 1`) parses, by
SGLang's detector, into the calls the same turn answers with when the simulator parses it.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.gates.tools.harness import answer_from_response, load_scenarios, request_body
from pytest_glmf.sim import tools
from pytest_glmf.sim.process import SimProcess
from pytest_glmf.sim.tokenizer import StreamDecoder, encode

pytestmark = pytest.mark.contract

PARSERS = ["glm47", "glm45", "hermes", "qwen25"]


def _tool(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name.replace("_", " "),
                                             "parameters": {"type": "object", "properties": props,
                                                            "required": required}}}


TOOLS = [
    _tool("get_weather", {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, ["city"]),
    _tool("create_event", {"title": {"type": "string"}, "attendees": {"type": "array", "items": {"type": "string"}},
                           "duration_min": {"type": "integer"}, "remote": {"type": "boolean"}}, ["title"]),
    _tool("get_time", {}, []),
]
CALLS = {
    "one call": [("get_weather", {"city": "Paris"})],
    "two calls": [("get_weather", {"city": "Tokyo", "unit": "c"}), ("get_weather", {"city": "Oslo", "unit": "f"})],
    "typed and nested": [("create_event", {"title": "Zürich sync: Q3 «plan»", "attendees": ["a@x.io", "b@y.io"],
                                           "duration_min": 45, "remote": True})],
    "no arguments": [("get_time", {})],
}


def ours(parser: str, text: str) -> dict[str, Any]:
    content, calls = tools.parse_text(parser, text, TOOLS)
    return {"normal_text": (content or "").strip(), "calls": [(n, json.loads(a)) for n, a in calls]}


def ours_streamed(parser: str, chunks: list[str]) -> dict[str, Any]:
    stream = tools.ToolStream(parser, TOOLS)
    events = [ev for c in chunks for ev in stream.feed(c)] + stream.finish()
    content = "".join(ev[1] for ev in events if ev[0] == "content")
    return {"normal_text": content.strip(), "calls": [(ev[1], json.loads(ev[2])) for ev in events if ev[0] != "content"]}


def theirs(verdict: dict[str, Any]) -> dict[str, Any]:
    return {"normal_text": verdict["normal_text"].strip(),
            "calls": [(c["name"], json.loads(c["arguments"])) for c in verdict["calls"]]}


@pytest.mark.parametrize("case", list(CALLS))
@pytest.mark.parametrize("parser", PARSERS)
def test_sglang_reads_the_simulators_tool_text_like_the_simulator(sglang_oracle: Any, parser: str, case: str) -> None:
    text = "Let me check. " + tools.render_calls(parser, CALLS[case])
    # streamed as the simulator streams it: token by token (markup tags are single special tokens,
    # as in GLM's and Qwen's tokenizers, so no chunk ends inside `<tool_call>`)
    decoder = StreamDecoder()
    chunks = [c for c in (decoder.feed([t]) for t in encode(text)) if c] + [decoder.flush()]
    assert "".join(chunks) == text
    verdict = sglang_oracle.call("detect", parser=parser, tools=TOOLS, text=text, chunks=chunks)
    expected = {"normal_text": "Let me check.", "calls": [(n, a) for n, a in CALLS[case]]}
    assert theirs(verdict) == ours(parser, text) == expected
    assert theirs(verdict["stream"]) == ours_streamed(parser, chunks) == expected


def test_a_leaked_turn_parses_into_the_calls_the_parsed_turn_has(sglang_oracle: Any) -> None:
    """The lanes' parser, end to end: same request to a simulator that parses and to one that
    leaves the markup in content; SGLang's detector on the leaked text gives the parsed answer."""
    scenario = next(s for s in load_scenarios() if len(s.expect) >= 1)
    body = request_body(scenario)
    flags = ["--tool-call-parser", "glm47", "--autotune-s", "0"]
    with SimProcess(flags, time_scale=0.01) as parsed, SimProcess([*flags, "--tool-leak-rate", "1"],
                                                                  time_scale=0.01) as leaked:
        with Client(parsed.url) as a, Client(leaked.url) as b:
            answer = answer_from_response(a.post_json("/v1/chat/completions", body))
            raw = b.post_json("/v1/chat/completions", body)["choices"][0]["message"]["content"]
    assert answer.calls and "<tool_call>" in raw
    verdict = sglang_oracle.call("detect", parser="glm47", tools=scenario.tools, text=raw)
    assert [(c["name"], json.loads(c["arguments"])) for c in verdict["calls"]] == \
        [(c["name"], json.loads(c["arguments"])) for c in answer.calls]
    assert verdict["normal_text"].strip() == (answer.content or "").strip()
