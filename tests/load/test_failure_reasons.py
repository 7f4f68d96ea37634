"""A failed request says why: its record keeps the status and an excerpt of the error body
(redacted), and the row's flag names the first distinct error(s), as the curve's failure does."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_glmf.gates.curve.checks import row_gate_checks
from pytest_glmf.load import LoadSettings, Workload, describe_flags, run_rows

SECRET = "sk-live-93f1c0ffee5eed"
MESSAGE = ("This model's maximum context length is 2048 tokens. However, you requested 2784 tokens (2400 in the "
           "messages, 384 in the completion). Please reduce the length of the messages or completion.")


class _Refuse(BaseHTTPRequestHandler):
    """vLLM's answer to a request over its context (an OpenAI error object), or one echoing a key."""

    message = MESSAGE

    def do_POST(self) -> None:   # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        code = 400 if self.path.endswith("/completions") else 404
        body = json.dumps({"error": {"message": self.message, "type": "BadRequestError", "param": None,
                                     "code": code}}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


def _rows(message: str) -> list[dict]:
    handler = type("Handler", (_Refuse,), {"message": message})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        settings = LoadSettings(users=[2], runs=2, warmup=False, workers=1, client_retries=0, metrics_sample_s=0)
        return run_rows(url, Workload(prompts=["a short prompt"], max_tokens=8, model="m"), settings)
    finally:
        server.shutdown()
        server.server_close()


def test_a_rows_flag_says_why_its_requests_failed():
    [row] = _rows(MESSAGE)
    record = row["per_run"][0]["records"][0]
    assert record["status"] == 400 and record["error"].startswith("HTTP 400: This model's maximum context length is "
                                                                  "2048 tokens. However, you requested 2784 tokens")
    flags = describe_flags(row)
    assert flags[0].startswith("run 1: 2 failed requests (HTTP 400: This model's maximum context length is 2048 "
                                "tokens. However, you requested 2784 tokens"), flags
    assert flags[1] == "run 2: 2 failed requests (as run 1)"      # said once
    failed = {c.metric: c for c in row_gate_checks(row, {}) if not c.ok}
    assert "maximum context length is 2048 tokens" in failed["failed requests"].hint


def test_a_secret_the_error_body_echoes_is_masked(monkeypatch):
    monkeypatch.setenv("GLMF_TEST_API_KEY", SECRET)
    [row] = _rows(f"Invalid API key {SECRET} for this model")
    said = json.dumps(row) + " ".join(describe_flags(row))
    assert SECRET not in said
    assert "run 1: 2 failed requests (HTTP 400: Invalid API key *** for this model)" in describe_flags(row)


@pytest.mark.parametrize("examples", [[], None])
def test_a_run_without_examples_says_only_the_count(examples):
    row = {"per_run": [{"errors": 1, "error_examples": examples, "client": {"client_bound": False},
                        "token_count": {"problems": []}}]}
    assert describe_flags(row) == ["run 1: 1 failed requests"]
