"""Drive N agents' sessions at once: each a task that sends its turns one after another, every turn
the whole conversation so far, waiting the think time after each answer.

A turn goes through the load engine's lean reader (load/http.py: one connection per turn, opened
before the send, so connect time is never in a TTFT; kernel receive times where available) and
becomes the load engine's RequestRecord (record_from_lines, the one SSE parser), plus what a
conversation needs from the answer: its text and tool calls (fed back in the next turn) and the
server's cached-token report. A tool-result turn answers the previous answer's tool call (role
`tool` with its id) when there was one; otherwise it is sent as a user message "Tool result: ..."
(a model that did not call the tool still gets the result, and no template rejects an orphan
tool message). The prefix cache is flushed once before the sessions start, never between turns:
their reuse is what is measured; before it, every session's first turn is sent once and
discarded (the first hit of a batch shape pays the kernels' autotune). Plain data out; the metrics are records.py's.
"""
from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_glmf.engine.client import DONE, SSEError, parse_sse_line
from pytest_glmf.engine.timeouts import BETWEEN_TOKENS_S, FIRST_TOKEN_S
from pytest_glmf.gates.agents.records import TurnRecord
from pytest_glmf.gates.agents.sessions import Conversations, Session
from pytest_glmf.load import (
    Target,
    build_request,
    decode_reads,
    event_loop_factory,
    open_stream,
    record_from_lines,
    wait_all,
)

perf = time.perf_counter
CONNECT_AHEAD_S = 0.5
FIRST_CONNECT_S = 0.2


@dataclass
class SendOptions:
    """How a conversation workload is sent (the defaults: the curve's request shape)."""

    path: str = "/v1/chat/completions"
    model: str | None = None
    api_key: str | None = None
    extra_body: dict[str, Any] = field(default_factory=lambda: {"ignore_eos": True, "temperature": 0.0})
    time_scale: float = 1.0              # the simulator's: think times and start offsets are scaled by it
    flush_cache: bool = True             # once, before the sessions start
    warmup: bool = True                  # every session's first turn once, discarded, before the flush
    kernel_stamps: bool = True
    first_token_timeout_s: float = FIRST_TOKEN_S
    between_tokens_timeout_s: float = BETWEEN_TOKENS_S


@dataclass
class Answer:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    cached_tokens: int | None = None


def answer_from_lines(lines: Iterable[tuple[float, str]]) -> Answer:
    """The answer's text, its tool calls (deltas merged per index) and the cached-token report of
    usage.prompt_tokens_details (OpenAI, vLLM, SGLang with --enable-cache-report)."""
    out = Answer()
    calls: dict[int, dict[str, Any]] = {}
    for _, line in lines:
        try:
            event = parse_sse_line(line)
        except SSEError:
            continue
        if event is None or event is DONE or not isinstance(event, dict):
            continue
        details = (event.get("usage") or {}).get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            out.cached_tokens = details["cached_tokens"]
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            out.text += delta.get("content") or choice.get("text") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(tc.get("index", len(calls))),
                                        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
    out.tool_calls = [calls[i] for i in sorted(calls)]
    for i, c in enumerate(out.tool_calls):
        c["id"] = c["id"] or f"call_{i}"
    return out


def next_messages(session: Session, k: int, messages: list[dict[str, Any]], previous: Answer | None) -> list[dict[str, Any]]:
    """The conversation to send for turn k: the earlier messages, the previous answer, this turn."""
    msgs = list(messages)
    if k == 0 and session.system:
        msgs.append({"role": "system", "content": session.system})
    if previous is not None:
        answer: dict[str, Any] = {"role": "assistant", "content": previous.text}
        if previous.tool_calls:
            answer["tool_calls"] = previous.tool_calls
        msgs.append(answer)
    turn = session.turns[k]
    if turn.kind == "tool" and previous is not None and previous.tool_calls:
        msgs += [{"role": "tool", "tool_call_id": c["id"], "content": turn.text} for c in previous.tool_calls[:1]]
    elif turn.kind == "tool":
        msgs.append({"role": "user", "content": f"Tool result: {turn.text}"})
    else:
        msgs.append({"role": "user", "content": turn.text})
    return msgs


async def run_session(target: Target, index: int, session: Session, settings: SendOptions, t0: float,
                      tag: str, on_turn: Callable[[TurnRecord], None] | None = None) -> list[TurnRecord]:
    scale = settings.time_scale
    due = t0 + session.start_s * scale
    messages: list[dict[str, Any]] = []
    previous: Answer | None = None
    out: list[TurnRecord] = []
    for k, turn in enumerate(session.turns):
        if k > 0:
            due += session.think_of(turn) * scale
        messages = next_messages(session, k, messages, previous)
        body: dict[str, Any] = {"model": settings.model or "default", "messages": messages,
                                "max_tokens": session.max_tokens_of(turn), "stream": True,
                                "stream_options": {"include_usage": True}, **settings.extra_body}
        if session.tools:
            body["tools"] = list(session.tools)
        rec, answer = await _one_turn(target, settings, body, index, f"{tag}-s{index}-t{k}", due)
        out.append(TurnRecord(session=index, turn=k, kind=turn.kind, request=rec, t_due_s=due,
                              cached_tokens=answer.cached_tokens, tool_call=bool(answer.tool_calls)))
        if on_turn is not None:
            on_turn(out[-1])
        if not rec.ok:
            break    # the conversation cannot go on without its answer
        previous = answer
        due = rec.t_last_token_s if rec.t_last_token_s is not None else perf()
    return out


async def _one_turn(target: Target, settings: SendOptions, body: dict[str, Any], user: int,
                    request_id: str, due: float) -> tuple[Any, Answer]:
    """Connect shortly before the turn is due (an idle connection held through a long think time
    would meet the server's keep-alive timeout, uvicorn's 5 s), then send it when due."""
    request = build_request(target.host, target.port, target.prefix + settings.path, body,
                                      target.api_key, request_id=request_id)
    await asyncio.sleep(max(0.0, due - CONNECT_AHEAD_S - perf()))
    try:
        proto = await open_stream(target.host, target.port, target.https, settings.kernel_stamps)
    except OSError as exc:
        return record_from_lines(user, perf(), None, [], f"connect: {exc}"), Answer()
    try:
        await asyncio.sleep(max(0.0, due - perf()))
        proto.send(request)
        timed_out = await wait_all([proto], settings.first_token_timeout_s, settings.between_tokens_timeout_s)
    finally:
        if proto.transport is not None:
            proto.transport.close()
    status, lines, error = decode_reads(proto.reads) if proto.reads else (None, [], "no response")
    error = timed_out.get(0, error)
    t_send = proto.t_send_s if proto.t_send_s is not None else math.nan
    return record_from_lines(user, t_send, status, lines, error), answer_from_lines(lines)


async def run_conversations(url: str, conversations: Conversations, settings: SendOptions,
                            tag: str = "agents", on_turn: Callable[[TurnRecord], None] | None = None) -> list[TurnRecord]:
    """Every session at once (each from its start_s); the turns of all sessions, in send order.
    `on_turn` gets each measured turn as it ends (the warm pass's are not measured)."""
    target = Target(url, settings.api_key)
    if settings.model is None:   # vLLM refuses any name but the served model's; SGLang takes any
        settings = replace(settings, model=await target.served_model())
    if settings.warmup:
        # the first hit of a batch shape pays the kernels' autotune (the curve's warm pass, for the
        # same reason): the sessions' first turns, all at once, as the measured run starts
        warm = [Session(s.name, s.turns[:1], s.system, s.max_tokens, 0.0, 0.0, s.tools) for s in conversations.sessions]
        t0 = perf() + FIRST_CONNECT_S
        await asyncio.gather(*(run_session(target, i, s, settings, t0, f"{tag}-warmup") for i, s in enumerate(warm)))
    if settings.flush_cache:
        await target.flush()
    t0 = perf() + FIRST_CONNECT_S   # every first turn connects before the common start
    per = await asyncio.gather(*(run_session(target, i, s, settings, t0, tag, on_turn)
                                 for i, s in enumerate(conversations.sessions)))
    return sorted((t for turns in per for t in turns), key=lambda t: (t.request.t_send_s, t.session))


def run_conversations_sync(url: str, conversations: Conversations, settings: SendOptions,
                           tag: str = "agents", on_turn: Callable[[TurnRecord], None] | None = None) -> list[TurnRecord]:
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(run_conversations(url, conversations, settings, tag, on_turn))

