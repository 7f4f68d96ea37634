"""The prompt token ids a server renders a conversation into, through its own serving path.

Two ways, both in each engine's released code:

- `POST /tokenize` with `messages` (and `tools`, `chat_template_kwargs`): vLLM 0.32
  `TokenizeChatRequest` (vllm/entrypoints/serve/tokenize/protocol.py:46; `add_generation_prompt`
  defaults to true, `add_special_tokens` to false, as for a chat completion) renders through
  `online_renderer.preprocess_chat` with the server's default template and template kwargs
  (vllm/entrypoints/serve/tokenize/serving.py:70-92), the chat endpoint's own renderer. SGLang
  0.5.23 `TokenizeRequest` (sglang/srt/entrypoints/openai/protocol.py:1744) turns `messages`
  into a ChatCompletionRequest and renders it with `OpenAIServingChat._process_messages`
  (sglang/srt/entrypoints/openai/serving_tokenize.py:92-136, "rendered as for a chat
  completion"); served at `/v1/tokenize` and `/tokenize` (http_server.py:1907-1917).
- the prompt ids a chat completion returns: SGLang 0.5.23 `return_prompt_token_ids` puts
  `prompt_token_ids` on the choice (protocol.py:962, serving_chat.py:1310, non-streamed only);
  vLLM 0.32 `return_token_ids` puts `prompt_token_ids` on the response
  (vllm/entrypoints/openai/chat_completion/protocol.py:184, :423). One generated token each.

Token text for the failure message comes from the server's `/detokenize`: one batched call where
the engine takes a list of lists (SGLang 0.5.23 DetokenizeRequest, protocol.py:1804, with
`skip_special_tokens: false` so BOS and role tokens show), else one id per call (vLLM 0.32
DetokenizeRequest takes one list; the answer's key is `prompt` there, `text` in SGLang).
"""
from __future__ import annotations

from typing import Any

import httpx

from pytest_glmf.engine.client import Client
from pytest_glmf.gates.template.conversations import Conversation
from pytest_glmf.gates.template.spec import SERVED_IDS


class TemplateError(RuntimeError):
    """The server's answer carries no usable prompt ids (said with endpoint and what came back)."""


def _ids(value: Any, endpoint: str, conv: str) -> list[int]:
    if isinstance(value, list) and value and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return list(value)
    raise TemplateError(f"{endpoint}: conversation {conv!r}: no prompt token ids in the answer "
                        f"(got {str(value)[:80]!r})")


def served_prompt_ids(client: Client, conv: Conversation, via: str = "tokenize", model: str | None = None) -> list[int]:
    """The prompt ids the server renders `conv` into (`via`: tokenize | chat); an HTTP error
    propagates (httpx.HTTPStatusError names status, endpoint and the body's start)."""
    if via not in SERVED_IDS:
        raise ValueError(f"served_ids {via!r}: use one of {', '.join(SERVED_IDS)}")
    body: dict[str, Any] = {**({"model": model} if model else {}), **conv.request_fields()}
    if via == "tokenize":
        answer = client.post_json("/tokenize", body)
        return _ids(answer.get("tokens") if isinstance(answer, dict) else None, "POST /tokenize", conv.id)
    answer = client.post_json("/v1/chat/completions", {**body, "max_tokens": 1, "temperature": 0,
                                                       "return_prompt_token_ids": True, "return_token_ids": True})
    choice = ((answer.get("choices") or [{}])[0]) if isinstance(answer, dict) else {}
    ids = choice.get("prompt_token_ids") or (answer.get("prompt_token_ids") if isinstance(answer, dict) else None)
    return _ids(ids, "POST /v1/chat/completions", conv.id)


def _text(answer: Any) -> Any:
    return answer.get("text", answer.get("prompt")) if isinstance(answer, dict) else None


def token_pieces(client: Client, ids: list[int], model: str | None = None) -> list[str]:
    """The text of each id, as the server's tokenizer decodes it alone (special tokens kept)."""
    if not ids:
        return []
    extra: dict[str, Any] = {"skip_special_tokens": False, **({"model": model} if model else {})}
    try:
        batch = _text(client.post_json("/detokenize", {"tokens": [[i] for i in ids], **extra}))
        if isinstance(batch, list) and len(batch) == len(ids) and all(isinstance(t, str) for t in batch):
            return batch
    except httpx.HTTPStatusError:
        pass   # one list per request only (vLLM)
    pieces = []
    for i in ids:
        text = _text(client.post_json("/detokenize", {"tokens": [i], **extra}))
        pieces.append(text if isinstance(text, str) else f"<{i}>")
    return pieces
