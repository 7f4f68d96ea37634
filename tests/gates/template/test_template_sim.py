"""The template gate against the built-in simulator, whose truth is known: its own template is the
reference (pytest_glmf/sim/tokenizer.py apply_chat_template), and each injected template change
(`template=` fault, pytest_glmf/sim/faults.py) moves known tokens of known conversations.

- clean: every conversation renders exactly as the reference, through /tokenize and through the
  chat completion's prompt ids, and a stored run (`record_reference`) equals the simulator's own;
- drop-system: the conversations with a system prompt differ at token 2 (`<|system|>` -> `<|user|>`);
  double-bos: every conversation at token 1 (`<sop>` -> a second `[gMASK]`); drop-tools: the two
  tool conversations; thinking-off: every conversation that does not turn reasoning on explicitly,
  at the end of the reference (`<|assistant|>` is followed by an empty `<think></think>`).
"""
from __future__ import annotations

from typing import Any

import httpx
import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.template import (
    Conversation,
    load_conversations,
    measure_template,
    record_reference,
    simulator_reference,
)
from pytest_glmf.gates.template.compare import around, first_difference
from pytest_glmf.gates.template.conversations import conversations_hash

CONVERSATIONS = load_conversations()
ALL = [c.id for c in CONVERSATIONS]
WITH_SYSTEM = [c.id for c in CONVERSATIONS if c.messages[0]["role"] == "system"]
WITH_TOOLS = [c.id for c in CONVERSATIONS if c.tools]


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return simulator_reference(CONVERSATIONS, "glm47")


@pytest.fixture
def sim_url(daily_sim) -> Any:
    def set_template(change: str | None) -> str:
        faults = [f"template={change}"] if change else []
        httpx.post(daily_sim.base_url + "/sim/faults", json={"faults": faults, "replace": True}).raise_for_status()
        return daily_sim.base_url
    yield set_template
    set_template(None)


def test_packaged_conversations_cover_the_issue():
    assert WITH_SYSTEM and WITH_TOOLS and len(ALL) == 7
    assert any(m.get("tool_calls") for c in CONVERSATIONS for m in c.messages)
    assert any(m["role"] == "tool" for c in CONVERSATIONS for m in c.messages)
    assert sum(len([m for m in c.messages if m["role"] == "user"]) > 1 for c in CONVERSATIONS) >= 1
    assert {c.chat_template_kwargs.get("enable_thinking") for c in CONVERSATIONS} == {None, True, False}


@pytest.mark.parametrize("served_ids", ["tokenize", "chat"])
def test_clean_simulator_matches_its_own_template(sim_url, reference, served_ids):
    result = measure_template(sim_url(None), reference, CONVERSATIONS, served_ids=served_ids)
    assert (result.conversations, result.matched, result.mismatched, result.failed_requests) == (7, 7, 0, 0)
    assert result.differences == {} and result.matched_fraction == 1.0


def test_stored_run_equals_the_simulators_own_template(sim_url, reference):
    stored = record_reference(sim_url(None), CONVERSATIONS)
    assert [(c["id"], c["ids"], c["pieces"]) for c in stored["conversations"]] == \
        [(c["id"], c["ids"], c["pieces"]) for c in reference["conversations"]]
    assert stored["source"]["kind"] == "server"


@pytest.mark.parametrize("change, positions, ref_token, served_token", [
    # the system prompt goes; with tools offered the tools block still opens a system turn
    ("drop-system", {c: 3 if c in WITH_TOOLS else 2 for c in WITH_SYSTEM}, None, None),
    ("double-bos", dict.fromkeys(ALL, 1), "<sop>", "[gMASK]"),
])
def test_each_change_fails_naming_the_first_differing_token(sim_url, reference, change, positions, ref_token,
                                                            served_token):
    result = measure_template(sim_url(change), reference, CONVERSATIONS)
    assert {cid: d["position"] for cid, d in result.differences.items()} == positions
    assert result.mismatched == len(positions) and result.matched == 7 - len(positions)
    if ref_token:
        for d in result.differences.values():
            assert f"⟦{ref_token}⟧" in d["reference_text"] and f"⟦{served_token}⟧" in d["served_text"]
    d = result.differences.get("system_prompt")
    if change == "drop-system":
        assert d["reference_text"] == "[gMASK]<sop>⟦<|system|>⟧⏎You are a concis…"
        assert d["served_text"] == "[gMASK]<sop>⟦<|user|>⟧⏎What is the capital of France?…"


def test_dropped_tools_block_differs_where_the_tools_text_begins(sim_url, reference):
    result = measure_template(sim_url("drop-tools"), reference, CONVERSATIONS, served_ids="chat")
    assert sorted(result.differences) == sorted(WITH_TOOLS)
    d = result.differences["tools_offered"]
    assert "# Tools" in d["reference_text"].split("⟦")[1] and "# Tools" not in d["served_text"]
    assert d["served_len"] < d["reference_len"]


def test_reasoning_default_flipped_differs_after_the_generation_prompt(sim_url, reference):
    result = measure_template(sim_url("thinking-off"), reference, CONVERSATIONS)
    assert "reasoning_on" not in result.differences and "reasoning_off" not in result.differences
    assert sorted(result.differences) == sorted(set(ALL) - {"reasoning_on", "reasoning_off"})
    d = result.differences["user_only"]
    assert d["reference_id"] is None and d["position"] == d["reference_len"]
    assert d["reference_text"].endswith("<|assistant|>⟦⟧") and d["served_text"].endswith("⟦⏎⟧<think></think>")


def test_a_conversation_the_server_refuses_is_a_failed_request(sim_url):
    # chat_template_kwargs that is not an object: the simulator answers 400, as a server refusing a turn
    broken = [Conversation("system_prompt", CONVERSATIONS[0].messages, [], "nope")]  # type: ignore[arg-type]
    ref = simulator_reference(CONVERSATIONS[:1], "glm47")
    ref["conversations_sha256"] = conversations_hash(broken)
    result = measure_template(sim_url(None), ref, broken)
    assert (result.failed_requests, result.matched) == (1, 0)
    assert "400" in result.errors["system_prompt"] and "chat_template_kwargs" in result.errors["system_prompt"]


def test_a_reference_of_another_conversation_set_is_refused(sim_url, reference):
    with pytest.raises(ConfigError, match="another conversation set"):
        measure_template(sim_url(None), reference, CONVERSATIONS[:3])


def test_first_difference_and_the_text_around_it():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert around(["a", "b", "c", "d", "e"], 2, 1) == "…b⟦c⟧d…"
    assert around(["a", "b\n"], 2, 8) == "ab⏎⟦⟧"
