"""Reliability matrix, causes named right: an error status is reported as such (status, endpoint,
a short excerpt of the body; never a whole HTML page, never a chained traceback, never the
tool-parser advice), a tool turn answered with text says so, and the failure ledger records the
cause class as measured (configuration, server, client-bound, network)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import asdict
from importlib import resources

import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.engine.httperror import body_excerpt
from pytest_glmf.gates.tools.harness import (
    Scenario,
    ToolAnswer,
    TurnResult,
    check_answer,
    failure_hint,
    request_error_cause,
    summarize,
)
from pytest_glmf.results import ledger
from pytest_glmf.testing.truth_server import TruthServer

BOOT_LOG = """\
[2026-09-11 10:00:02 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=8, context_len=131072, available_gpu_mem=10.00 GB
[2026-09-11 10:00:03] The server is fired up and ready to roll!
"""
CURVE = str(resources.files("pytest_glmf.suites").joinpath("test_curve.py"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ledger_classes(results) -> list[tuple[str, str]]:
    """(what, cause class) of every ledger line."""
    return [tuple(part.strip() for part in line.split("|")[2:4]) for line in ledger.read(results)]


MODELS_ONLY_SERVER = """
import http.server, json, sys

class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if not self.path.startswith("/v1/models"):
            return super().do_GET()
        body = json.dumps({"object": "list", "data": [{"id": "default", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


@pytest.fixture
def web_server(pytester: pytest.Pytester):
    """A web server (`python -m http.server`'s handler) that lists a model at /v1/models, so it
    passes the attach check (a plain file server is refused there: tests/launch/test_attach_urls.py),
    and answers every POST with an HTML 501 page."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", MODELS_ONLY_SERVER, str(port)],
                            cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_tools_run_against_an_html_501_names_the_status_not_the_parser(pytester, web_server, inline_notes) -> None:
    results = pytester.path / "r"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--glmf-url", web_server,
                                           "--glmf-lane", "batch", "--glmf-results", str(results), "-k", "tools")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=2)
    error = ("the server answered with an error status (POST /v1/chat/completions -> HTTP 501: Error response "
             "Error code: 501 Message: Unsupported method ('POST'). Error code explanation: *")
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "tool gate of lane 'batch' @ 1 user(s): parsed 0/12, leaks 0, wrong calls 0, failed requests 12: "
        "2 threshold(s) missed",
        "metric * | measured | expected | note",
        f"parsed_fraction @ 1 user(s)*| 0*| >= 1*| -100.0 %; 12 turn(s) got no answer: {error}; not a "
        "tool-parser problem; (thresholds.yaml: lanes.batch.tools)",
        f"failed requests @ 1 user(s)*| 12*| <= 0*| +12; {error}",
        "bad turns:",
        "turn*| expected*| came back*| problems",
        "weather_single#0 (+11 more) | get_weather*| error: the server answered with an error status (POST "
        "/v1/chat/completions -> HTTP 501: *",
    ])
    out = inline_notes(result.stdout.str())
    assert "<html" not in out.lower() and "<!doctype" not in out.lower()
    assert "During handling of the above exception" not in out and "--tool-call-parser" not in out
    assert ledger_classes(results) == [("test_tool_calls_one_user", "server"),
                                       ("test_tool_calls_under_concurrency", "server")]


SCENARIOS = """\
tools:
  get_stock_price:
    description: Latest trading price of a company share, by ticker symbol.
    parameters: {type: object, properties: {ticker: {type: string}}, required: [ticker]}
scenarios:
  - id: by_name
    tools: [get_stock_price]
    messages: [{role: user, content: "What is the stock price of NVDA?"}]
    expect: [get_stock_price]
  - id: by_description
    tools: [get_stock_price]
    messages: [{role: user, content: "How is NVDA trading today? Ticker symbol NVDA."}]
    expect: [get_stock_price]
  - id: unclear
    tools: [get_stock_price]
    messages: [{role: user, content: "Tell me about NVDA."}]
    expect: [get_stock_price]
"""
OWN_TOOLS_TEST = """
from pytest_glmf.gates.tools.harness import load_scenarios, run_harness
from pytest_glmf.gates.tools.table import failure_table
from pytest_glmf.gates.verdict import assert_checks, checks_from_bounds

def test_my_tools(glmf_client):
    summary = run_harness(glmf_client, load_scenarios("my_tools.yaml"))
    checks = checks_from_bounds("tools", summary, {"parsed_fraction": {"min": 1.0}})
    assert_checks(checks, "my tools", details=failure_table(summary))
"""


def test_the_simulator_calls_a_users_own_tool_by_name_or_description_and_a_text_answer_says_so(pytester) -> None:
    """The simulator's model reads a user's own tool (its name, description and parameter names,
    README "Tools on the simulator"); a turn it answers with text is named as the model's choice."""
    pytester.makefile(".yaml", my_tools=SCENARIOS)
    pytester.makepyfile(test_own=OWN_TOOLS_TEST)
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  mine: {launcher: sim, time_scale: 0.01, boot_timeout_s: 60, "
                                             "extra: [--tool-call-parser, glm47]}\n")
    th = pytester.makefile(".yaml", th="lanes:\n  mine: {}\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane", "mine",
                                           "--glmf-thresholds", str(th), "--glmf-results", str(pytester.path / "r"),
                                           "test_own.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "my tools: 1 threshold(s) missed",
        "parsed_fraction | 0.667    | >= 1     | -33.3 %",
        "turn      | expected        | came back * | problems",
        # the simulator's model rambles until max_tokens, as a model that does not call would
        "unclear#0 | get_stock_price | finish=length; no tool_calls; content * | non-stream+stream: answered with "
        "text, finish_reason=length: the model did not call get_stock_price",
    ])
    assert "by_name#0" not in result.stdout.str() and "by_description#0" not in result.stdout.str()


@pytest.mark.parametrize("answer, problem", [
    (ToolAnswer("non-stream", "length", content="Let me look that up. First I"),
     "non-stream: answered with text, finish_reason=length: the model did not call get_stock_price"),
    (ToolAnswer("stream", "length", finish_reasons=1),
     "stream: answered with nothing, finish_reason=length: the model did not call get_stock_price"),
    (ToolAnswer("non-stream", "stop", content="<tool_call>get_stock_price<arg_key>ticker</arg_key>"),
     "non-stream: NOT_PARSED: expected ['get_stock_price'], tool markup in the answer but tool_calls empty "
     "(finish=stop)"),
])
def test_a_turn_without_calls_says_whose_doing_it_was(answer, problem) -> None:
    s = Scenario("x", [{"type": "function", "function": {"name": "get_stock_price"}}], [], ["get_stock_price"])
    assert problem in check_answer(s, answer)


def test_the_tool_gate_hint_names_the_cause_of_the_unparsed_turns() -> None:
    """Only when neither failed requests nor text answers explain every bad turn is the parser suspected."""
    s = Scenario("x", [{"type": "function", "function": {"name": "get_stock_price"}}], [], ["get_stock_price"])

    def turn(answer: ToolAnswer) -> TurnResult:
        return TurnResult("x", 0, s.expect, "auto", [answer], check_answer(s, answer))

    text = turn(ToolAnswer("non-stream", "length", content="Well,"))
    failed = turn(ToolAnswer("non-stream", error="the server answered with an error status (...)", error_cause="server"))
    markup = turn(ToolAnswer("non-stream", "stop", content="<tool_call>get_stock_price</tool_call>"))
    assert failure_hint(summarize([text, text], {})) == (
        "the model answered with text instead of calling in 2 turn(s): not a parser problem; check the prompt, "
        "tool_choice (required or named for small models) and max_tokens")
    assert failure_hint(summarize([failed], {})) == (
        "1 turn(s) got no answer: the server answered with an error status (...); not a tool-parser problem")
    assert failure_hint(summarize([text, markup], {})) is None
    results = [{**asdict(r), "ok": r.ok} for r in (failed, text)]
    assert request_error_cause({"results": results}) == "server"


THRESHOLDS = ("lanes:\n  truth:\n    curve:\n      settings: {{max_tokens: 8, runs: 1, warmup: false, "
              "client_retries: 0, {client}}}\n      rows:\n        - {{users: 1{bound}}}\n")


@pytest.mark.parametrize("client, bound, cause", [
    # open loop, a request sent later than allowed (1 ns after its time): the run is not the load asked for
    ("client_error_max_pct: 1.0e+9, rate_per_s: 1000, lag_p99_max_s: 1.0e-9", "", "client-bound"),
    ("client_error_max_pct: 1.0e+9", ", per_user_tok_s: {min: 1000000}", "configuration"),   # the lane missed the bar
], ids=["client-bound", "missed-bound"])
def test_a_failed_curve_row_goes_to_the_ledger_with_its_measured_cause(pytester, client, bound, cause) -> None:
    results = pytester.path / "r"
    log = pytester.makefile(".log", boot=BOOT_LOG)
    th = pytester.makefile(".yaml", th=THRESHOLDS.format(client=client, bound=bound))
    with TruthServer(ttft_ms=5, itl_ms=2, seats=8, pair_every=2) as ts:
        lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{ts.url}', "
                                                 f"boot_log: {log.name}}}\n")
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane",
                                               "truth", "--glmf-thresholds", str(th), "--glmf-results", str(results),
                                               CURVE)
    result.assert_outcomes(failed=1)
    assert ledger_classes(results) == [("test_curve_row[users=1]", cause)]


@pytest.mark.parametrize("lane, cause", [
    ("{launcher: attach, url: 'http://127.0.0.1:PORT', timeouts: {connect_s: 0.5}}", "network"),   # nobody listens
    ("{launcher: sim, time_scale: 0.01, boot_timeout_s: 30, sim_args: [--fault, boot-oom]}", "configuration"),
], ids=["unreachable", "does-not-boot"])
def test_a_failed_boot_goes_to_the_ledger_with_its_measured_cause(pytester, lane, cause) -> None:
    results = pytester.path / "r"
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  batch: {lane.replace('PORT', str(free_port()))}\n")
    pytester.makepyfile(test_x="def test_x(glmf_server):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane", "batch",
                                           "--glmf-results", str(results), "test_x.py")
    result.assert_outcomes(errors=1)
    assert ledger_classes(results) == [("boot", cause)]


PAGE_501 = """<!DOCTYPE HTML>
<html lang="en">
    <head>
        <meta charset="utf-8">
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: 501</p>
        <p>Message: Unsupported method (&#x27;POST&#x27;).</p>
    </body>
</html>"""


@pytest.mark.parametrize("body, excerpt", [
    (PAGE_501, "Error response Error code: 501 Message: Unsupported method ('POST')."),
    ('{"object": "error", "message": "tool_choice required is not supported", "code": 400}',
     "tool_choice required is not supported"),
    ('{"error": {"message": "model not found", "type": "NotFound"}}', "model not found"),
    ('{"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}',
     '[{"loc":["body","messages"],"msg":"field required"}]'),
    ("upstream connect error\n  or disconnect/reset before headers", "upstream connect error or disconnect/reset before headers"),
    ("", "(empty body)"),
    ("x" * 500, "x" * 159 + "…"),
])
def test_an_error_body_becomes_a_one_line_excerpt(body, excerpt) -> None:
    assert body_excerpt(body) == excerpt


def test_the_client_names_method_endpoint_status_and_excerpt(web_server) -> None:
    import httpx

    with Client(web_server) as client:
        with pytest.raises(httpx.HTTPStatusError) as post:
            client.post_json("/v1/chat/completions", {"messages": []})
        with pytest.raises(httpx.HTTPStatusError) as get:
            client.get_json("/no/such/path")
    assert str(post.value).startswith("POST /v1/chat/completions -> HTTP 501: Error response Error code: 501 "
                                      "Message: Unsupported method ('POST').")
    assert str(get.value).startswith("GET /no/such/path -> HTTP 404: Error response Error code: 404 Message: "
                                     "File not found.")
    assert "\n" not in str(post.value) + str(get.value)

