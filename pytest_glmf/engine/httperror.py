"""A failed request, said in one line, with its cause class.

Error statuses: method, endpoint, status and a short excerpt of the body. Servers answer errors as
JSON (`{"error": {"message": ...}}`, FastAPI's `{"detail": ...}`) or as an HTML page (a proxy, a
plain web server on the port: `python -m http.server` answers POST with a 501 page). A failure
message or a result table gets the message inside, never the whole page.

Cause classes (the failure ledger's, gates/verdict.py CAUSES): "server" when the server answered
wrongly (an error status, a dropped or malformed stream, no answer in time), "network" when the
request never reached it. Pure functions (httpx imported only to classify), shared by the client,
the load generator's lean reader, the tool gate and the plugin's fault messages.
"""
from __future__ import annotations

import html
import json
import re
from typing import Any

import httpx

from pytest_glmf.text import one_line

EXCERPT_CHARS = 160


class SSEError(ValueError):
    """A line in an event stream that is not valid SSE/JSON (raised by engine/client.py's parser)."""


_DROP = re.compile(r"<(head|script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def body_excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The gist of an error body on one line: the JSON error message, or an HTML page's visible
    text, or the text itself; at most `limit` characters."""
    text = (text or "").strip()
    if not text:
        return "(empty body)"
    message = _json_message(text) if text[:1] in "{[" else None
    if message is None and "<" in text and ">" in text:
        message = html.unescape(_TAG.sub(" ", _DROP.sub(" ", text)))
    return one_line(message if message is not None else text, limit) or "(empty page)"


def _json_message(text: str) -> str | None:
    try:
        doc: Any = json.loads(text)
    except ValueError:
        return None
    if isinstance(doc, dict):
        for key in ("error", "message", "detail"):
            value = doc.get(key)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return value["message"]
            if isinstance(value, str):
                return value
            if value is not None:
                return json.dumps(value, separators=(",", ":"))
    return json.dumps(doc, separators=(",", ":"))


def status_message(method: str, path: str, status: int, body: str) -> str:
    """`POST /v1/chat/completions -> HTTP 501: <excerpt>`: the one spelling of an error status."""
    return f"{method} {path} -> HTTP {status}: {body_excerpt(body)}"


def request_failure(exc: BaseException) -> tuple[str, str] | None:
    """(cause class, one-line sentence) for a failed HTTP request, None for other exceptions."""

    if isinstance(exc, httpx.HTTPStatusError):
        return "server", f"the server answered with an error status ({str(exc).splitlines()[0]})"
    if isinstance(exc, httpx.ConnectTimeout):
        return "network", f"the request could not reach the server ({type(exc).__name__}: {exc or 'timed out'})"
    if isinstance(exc, httpx.TimeoutException):
        return "server", f"the server did not answer in time ({type(exc).__name__}: {exc or 'timed out'})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "server", f"the server dropped the connection mid-response ({exc})"
    if isinstance(exc, httpx.TransportError):
        return "network", f"the request could not reach the server ({type(exc).__name__}: {exc})"
    if isinstance(exc, ConnectionError):   # the load generator's own sockets (asyncio streams)
        return "network", f"the request could not reach the server ({type(exc).__name__}: {exc})"
    if isinstance(exc, SSEError):
        return "server", f"the server sent a malformed event stream ({exc})"
    return None
