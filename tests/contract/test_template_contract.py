"""The template gate's side of SGLang 0.5.23, checked by SGLang's own protocol models: every body the
gate sends (POST /tokenize with messages, tools and chat_template_kwargs; the chat completion with
return_prompt_token_ids; the batched /detokenize with skip_special_tokens false) is accepted by
TokenizeRequest / ChatCompletionRequest / DetokenizeRequest (sglang/srt/entrypoints/openai/
protocol.py:1744, :962, :1804), and the simulator's answers to them validate as TokenizeResponse,
ChatCompletionResponse (with the choice's prompt_token_ids) and DetokenizeResponse (a list of
texts), with no key SGLang does not have. What the gate reads is what 0.5.23 serves."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_protocol import DAILY, validate  # the contract stage's sim flags and validator (same folder)

from pytest_glmf.engine.client import Client
from pytest_glmf.gates.template import load_conversations, measure_template, simulator_reference
from pytest_glmf.sim.process import SimProcess

pytestmark = pytest.mark.contract

MODELS = {"/tokenize": "TokenizeRequest", "/v1/chat/completions": "ChatCompletionRequest",
          "/detokenize": "DetokenizeRequest"}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    record = tmp_path_factory.mktemp("contract-template") / "requests.jsonl"
    with SimProcess([*DAILY, "--record-requests", str(record)], time_scale=0.01) as s:
        yield s.url, record


def test_template_gate_bodies_pass_sglangs_request_models(sglang_oracle: Any, sim: tuple[str, Path]) -> None:
    url, record = sim
    conversations = load_conversations()
    ref = simulator_reference(conversations, "glm47")
    record.write_text("")
    # a changed template, so the differing windows are detokenized too
    httpx.post(url + "/sim/faults", json={"faults": ["template=drop-tools"], "replace": True}).raise_for_status()
    try:
        for served_ids in ("tokenize", "chat"):
            result = measure_template(url, ref, conversations, served_ids=served_ids)
            assert result.mismatched == 2 and result.failed_requests == 0
    finally:
        httpx.delete(url + "/sim/faults").raise_for_status()
    seen: dict[str, int] = {}
    for entry in (json.loads(line) for line in record.read_text().splitlines()):
        if not entry["body"] or entry["path"] not in MODELS:
            continue
        body = json.loads(entry["body"])
        seen[entry["path"]] = seen.get(entry["path"], 0) + 1
        verdict = sglang_oracle.call("model", name=MODELS[entry["path"]], data=body)
        assert verdict["ok"], f"{MODELS[entry['path']]} rejects {json.dumps(body)[:400]}: {verdict['errors']}"
    assert seen.get("/tokenize") == 7 and seen.get("/v1/chat/completions") == 7 and seen.get("/detokenize"), seen


def test_the_answers_the_gate_reads_are_sglangs(sglang_oracle: Any, sim: tuple[str, Path]) -> None:
    url, _ = sim
    conv = next(c for c in load_conversations() if c.id == "tool_call_and_result")
    with Client(url) as c:
        tok = c.post_json("/tokenize", conv.request_fields())
        chat = c.post_json("/v1/chat/completions", {**conv.request_fields(), "max_tokens": 1, "temperature": 0,
                                                    "return_prompt_token_ids": True})
        detok = c.post_json("/detokenize", {"tokens": [[i] for i in tok["tokens"][:5]], "skip_special_tokens": False})
    assert validate(sglang_oracle, "TokenizeResponse", tok)["tokens"] == chat["choices"][0]["prompt_token_ids"]
    assert validate(sglang_oracle, "ChatCompletionResponse", chat)["choices"][0]["prompt_token_ids"] == tok["tokens"]
    assert validate(sglang_oracle, "DetokenizeResponse", detok)["text"][:2] == ["[gMASK]", "<sop>"]


def test_sglangs_tool_dump_adds_defer_loading_null(sglang_oracle: Any) -> None:
    """What the template sees on SGLang 0.5.23: serving_chat.py (_process_messages) hands the template
    `[item.model_dump() for item in request.tools]`, and `Tool` (protocol.py:844) has no serializer
    that drops its unset `defer_loading`, so every tool gains `"defer_loading": null` (sglang#29061;
    the fix, PR #29114, was closed). A template that renders `tool | tojson` then differs from the
    model's own template applied by transformers in exactly that key: the template gate on an
    SGLang lane with a local reference shows it in the tools conversations; a stored run of the
    known-good SGLang image carries it and compares equal."""
    tool = next(c for c in load_conversations() if c.tools).tools[0]
    dump = sglang_oracle.call("model", name="Tool", data=tool)["dump"]
    assert dump == {**tool, "defer_loading": None}
