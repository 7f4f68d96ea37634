"""The tool-call harness against a small real HTTP server that returns the exact shapes of
docs/engines.md sections 5-6: parsed `tool_calls` (non-streamed, and streamed as deltas per index),
GLM markup leaked into `content` with `tool_calls: null`, silent `arguments: "{}"`, arguments that
break the schema, a call where none is wanted, and a streamed answer that differs."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.gates.tools.cli import cli as tools_cli
from pytest_glmf.gates.tools.harness import (
    Scenario,
    ToolAnswer,
    TurnResult,
    answer_from_chunks,
    check_answer,
    failure_hint,
    find_leaks,
    load_scenarios,
    run_harness,
)
from pytest_glmf.gates.tools.table import render_summary

SCENARIOS = load_scenarios()
VALID_ARGS = {
    "get_weather": {"city": "Paris", "unit": "celsius"},
    "search_web": {"query": "SGLang release notes", "max_results": 3},
    "get_current_time": {},
    "send_email": {"to": ["zoë@example.com"], "subject": 'Re: "Q3 plan" – naïve question',
                   "body": 'Привет! 会議は金曜日です。 He said "ship it" \\o/'},
    "create_calendar_event": {"title": "Design review", "start": "2026-12-01T10:00", "duration_minutes": 45,
                              "attendees": [{"name": "Ana Silva", "email": "ana@example.com"},
                                            {"name": "Ben Okafor", "email": "ben@example.com"}]},
    "set_thermostat": {"mode": "cool", "temperature_c": 21},
    "create_ticket": {"title": "Login fails after upgrade", "priority": "urgent", "labels": ["auth", "regression"],
                      "metadata": {"component": "web-frontend", "version": "2.4.1"}},
}
BAD_ARGS = {"get_weather": {"city": 42}, "set_thermostat": {"mode": "freeze"}}


def scenario_of(messages: list[dict[str, Any]]) -> Scenario:
    for s in SCENARIOS:
        if s.messages == messages:
            return s
    raise AssertionError("request does not match a fixture scenario")


def glm47(name: str, args: dict[str, Any]) -> str:
    return f"<tool_call>{name}" + "".join(f"<arg_key>{k}</arg_key><arg_value>{json.dumps(v) if not isinstance(v, str) else v}</arg_value>"
                                           for k, v in args.items()) + "</tool_call>"


class ToolStub:
    """modes: good | leak | empty_args | bad_schema | call_always | stream_mismatch | lazy_parallel |
    cut_vllm032 | cut_vllm033 (max_tokens cuts every call: its arguments end early and the answer spends
    the whole budget; finish_reason as each release sets it: vLLM 0.32 says `tool_calls` non-streamed
    whenever its parser found a call (chat_completion/serving.py `is_finish_reason_tool_calls`) and
    `length` streamed (it rewrites only `stop`); vLLM 0.33 says `length` both ways (vllm#58228,
    serve/utils/tool_calls_utils.py `resolve_finish_reason`)).
    `skip_default`: the engine's default skip_special_tokens (vLLM 0.33: from generation_config.json);
    when a request's own value (else that default) is true, the markup, special tokens of the GLM
    tokenizer here, is dropped from the text as vLLM's detokenizer drops special tokens."""

    def __init__(self, mode: str = "good", skip_default: bool = False):
        self.mode = mode
        self.skip_default = skip_default
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = b'{"data": [{"id": "stub"}]}'
                self.send_response(200 if self.path == "/v1/models" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.bodies.append(body)
                content, calls = stub.answer(body, streamed=bool(body.get("stream")))
                finish = "tool_calls" if calls else "stop"
                usage = {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
                if calls and stub.mode.startswith("cut_"):
                    calls = [(n, a[:9]) for n, a in calls]       # the budget ran out inside the arguments
                    usage = {"prompt_tokens": 50, "completion_tokens": body["max_tokens"],
                             "total_tokens": 50 + body["max_tokens"]}
                    finish = "tool_calls" if stub.mode == "cut_vllm032" and not body.get("stream") else "length"
                if not body.get("stream"):
                    msg = {"role": "assistant", "content": content or None,
                           "tool_calls": [{"id": f"call_{i}", "type": "function",
                                           "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)] or None}
                    out = json.dumps({"choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                      "usage": usage}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                events: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}]
                if content:
                    half = len(content) // 2
                    events += [{"choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
                               for part in (content[:half], content[half:])]
                for i, (name, args) in enumerate(calls):
                    events.append({"choices": [{"index": 0, "delta": {"tool_calls": [
                        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": ""}}]}}]})
                    for j in range(0, len(args), 7):  # arguments arrive as JSON fragments
                        events.append({"choices": [{"index": 0, "delta": {"tool_calls": [
                            {"index": i, "function": {"arguments": args[j:j + 7]}}]}}]})
                events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for ev in events:
                    self.wfile.write(f"data: {json.dumps(ev, ensure_ascii=False)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.server.request_queue_size = 128  # the default backlog of 5 resets connections under concurrency
        self.server.server_bind()
        self.server.server_activate()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, body: dict[str, Any], streamed: bool) -> tuple[str, list[tuple[str, str]]]:
        s = scenario_of(body["messages"])
        names = list(s.expect)
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            names = [choice["function"]["name"]]
        if not names:
            if self.mode == "call_always":
                return "", [("get_weather", json.dumps(VALID_ARGS["get_weather"]))]
            return "A haiku is a three-line poem; 17 x 23 = 391; Berlin is 18 C and cloudy.", []
        if self.mode == "leak" and "get_weather" in names:
            text = glm47("get_weather", VALID_ARGS["get_weather"])
            if body.get("skip_special_tokens", self.skip_default):
                for token in ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"):
                    text = text.replace(token, "")
            return text, []
        if self.mode == "lazy_parallel":
            names = names[:1]
        calls = []
        for n in names:
            args = VALID_ARGS[n]
            if self.mode == "empty_args":
                args = {}
            elif self.mode == "bad_schema":
                args = BAD_ARGS.get(n, args)
            elif self.mode == "stream_mismatch" and streamed and n == "create_ticket":
                args = {**args, "priority": "low"}
            calls.append((n, json.dumps(args, ensure_ascii=False)))
        return "", calls

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tool_stub():
    made: list[ToolStub] = []

    def make(mode: str = "good", skip_default: bool = False) -> ToolStub:
        made.append(ToolStub(mode, skip_default))
        return made[-1]
    yield make
    for s in made:
        s.close()


def run(url: str, **kw: Any) -> dict[str, Any]:
    with Client(url) as client:
        return run_harness(client, SCENARIOS, **kw)


def bad_turns(summary: dict[str, Any]) -> dict[str, list[str]]:
    return {r["scenario"]: r["problems"] for r in summary["results"] if not r["ok"]}


def test_fixture_has_the_agent_shapes_the_issue_asks_for():
    assert len(SCENARIOS) >= 10
    expects = [s.expect for s in SCENARIOS]
    assert [] in expects and any(len(e) >= 2 for e in expects)
    assert any(m["role"] == "tool" for s in SCENARIOS for m in s.messages)
    zero_arg = [s for s in SCENARIOS if s.expect and not (s.schema_of(s.expect[0]) or {}).get("properties")]
    assert zero_arg, "a zero-argument function"
    schemas = json.dumps([t["function"]["parameters"] for s in SCENARIOS for t in s.tools])
    assert '"enum"' in schemas and '"items"' in schemas
    # every canned valid answer of the stub validates, so the stub's "good" mode is truly good
    for s in SCENARIOS:
        for n in s.expect:
            ans = ToolAnswer("non-stream", "tool_calls", calls=[{"name": n, "arguments": json.dumps(VALID_ARGS[n])}])
            assert not [p for p in check_answer(s, ans) if "BAD_ARGS" in p or "EMPTY" in p], (s.id, n)


def test_good_parser_passes_every_turn_at_one_user(tool_stub):
    stub = tool_stub("good")
    summary = run(stub.url)
    assert bad_turns(summary) == {}
    assert (summary["parsed"], summary["turns"], summary["leaks"], summary["wrong_calls"]) == (12, 12, 0, 0)
    assert summary["parsed_fraction"] == 1.0
    assert len(stub.bodies) == 24, "each turn is asked non-streamed and streamed"
    assert all(b["tool_choice"] == "auto" and b["temperature"] == 0 and b["model"] == "stub" for b in stub.bodies)
    tool_msg = next(b for b in stub.bodies if any(m["role"] == "tool" for m in b["messages"]))
    assert tool_msg["messages"][-1]["tool_call_id"] == "call_berlin_1"


def test_concurrency_repeats_turns_until_n_are_in_flight(tool_stub):
    stub = tool_stub("good")
    summary = run(stub.url, concurrency=16)
    assert summary["turns"] == 24 and summary["parsed"] == 24 and summary["concurrency"] == 16
    assert {r["repeat"] for r in summary["results"]} == {0, 1}


def test_leaked_markup_is_caught_per_turn(tool_stub):
    summary = run(tool_stub("leak").url)
    bad = bad_turns(summary)
    weather_turns = {s.id for s in SCENARIOS if "get_weather" in s.expect}
    assert set(bad) == weather_turns
    assert summary["leaks"] == len(weather_turns)
    assert sorted(summary["bad_turns"]) == sorted(f"{t}#0" for t in weather_turns)
    problems = " ".join(bad["weather_single"])
    assert "LEAK" in problems and "<tool_call>" in problems and "<arg_key>" in problems
    assert "NOT_PARSED" in problems and "non-stream" in problems and "stream:" in problems


@pytest.mark.parametrize("skip_default", [False, True])
def test_the_leak_verdict_does_not_move_with_the_engines_skip_special_tokens_default(tool_stub, skip_default):
    # vLLM 0.33 defaults skip_special_tokens from generation_config.json; markup that is a special
    # token would vanish from content under a true default, and a leak would read as a text answer
    stub = tool_stub("leak", skip_default)
    summary = run(stub.url)
    assert summary["leaks"] == len({s.id for s in SCENARIOS if "get_weather" in s.expect})
    assert all(b["skip_special_tokens"] is False for b in stub.bodies)
    table = render_summary(summary)
    assert "weather_single#0" in table and "no tool_calls; content '<tool_call>get_weather" in table


def test_silent_empty_arguments_are_named(tool_stub):
    summary = run(tool_stub("empty_args").url)
    bad = bad_turns(summary)
    assert "zero_argument" not in bad, "{} is right for a function without parameters"
    assert "result_then_answer" not in bad and "no_call_smalltalk" not in bad
    assert "EMPTY_ARGS get_weather: arguments '{}' but the schema requires ['city']" in " ".join(bad["weather_single"])
    assert summary["empty_args"] == len(bad) == summary["wrong_calls"]


def test_schema_violations_are_caught(tool_stub):
    summary = run(tool_stub("bad_schema").url)
    bad = bad_turns(summary)
    assert "city: 42 is not of type 'string'" in " ".join(bad["weather_single"])
    assert "mode: 'freeze' is not one of ['heat', 'cool', 'off']" in " ".join(bad["enum_argument"])
    assert "nested_calendar" not in bad
    assert summary["leaks"] == 0 and summary["wrong_calls"] == len(bad)


def test_a_call_where_none_is_wanted_is_a_wrong_call(tool_stub):
    summary = run(tool_stub("call_always").url)
    bad = bad_turns(summary)
    assert set(bad) == {s.id for s in SCENARIOS if not s.expect}
    assert all("WRONG_CALL: no call wanted, got get_weather" in " ".join(p) for p in bad.values())


def test_streamed_and_non_streamed_must_agree(tool_stub):
    summary = run(tool_stub("stream_mismatch").url)
    bad = bad_turns(summary)
    assert set(bad) == {"array_and_object_arguments"}
    assert any(p.startswith("MISMATCH stream vs non-stream") for p in bad["array_and_object_arguments"])


def test_one_call_instead_of_two_is_caught(tool_stub):
    bad = bad_turns(run(tool_stub("lazy_parallel").url))
    assert set(bad) == {"weather_parallel", "two_tools_one_turn"}
    assert "calls ['get_weather'], expected ['get_weather', 'get_weather']" in " ".join(bad["weather_parallel"])


@pytest.mark.parametrize("choice, skipped", [("required", {"result_then_answer", "no_call_smalltalk", "no_call_arithmetic"}),
                                             ("named", {"result_then_answer", "no_call_smalltalk", "no_call_arithmetic",
                                                        "weather_parallel", "two_tools_one_turn"})])
def test_tool_choice_is_sent_and_inapplicable_turns_are_skipped(tool_stub, choice, skipped):
    stub = tool_stub("good")
    summary = run(stub.url, tool_choice=choice, strict=True)
    assert set(summary["skipped"]) == skipped
    assert summary["turns"] == len(SCENARIOS) - len(skipped) == summary["parsed"]
    sent = stub.bodies[0]
    if choice == "named":
        assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    else:
        assert sent["tool_choice"] == "required"
    assert all(t["function"]["strict"] is True for t in sent["tools"])


def test_named_choice_accepts_finish_reason_stop():
    s = next(x for x in SCENARIOS if x.id == "weather_single")
    ans = ToolAnswer("non-stream", "stop", calls=[{"name": "get_weather", "arguments": '{"city": "Paris"}'}])
    assert check_answer(s, ans, "named") == []
    assert check_answer(s, ans, "auto") == ["non-stream: finish_reason 'stop', expected 'tool_calls'"]


def test_a_call_cut_by_max_tokens_is_reported_as_cut_not_as_a_leak():
    """What SGLang 0.5.23 answers when max_tokens cuts a forced call (tests/real_sglang): the raw
    markup in content (non-streamed), partial deltas, or nothing (streamed, the parser holds back a
    call whose name is not complete); finish_reason length in each case."""
    from pytest_glmf.gates.tools.harness import summarize

    s = next(x for x in SCENARIOS if x.id == "weather_single")
    raw = ToolAnswer("non-stream", "length", content='<tool_call>{"name":"get_')
    partial = ToolAnswer("stream", "length", calls=[{"name": "get_weather", "arguments": '{"city": {"type'}],
                         finish_reasons=1)
    held_back = ToolAnswer("stream", "length", content="", finish_reasons=1)
    for ans, what in ((raw, "raw tool markup in content"), (partial, "partial tool_calls"),
                      (held_back, "nothing streamed")):
        (problem,) = check_answer(s, ans, "required")
        assert problem.startswith(f"{ans.mode}: CUT_BY_MAX_TOKENS: the answer reached max_tokens") and what in problem
    # under auto an empty answer is the model's silence, not a cut call
    assert "answered with nothing" in check_answer(s, held_back, "auto")[0]
    turn = TurnResult("weather_single", 0, s.expect, "required", [raw, held_back],
                      check_answer(s, raw, "required") + check_answer(s, held_back, "required"))
    summary = summarize([turn], {})
    assert (summary["cut_calls"], summary["leaks"], summary["text_answers"]) == (1, 0, 0)
    assert failure_hint({**summary, "results": []}).startswith("max_tokens cut the tool call in 1 turn(s)")


@pytest.mark.parametrize("release", ["vllm032", "vllm033"])
def test_a_cut_call_is_counted_as_cut_under_either_releases_finish_reason(tool_stub, release):
    """vLLM 0.32 says `tool_calls` for a call max_tokens cut (non-streamed), 0.33 says `length`: both are
    cut calls, not bad arguments, and the hint says to raise max_tokens."""
    summary = run(tool_stub(f"cut_{release}").url, max_tokens=64)
    wanting = [s for s in SCENARIOS if s.expect]
    assert (summary["cut_calls"], summary["parsed"]) == (len(wanting), len(SCENARIOS) - len(wanting)), summary
    problems = [p for r in summary["results"] for p in r["problems"]]
    assert not [p for p in problems if "BAD_ARGS" in p or "finish_reason 'length'" in p], problems
    if release == "vllm032":
        assert any("(64 of 64 tokens, finish_reason=tool_calls, as vLLM 0.32 reports a cut call)" in p for p in problems)
    assert failure_hint(summary).startswith(f"max_tokens cut the tool call in {len(wanting)} turn(s)")


def test_a_finished_call_within_the_budget_is_not_cut():
    s = next(x for x in SCENARIOS if x.id == "weather_single")
    done = ToolAnswer("non-stream", "tool_calls", calls=[{"name": "get_weather", "arguments": '{"city": "Paris"}'}],
                      completion_tokens=20)
    assert check_answer(s, done, "auto", max_tokens=64) == []
    assert check_answer(s, done, "auto") == []            # no budget given: nothing to compare with
    spent = ToolAnswer("non-stream", "tool_calls", calls=[{"name": "get_weather", "arguments": '{"city": "Par'}],
                       completion_tokens=64)
    (problem,) = check_answer(s, spent, "auto", max_tokens=64)
    assert problem.startswith("non-stream: CUT_BY_MAX_TOKENS")


def test_stream_assembly_by_index_and_finish_count():
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"name": "b", "arguments": '{"y"'}}]}}]},
              {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "a", "arguments": "{}"}}]}}]},
              {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": ": 1}"}}]}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    ans = answer_from_chunks(chunks)
    assert ans.calls == [{"name": "a", "arguments": "{}"}, {"name": "b", "arguments": '{"y": 1}'}]
    assert ans.finish_reasons == 2


def test_leak_signatures():
    assert find_leaks('Sure. {"name": "get_weather", "arguments": {}}') == ['{s*"name"s*:']
    assert find_leaks("search<arg_key>q</arg_key>x</arg_value></tool_call>") == [
        "</tool_call>", "<arg_key>", "</arg_key>", "</arg_value>"]
    assert find_leaks("The weather in Paris is 18 C.") == []


def test_cli_exit_code_and_json(tool_stub, tmp_path, capsys):
    out = tmp_path / "tools.json"
    assert tools_cli(["--url", tool_stub("good").url, "--json", str(out)]) == 0
    assert "tool turns parsed 12/12 at concurrency 1" in capsys.readouterr().out
    assert json.loads(out.read_text())["gates"]["tools"]["users=1"]["leaks"] == 0
    assert tools_cli(["--url", tool_stub("leak").url, "--concurrency", "4"]) == 1
    printed = capsys.readouterr().out
    assert "parsed 9/12" in printed and "leaks 3" in printed and "turn" in printed and "came back" in printed


# ---------------------------------------------------------------------------- the suite, via pytester

SUITE = str(Path(str(resources.files("pytest_glmf.suites"))) / "test_tools.py")


def run_suite(pytester: pytest.Pytester, url: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(SUITE, "--glmf-lane", "daily", "--glmf-url", url,
                              "--glmf-results", str(pytester.path / "results"), "-p", "no:cacheprovider", *extra)


def test_suite_passes_with_a_parser_at_one_user_and_under_concurrency(pytester, tool_stub):
    stub = tool_stub("good")
    result = run_suite(pytester, stub.url)
    result.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "results" / "daily-latest.json").read_text())
    recorded = doc["gates"]["tools"]
    assert set(recorded) == {"users=1", "users=8"}, "daily's tools.settings.concurrency is 8"
    assert (recorded["users=8"]["parsed"], recorded["users=8"]["turns"]) == (12, 12)
    assert len(stub.bodies) == 2 * (12 + 12)


def test_suite_fails_on_leaks_listing_each_bad_turn(pytester, tool_stub, inline_notes):
    stub = tool_stub("leak")
    result = run_suite(pytester, stub.url, "-k", "one_user")
    result.assert_outcomes(failed=1)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).re_match_lines([
        r"tool gate of lane 'daily' @ 1 user\(s\): parsed 9/12, leaks 3, wrong calls 0: 2 threshold\(s\) missed",
        r"parsed_fraction @ 1 user\(s\) +\| 0\.75 +\| >= 1 .*",
        r"leaks @ 1 user\(s\) +\| 3 +\| <= 0 .*tool markup left in content.*",
        r"bad turns:",
        r"turn +\| expected +\| came back +\| problems",
        r"weather_single#0 +\| get_weather +\| finish=stop; no tool_calls; content '<tool_call>get_weather.*LEAK.*",
    ])


def test_suite_catches_empty_arguments_with_the_default_bar(pytester, tool_stub, inline_notes):
    stub = tool_stub("empty_args")
    pytester.makefile(".yaml", thresholds="schema: 1\nlanes: {}\n")
    result = run_suite(pytester, stub.url, "--glmf-thresholds", "thresholds.yaml")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 2, outcomes  # 1 user and 8 users (default concurrency without curve rows)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "*default: the recipe's 10/10 parsed, no leaks*",
        "*EMPTY_ARGS get_weather: arguments '{}' but the schema requires *city*"])
