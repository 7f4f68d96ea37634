"""OpenAI-compatible endpoints: /v1/chat/completions and /v1/completions (SGLang 0.5.23's shapes).

Streaming (sglang/srt/entrypoints/openai/serving_chat.py and sse_utils.py): the first chunk is
role-only (`{"reasoning_content": null, "role": "assistant", "content": ""}`) and is sent with the
first token batch; then one chunk per decode step (several tokens per chunk under speculative
decoding), whose delta always carries `reasoning_content` (null here: no reasoning parser); with
`stream_options.continuous_usage_stats` every content chunk carries the cumulative usage; a finish
chunk with an empty delta; the usage chunk (`choices: []`) when `stream_options.include_usage`;
`data: [DONE]`.

With `--reasoning-parser`, the non-streaming chat answer splits like SGLang's parser does: the first
60 % of the answer's natural length (logits.py) is `message.reasoning_content` and
`usage.reasoning_tokens`, the rest `content` (streamed chunks still carry everything as content).
"""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from pytest_glmf.sim import timing, tools
from pytest_glmf.sim.http import SSE, HTTPError, Receive, Scope, Send, dumps, read_json, send_json
from pytest_glmf.sim.logits import START, extend, mix, unif
from pytest_glmf.sim.native_api import weight_versions
from pytest_glmf.sim.streaming import TokenStream, run_to_end
from pytest_glmf.sim.tokenizer import (
    EOS_ID,
    StreamDecoder,
    apply_chat_template,
    content_text,
    decode,
    encode,
    prompt_text_for_class,
    token_bytes,
    token_text,
)

if TYPE_CHECKING:
    from pytest_glmf.sim.app import SimApp
    from pytest_glmf.sim.scheduler import SimRequest

HIDDEN_IDS = {EOS_ID}
MALFORMED = b'data: {"id": "malformed", "choices": [{"index": 0, "delta": {"content": "\n\n'


def _sampling(body: dict[str, Any], default_max: int | None) -> dict[str, Any]:
    temperature = body.get("temperature")
    stop_ids = body.get("stop_token_ids") or []
    return {"temperature": 1.0 if temperature is None else float(temperature),
            "min_new_tokens": int(body.get("min_tokens") or 0), "ignore_eos": bool(body.get("ignore_eos", False)),
            "stop_token_ids": tuple(int(t) for t in stop_ids),
            "sample_seed": body.get("seed")}


def _usage(r: "SimRequest", completion: int | None = None, reasoning: int = 0,
           cache_report: bool = False) -> dict[str, Any]:
    """SGLang's UsageInfo (sglang/srt/entrypoints/openai/protocol.py), all fields, as it dumps them.
    With --enable-cache-report, prompt_tokens_details carries the prefix-cache hit (0.5.23
    usage_processor.py: `PromptTokensDetails(cached_tokens=meta_info["cached_tokens"])`), else None."""
    n = len(r.out_ids) if completion is None else completion
    details = {"cached_tokens": r.cached_tokens} if cache_report else None
    return {"prompt_tokens": len(r.prompt_ids), "total_tokens": len(r.prompt_ids) + n, "completion_tokens": n,
            "prompt_tokens_details": details, "reasoning_tokens": reasoning, "completion_tokens_details": None}


def _reasoning_split(app: "SimApp", r: "SimRequest") -> int:
    """How many output tokens are reasoning: with --reasoning-parser, the first 60 % of the answer's
    natural length (logits.py `reasoning_length`); 0 without a parser or for a forced tool call.
    Non-streaming chat only: streamed chunks carry everything as content."""
    if not app.cfg.reasoning_parser or r.forced_ids is not None:
        return 0
    marker = app.context(r.prompt_ids).h_marker
    return 0 if marker is None else min(len(r.out_ids), app.model.reasoning_length(marker))


def _completion_usage(r: "SimRequest", cache_report: bool = False) -> dict[str, Any]:
    """The completions usage chunk: dumped with exclude_none (serving_completions.py), so the null
    details are absent, unlike chat's."""
    return {k: v for k, v in _usage(r, cache_report=cache_report).items() if v is not None}


def _metadata(r: "SimRequest") -> dict[str, Any]:
    """A non-streamed answer's `metadata` (utils/weight_versions.py
    build_endpoint_weight_version_metadata): the weight version and its span over the output."""

    return {"weight_version": "default", "weight_versions": weight_versions(r)}


def _cache_report(app: "SimApp") -> bool:
    return bool(app.cfg.server_args.get("enable_cache_report"))


def _visible(ids: list[int]) -> list[int]:
    return [t for t in ids if t not in HIDDEN_IDS]


def _chat_logprobs(r: "SimRequest", start: int, ids: list[int]) -> dict[str, Any]:
    out = []
    for k, tid in enumerate(ids, start):
        top = r.out_top[k] if k < len(r.out_top) else []
        out.append({"token": token_text(tid), "logprob": r.out_logprobs[k], "bytes": token_bytes(tid),
                    "top_logprobs": [{"token": token_text(t), "logprob": lp, "bytes": token_bytes(t)} for lp, t in top]})
    return {"content": out}


def _tool_call_obj(rid: str, i: int, name: str, args: str) -> dict[str, Any]:
    return {"id": f"call_{rid[:24]}{i}", "index": i, "type": "function", "function": {"name": name, "arguments": args}}


def chat_prompt_ids(body: dict[str, Any], parser: str | None, template_change: str | None) -> list[int]:
    """The served prompt of a chat request, the one rendering chat completions and `/tokenize`
    with `messages` share (SGLang 0.5.23 renders both through OpenAIServingChat._process_messages:
    sglang/srt/entrypoints/openai/serving_tokenize.py, _tokenize_chat_request)."""
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise HTTPError(400, "chat_template_kwargs must be an object")
    thinking = kwargs.get("enable_thinking")
    return apply_chat_template(body["messages"], body.get("tools") or None,
                               lambda n, a: tools.render_call(parser or "glm47", n, a),
                               enable_thinking=None if thinking is None else bool(thinking), change=template_change)


async def chat(app: "SimApp", scope: Scope, receive: Receive, send: Send) -> None:
    body = await read_json(receive)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise HTTPError(400, "messages must be a non-empty list")
    app.admit_generation()
    offered = body.get("tools") or None
    tool_choice = body.get("tool_choice", "auto")
    parser = app.cfg.tool_call_parser
    prompt_ids = chat_prompt_ids(body, parser, app.faults.template)
    max_new = app.check_prompt(prompt_ids, body.get("max_completion_tokens", body.get("max_tokens")))
    user_msgs = [m for m in messages if m.get("role") == "user"]
    cls = timing.classify(content_text(user_msgs[-1].get("content")) if user_msgs else "", len(user_msgs))
    calls = tools.plan_calls(messages, offered, tool_choice) if offered else []
    forced = None
    parse_calls = False
    if calls:
        markup = tools.render_calls(parser or "glm47", calls, app.faults.tool_empty_args)
        forced = encode(markup)
        leak = unif(mix(hash(tuple(prompt_ids)) & ((1 << 64) - 1)) ^ app.cfg.seed) < app.cfg.tool_leak_rate
        parse_calls = parser is not None and not leak
    want_lp = bool(body.get("logprobs"))
    r = app.new_request(prompt_ids, max_new, cls=cls, forced_ids=forced, want_logprobs=want_lp,
                        top_n=int(body.get("top_logprobs") or 0) if want_lp else 0, **_sampling(body, None))
    if app.faults.no_tokens:
        r.max_new_tokens = 0
    model = body.get("model") or app.cfg.served_model_name
    assert app.scheduler is not None
    if body.get("stream"):
        await _chat_stream(app, r, receive, send, model, body.get("stream_options") or {}, parse_calls, offered,
                           parser)
        return
    await run_to_end(app.scheduler, [r], receive)
    n_reasoning = _reasoning_split(app, r)
    text = decode(_visible(r.out_ids[n_reasoning:]))
    # ChatMessage drops tool_calls when there are none (sglang/srt/entrypoints/openai/protocol.py)
    message: dict[str, Any] = {"role": "assistant", "content": text,
                               "reasoning_content": decode(_visible(r.out_ids[:n_reasoning])) if n_reasoning else None}
    finish = r.finish_reason
    if parse_calls:
        content, parsed = tools.parse_text(parser or "", text, offered)
        if parsed:
            message["content"] = content or None
            message["tool_calls"] = [_tool_call_obj(r.rid, i, n, a) for i, (n, a) in enumerate(parsed)]
            finish = "tool_calls"
    choice = {"index": 0, "message": message, "logprobs": _chat_logprobs(r, 0, r.out_ids) if want_lp else None,
              "finish_reason": finish, "matched_stop": r.matched_stop}
    if body.get("return_prompt_token_ids"):
        choice["prompt_token_ids"] = list(prompt_ids)
    await send_json(send, {"id": r.rid, "object": "chat.completion", "created": int(time.time()), "model": model,
                           "choices": [choice], "usage": _usage(r, reasoning=n_reasoning, cache_report=_cache_report(app)),
                           "metadata": _metadata(r)})


async def _chat_stream(app: "SimApp", r: "SimRequest", receive: Receive, send: Send, model: str,
                       options: dict[str, Any], parse_calls: bool, offered: Any, parser: str | None) -> None:
    assert app.scheduler is not None
    include_usage, continuous = bool(options.get("include_usage")), bool(options.get("continuous_usage_stats"))
    sse = SSE(send, cut_after=app.faults.stream_cut)
    base = {"id": r.rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    taken = 0

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> dict[str, Any]:
        out = {**base, "choices": [{"index": 0, "delta": {"reasoning_content": None, **delta}, "logprobs": logprobs,
                                    "finish_reason": finish, "matched_stop": r.matched_stop if finish else None}]}
        if continuous and (delta.get("content") or delta.get("tool_calls")):
            out["usage"] = _usage(r, taken, _cache_report(app))
        return out

    # the hot path (plain content, no logprobs, no running usage) splices pre-serialized halves around the text
    head = b"data: " + dumps(chunk({"content": ""}))[:-len(b'""}, "logprobs": null, "finish_reason": null, '
                                                         b'"matched_stop": null}]}')]
    tail = b'}, "logprobs": null, "finish_reason": null, "matched_stop": null}]}\n\n'
    decoder = StreamDecoder()
    stream_parser = tools.ToolStream(parser or "", offered) if parse_calls else None
    n_calls = 0
    first = True
    malformed_sent = not app.faults.malformed_sse
    async with TokenStream(app.scheduler, r, receive) as tokens:
        await sse.start()
        async for ids in tokens:
            if first:
                await sse.data(chunk({"role": "assistant", "content": ""}))
                first = False
            if not ids:
                continue
            text = decoder.feed(_visible(ids))
            lp = _chat_logprobs(r, taken, ids) if r.want_logprobs else None
            taken += len(ids)
            if stream_parser is not None:
                for ev in stream_parser.feed(text):
                    n_calls += await _send_tool_event(sse, chunk, r, ev, n_calls)
            elif lp or (continuous and text):
                await sse.data(chunk({"content": text}, logprobs=lp))
            elif text:
                await sse.raw(head + json.dumps(text, ensure_ascii=False).encode() + tail)
            if not malformed_sent and taken >= 2:
                await sse.raw(MALFORMED)
                malformed_sent = True
        rest = decoder.flush()
        if stream_parser is not None:
            for ev in stream_parser.feed(rest) + stream_parser.finish():
                n_calls += await _send_tool_event(sse, chunk, r, ev, n_calls)
        elif rest:
            await sse.data(chunk({"content": rest}))
        await sse.data(chunk({}, "tool_calls" if n_calls else r.finish_reason))
        if include_usage:
            await sse.data({**base, "choices": [], "usage": _usage(r, cache_report=_cache_report(app))})
        await sse.done()


async def _send_tool_event(sse: SSE, chunk: Any, r: "SimRequest", ev: tuple[str, ...], index: int) -> int:
    if ev[0] == "content":
        if ev[1]:
            await sse.data(chunk({"content": ev[1]}))
        return 0
    _, name, args = ev
    first = _tool_call_obj(r.rid, index, name, "")

    def call_chunk(call: dict[str, Any]) -> dict[str, Any]:
        return {"usage": None, **chunk({"role": None, "content": None, "tool_calls": [call]})}

    await sse.data(call_chunk(first))
    half = max(1, len(args) // 2)
    for frag in (args[:half], args[half:]):
        if frag:
            await sse.data(call_chunk({"id": None, "index": index, "type": "function",
                                       "function": {"name": None, "arguments": frag}}))
    return 1


# ------------------------------------------------------------------------------------------

def _prompt_ids(prompt: Any) -> list[int]:
    if isinstance(prompt, str):
        return encode(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return list(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return _prompt_ids(prompt[0])
    raise HTTPError(400, "prompt must be a string, a list of token ids, or a one-element list of either")


def _completion_logprobs(r: "SimRequest", app: "SimApp", echo: bool, n_top: int) -> dict[str, Any]:
    tokens, lps, tops, offsets, pos = [], [], [], [], 0
    if echo:
        ctx = START
        for i, tid in enumerate(r.prompt_ids):
            d = app.model.dist(ctx) if i else None
            tokens.append(token_text(tid))
            lps.append(d.logprob(tid) if d else None)
            tops.append({token_text(t): lp for lp, t in d.top(n_top)} if d and n_top else None)
            offsets.append(pos)
            pos += len(token_text(tid))
            ctx = extend(ctx, tid)
    for k, tid in enumerate(r.out_ids):
        tokens.append(token_text(tid))
        lps.append(r.out_logprobs[k])
        tops.append({token_text(t): lp for lp, t in r.out_top[k]} if n_top and k < len(r.out_top) else None)
        offsets.append(pos)
        pos += len(token_text(tid))
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}


async def completions(app: "SimApp", scope: Scope, receive: Receive, send: Send) -> None:
    body = await read_json(receive)
    if "prompt" not in body:
        raise HTTPError(400, "prompt is required")
    prompt_ids = _prompt_ids(body["prompt"])
    app.admit_generation()
    max_tokens = body.get("max_tokens", 16)
    max_new = app.check_prompt(prompt_ids, max_tokens)
    n_lp = body.get("logprobs")
    want_lp = n_lp is not None
    echo = bool(body.get("echo"))
    cls = timing.classify(prompt_text_for_class(prompt_ids))
    r = app.new_request(prompt_ids, max_new, cls=cls, want_logprobs=want_lp, top_n=int(n_lp or 0),
                        **_sampling(body, 16))
    if app.faults.no_tokens:
        r.max_new_tokens = 0
    model = body.get("model") or app.cfg.served_model_name
    base = {"id": r.rid, "object": "text_completion", "created": int(time.time()), "model": model}
    assert app.scheduler is not None
    if not body.get("stream"):
        await run_to_end(app.scheduler, [r], receive)
        text = (decode(prompt_ids) if echo else "") + decode(_visible(r.out_ids))
        choice = {"index": 0, "text": text, "logprobs": _completion_logprobs(r, app, echo, int(n_lp or 0)) if want_lp else None,
                  "finish_reason": r.finish_reason, "matched_stop": r.matched_stop}
        await send_json(send, {**base, "choices": [choice], "usage": _usage(r, cache_report=_cache_report(app)),
                               "metadata": _metadata(r)})
        return
    options = body.get("stream_options") or {}
    continuous = bool(options.get("continuous_usage_stats"))
    sse = SSE(send, cut_after=app.faults.stream_cut)
    decoder = StreamDecoder()
    malformed_sent = not app.faults.malformed_sse
    taken = 0
    async with TokenStream(app.scheduler, r, receive) as tokens:
        await sse.start()
        async for ids in tokens:
            taken += len(ids)
            text = decoder.feed(_visible(ids)) if ids else ""
            if text:
                out = {**base, "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": None,
                                            "matched_stop": None}], "usage": None}
                if continuous:
                    out["usage"] = _usage(r, taken, _cache_report(app))
                await sse.data(out)
                if not malformed_sent:
                    await sse.raw(MALFORMED)
                    malformed_sent = True
        await sse.data({**base, "choices": [{"index": 0, "text": decoder.flush(), "logprobs": None,
                                             "finish_reason": r.finish_reason, "matched_stop": r.matched_stop}],
                        "usage": None})
        if options.get("include_usage"):
            await sse.data({**base, "choices": [], "usage": _completion_usage(r, _cache_report(app))})
        await sse.done()
