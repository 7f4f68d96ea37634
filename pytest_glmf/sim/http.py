"""Small ASGI helpers: JSON bodies, JSON/text responses, SSE streams, disconnect watching."""
from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HTTPError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.message, self.err_type = status, message, err_type

    def body(self) -> dict[str, Any]:
        # SGLang's OpenAI-compatible error shape
        return {"object": "error", "message": self.message, "type": self.err_type, "param": None, "code": self.status}


class StreamCut(Exception):
    """Raised inside a stream to drop the connection (the stream-cut fault)."""


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise StreamCut("client went away")
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body"):
            return b"".join(chunks)


async def read_json(receive: Receive) -> dict[str, Any]:
    raw = await read_body(receive)
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise HTTPError(400, f"invalid JSON body: {exc.msg}") from None
    if not isinstance(body, dict):
        raise HTTPError(400, "the JSON body must be an object")
    return body


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")).encode()


async def send_bytes(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, obj: Any, status: int = 200) -> None:
    await send_bytes(send, status, dumps(obj), b"application/json")


async def send_text(send: Send, text: str, status: int = 200, content_type: bytes = b"text/plain; charset=utf-8") -> None:
    await send_bytes(send, status, text.encode(), content_type)


class SSE:
    """An open text/event-stream response."""

    def __init__(self, send: Send, cut_after: int | None = None):
        self._send = send
        self.cut_after = cut_after
        self.sent = 0
        self.started = False

    async def start(self) -> None:
        await self._send({"type": "http.response.start", "status": 200,
                          "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        self.started = True

    async def data(self, obj: Any) -> None:
        await self.raw(b"data: " + dumps(obj) + b"\n\n")

    async def raw(self, payload: bytes) -> None:
        if self.cut_after is not None and self.sent >= self.cut_after:
            raise StreamCut(f"stream cut after {self.sent} events (stream-cut fault)")
        await self._send({"type": "http.response.body", "body": payload, "more_body": True})
        self.sent += 1

    async def done(self) -> None:
        await self.raw(b"data: [DONE]\n\n")
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})


def watch_disconnect(receive: Receive, on_disconnect: Callable[[], None]) -> asyncio.Task[None]:
    """A task that calls on_disconnect when the client goes away; cancel it when done."""

    async def watch() -> None:
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                on_disconnect()
                return

    return asyncio.get_running_loop().create_task(watch())
