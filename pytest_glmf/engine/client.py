"""One HTTP client for every gate: JSON calls, and the one SSE parser every streaming endpoint uses.

The parser is a pure function over lines so the load generator's fast path, the tool gate and the
tests all share it. `Client` is a thin synchronous wrapper over httpx for the non-load gates
(drift scoring, acceptance probe, tool gate, introspection); the load generator uses its own
async path but the same `parse_sse_line`.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from pytest_glmf.config.lanes import server_root
from pytest_glmf.engine.httperror import SSEError, status_message
from pytest_glmf.engine.timeouts import BETWEEN_TOKENS_S, FIRST_TOKEN_S

__all__ = ["DONE", "SSEError", "Client", "Timeouts", "iter_sse", "parse_sse_line"]

DONE = object()  # sentinel returned by parse_sse_line for "data: [DONE]"


def parse_sse_line(line: str) -> Any:
    """Return the decoded JSON of a `data:` line, DONE for `data: [DONE]`, None for blank lines,
    comments and other fields; raise SSEError for a `data:` line that is not JSON."""
    if not line or line.startswith(":"):
        return None
    if not line.startswith("data:"):
        return None  # event:, id:, retry: carry nothing the OpenAI/SGLang streams use
    payload = line[5:].strip()
    if payload == "[DONE]":
        return DONE
    try:
        return json.loads(payload)
    except json.JSONDecodeError as exc:
        raise SSEError(f"malformed SSE data line: {payload[:120]!r}") from exc


def iter_sse(lines: Iterable[str]) -> Iterator[Any]:
    """Decoded JSON events from an iterable of lines, stopping at [DONE]."""
    for line in lines:
        event = parse_sse_line(line.rstrip("\r\n"))
        if event is DONE:
            return
        if event is not None:
            yield event


@dataclass
class Timeouts:
    connect_s: float = 10.0
    first_token_s: float = FIRST_TOKEN_S
    between_tokens_s: float = BETWEEN_TOKENS_S
    request_s: float = 1800.0

    def httpx(self) -> httpx.Timeout:
        # read timeout bounds the gap between bytes: the first-token wait and the between-token gap.
        return httpx.Timeout(connect=self.connect_s, read=max(self.first_token_s, self.between_tokens_s),
                             write=self.connect_s, pool=self.connect_s)


class Client:
    """Synchronous JSON/SSE client for one server."""

    def __init__(self, base_url: str, timeouts: Timeouts | None = None, api_key: str | None = None):
        self.base_url = server_root(base_url)
        self.timeouts = timeouts or Timeouts()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.base_url, timeout=self.timeouts.httpx(), headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_json(self, path: str) -> Any:
        return _checked(self._http.get(path), "GET", path).json()

    def get_text(self, path: str) -> str:
        return _checked(self._http.get(path), "GET", path).text

    def post_json(self, path: str, body: dict[str, Any]) -> Any:
        return _checked(self._http.post(path, json=body), "POST", path).json()

    def stream_events(self, path: str, body: dict[str, Any]) -> Iterator[tuple[float, Any]]:
        """POST with stream=true and yield (perf_counter receive time, event dict) per SSE event."""
        with self._http.stream("POST", path, json={**body, "stream": True}) as r:
            if r.status_code >= 400:
                r.read()
                _checked(r, "POST", path)
            for line in r.iter_lines():
                event = parse_sse_line(line)
                if event is DONE:
                    return
                if event is not None:
                    yield time.perf_counter(), event


def _checked(r: httpx.Response, method: str, path: str) -> httpx.Response:
    """`r`, or an HTTPStatusError saying status, endpoint and a short excerpt of the body (a
    server's HTML error page never reaches a failure message whole)."""
    if r.status_code >= 400:
        raise httpx.HTTPStatusError(status_message(method, path, r.status_code, r.text),
                                    request=r.request, response=r)
    return r
