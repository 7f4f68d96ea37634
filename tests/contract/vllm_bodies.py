"""Every request body the gates send to a vLLM server, built by the gates' own code.

`Recorder` stands in for `engine.client.Client`: it keeps each (path, body) a gate sends and answers
with an error, so each gate's call stops after its request is built. The gates: tools (every packaged
scenario under each tool_choice, strict or not, non-streamed and streamed), template (tokenize with
messages, chat with return_token_ids, detokenize batched and per id), drift's vLLM adapter (chat
answer, /tokenize with messages, greedy generation, prompt-logprob scoring), acceptance (its first
request per class) and the curve's streamed workload (chat and completions, vLLM's continuous usage).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

MODEL = "/models/m"


class Recorded(httpx.HTTPError):
    """What the Recorder answers: a transport-level error every gate already handles."""


class Recorder:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.base_url = "http://recorder"

    def post_json(self, path: str, body: dict[str, Any]) -> Any:
        self.sent.append({"path": path, "body": body})
        if path == "/detokenize" and any(isinstance(t, list) for t in body.get("tokens") or []):
            # vLLM answers a list of lists with 400 (DetokenizeRequest.tokens is one list): the gate goes on
            # with one id per request, which this records too
            request = httpx.Request("POST", self.base_url + path)
            raise httpx.HTTPStatusError("400", request=request, response=httpx.Response(400, request=request))
        raise Recorded(f"recorded POST {path}")

    def stream_events(self, path: str, body: dict[str, Any]) -> Iterator[tuple[float, Any]]:
        self.sent.append({"path": path, "body": {**body, "stream": True}})   # as Client.stream_events sends it
        raise Recorded(f"recorded POST {path} (stream)")
        yield  # pragma: no cover - a generator, as the real one

    def get_json(self, path: str) -> Any:
        if path == "/v1/models":
            return {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm"}]}
        raise Recorded(f"GET {path}")

    def get_text(self, path: str) -> str:
        if path == "/metrics":
            return ""        # no counters yet: the acceptance probe goes on to its request
        raise Recorded(f"GET {path}")

    def close(self) -> None:
        pass


def _try(call: Any, *args: Any, **kw: Any) -> None:
    try:
        call(*args, **kw)
    except httpx.HTTPError:
        pass


def gate_bodies() -> list[dict[str, Any]]:
    from pytest_glmf.gates.acceptance.probe import load_prompt_classes, probe
    from pytest_glmf.gates.drift.adapters import VLLMAdapter
    from pytest_glmf.gates.template.conversations import load_conversations
    from pytest_glmf.gates.template.served import served_prompt_ids, token_pieces
    from pytest_glmf.gates.tools.harness import applies, load_scenarios, run_turn
    from pytest_glmf.load import Workload

    rec = Recorder()
    for s in load_scenarios():
        for choice in ("auto", "required", "named"):
            for strict in (False, True):
                if applies(s, choice) is None:
                    run_turn(rec, s, tool_choice=choice, model=MODEL, strict=strict)   # type: ignore[arg-type]
    for conv in load_conversations():
        for via in ("tokenize", "chat"):
            _try(served_prompt_ids, rec, conv, via, MODEL)
    _try(token_pieces, rec, [1, 2], MODEL)
    adapter = VLLMAdapter("http://recorder", model=MODEL)
    adapter.client.close()
    adapter.client = rec  # type: ignore[assignment]
    messages = [{"role": "user", "content": "Say hi."}]
    _try(adapter.chat_answer, messages, 8)
    adapter._tokenize_messages(messages)
    _try(adapter.generate_greedy, [1, 2, 3], 8)
    _try(adapter.score, [1, 2, 3], [4, 5], 5)
    for cls in load_prompt_classes():
        _try(probe, rec, "vllm", [cls], prompts_per_class=1)   # type: ignore[arg-type]
    for path in ("/v1/chat/completions", "/v1/completions"):
        for shared in (False, True):
            w = Workload(prompts=["Write a haiku."], path=path, model=MODEL, continuous_usage=True,
                         shared_prefix=shared, system="You are terse.")
            rec.sent.append({"path": path, "body": w.body("t", 0, 0)})
    return rec.sent
