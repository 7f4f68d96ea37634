"""The one readiness rule (launch/readiness.py) against a real HTTP server whose answers the test sets:
ready line + port answering, else /health and /v1/models both 200; never a generation."""
from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import httpx
import pytest

from pytest_glmf.launch import readiness


class Answers(http.server.BaseHTTPRequestHandler):
    codes: dict[str, int] = {}
    calls: list[str] = []

    def do_GET(self) -> None:
        type(self).calls.append(self.path)
        self.send_response(self.codes.get(self.path, 404))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[Answers]]]:
    handler = type("H", (Answers,), {"codes": {}, "calls": []})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("codes, line_seen, ready, seen", [
    ({"/health": 200, "/v1/models": 200}, False, True, "GET /health -> 200, GET /v1/models -> 200"),
    ({"/health": 503, "/v1/models": 200}, False, False, "GET /health -> 503"),     # SGLang before its warmup
    ({"/health": 200, "/v1/models": 503}, False, False, "GET /health -> 200, GET /v1/models -> 503"),
    ({"/v1/models": 200}, True, True, "GET /v1/models -> 200"),
    ({"/v1/models": 401}, True, True, "GET /v1/models -> 401"),                   # --api-key: it listens
    ({"/health": 200, "/v1/models": 502}, True, False, "GET /v1/models -> 502"),   # docker-proxy, no server yet
])
def test_the_rule(server, codes, line_seen, ready, seen) -> None:
    url, handler = server
    handler.codes.update(codes)
    with httpx.Client(timeout=2) as client:
        assert readiness.probe(client, url, line_seen) == (ready, seen)
    assert "/health_generate" not in handler.calls


def test_nothing_listening_is_named_by_its_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]            # closed again: nothing listens there
    with httpx.Client(timeout=2) as client:
        ready, seen = readiness.probe(client, f"http://127.0.0.1:{port}", False)
    assert not ready and seen.startswith("ConnectError: ")


def test_only_sglang_has_a_ready_line_to_watch() -> None:
    """SGLang's own line (entrypoints/http_server.py `_wait_and_warmup`); vLLM prints none that its
    released code confirms, so vLLM is ready by its health endpoints."""
    assert readiness.ready_line("sglang") == "The server is fired up and ready to roll!"
    assert readiness.ready_line("vllm") is None


def test_every_launcher_uses_the_rule_and_none_generates() -> None:
    """One rule in one place: the launchers call readiness, and no launcher names /health_generate."""
    from pathlib import Path

    import pytest_glmf.launch as launch

    folder = Path(launch.__file__).parent
    sources = {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*.py")}
    for name in ("process.py", "attach.py", "docker/__init__.py"):
        assert "readiness." in sources[name], name
    assert [n for n, text in sources.items() if "/health_generate\"" in text or "'/health_generate'" in text] == []
