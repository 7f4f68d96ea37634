"""Tool-call gate: agent-style turns through /v1/chat/completions, checked the way users get hurt.

The recipe's bar is "Hermes harness 10/10 tool turns, tool calls parsed". The failures users see
(docs/engines.md section 6): tool markup (`<tool_call>`, `<arg_key>`, `{"name":`) left in `content`
with `tool_calls: null` when no parser is configured or the model drifts from the format, and
parsers that silently return `arguments: "{}"` (vllm#49248). Per turn (pytest_glmf/data/tool_scenarios.yaml)
this module checks, non-streamed and streamed:

- a call was expected: `tool_calls` present, `finish_reason: "tool_calls"` (with a *named*
  tool_choice OpenAI's own API answers `"stop"`, so that is accepted there), the called names are
  the expected ones (as a multiset, order-free) and among the offered tools, the arguments are JSON
  that validate against the tool's JSON schema (required keys, types, enums), and `{}` where the
  schema requires keys is named as such;
- no call was wanted: no `tool_calls`, and a non-empty answer;
- a call was wanted and none came back: markup left in the answer is the parser's failure
  (NOT_PARSED); a plain answer is the model's (`answered with text, finish_reason=length: the model
  did not call get_stock_price`); a failed request says what the server answered (status,
  endpoint, a short excerpt of the body) and is counted as `failed_requests`, never blamed on the
  parser;
- no tool markup in `content` or the reasoning text;
- a call the answer started but `max_tokens` cut (`finish_reason: "length"` with tool markup in
  the content or with calls; SGLang 0.5.23 returns a cut call's raw `<tool_call>` text in
  `content` when not streamed, and partial `tool_calls` deltas, or nothing at all when the cut comes
  before the call's name is complete, when streamed) is CUT_BY_MAX_TOKENS,
  counted as `cut_calls`: neither a leak nor a parser's failure, the request's budget was too small.
  The engines say it two ways: vLLM 0.33 keeps `finish_reason: "length"` on a cut call (vllm#58228,
  vllm/entrypoints/serve/utils/tool_calls_utils.py `resolve_finish_reason`); vLLM 0.32 answers
  `"tool_calls"` whenever its parser found a call, cut or not (non-streamed:
  vllm/entrypoints/openai/chat_completion/serving.py `is_finish_reason_tool_calls`), so there a
  call whose answer spent the whole budget (`usage.completion_tokens >= max_tokens`) is the cut one;
- the streamed answer (deltas assembled per `index`) makes the same calls with the same arguments
  (compared as parsed JSON) as the non-streamed one, and carries exactly one finish_reason.

`tool_choice` is per run: `auto` (the default), `required` (turns that want no call are skipped:
the server is told to call), or `named` (each turn names its first expected tool; turns that want
no call or several calls are skipped). `strict=True` adds `"strict": true` to every function,
which makes vLLM enforce the parameter schema (docs/real-engine.md 2(d)) for small models.
Under concurrency the turns are repeated until N are in flight, so "parsed N of N" counts all of them.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from pytest_glmf.config.yamlfile import parse_yaml
from pytest_glmf.data import read_text as read_data_file
from pytest_glmf.engine.client import Client
from pytest_glmf.engine.httperror import request_failure
from pytest_glmf.engine.introspect import served_model
from pytest_glmf.gates.tools.spec import DEFAULTS, TOOL_CHOICES

# Markup that must never reach `content`/reasoning: GLM-4.5/4.7 and Hermes tags, and the bare JSON
# call object a Hermes-style model prints when the parser misses it.
DEFAULT_MAX_TOKENS = DEFAULTS.max_tokens
LEAK_PATTERNS = [re.compile(p) for p in (r"<tool_call>", r"</tool_call>", r"<arg_key>", r"</arg_key>",
                                         r"<arg_value>", r"</arg_value>", r'\{\s*"name"\s*:',
                                         r"<function=", r"\[TOOL_CALLS\]", r"<\|python_tag\|>")]


@dataclass
class Scenario:
    id: str
    tools: list[dict[str, Any]]           # OpenAI tool objects ({"type": "function", "function": {...}})
    messages: list[dict[str, Any]]
    expect: list[str]                     # expected call names, one per call; [] = no call wanted

    def schema_of(self, name: str) -> dict[str, Any] | None:
        for t in self.tools:
            if t["function"]["name"] == name:
                return t["function"].get("parameters") or {"type": "object"}
        return None


def load_scenarios(path: str | Path | None = None) -> list[Scenario]:
    """Scenarios from a YAML file (None: the packaged pytest_glmf/data/tool_scenarios.yaml)."""
    data = parse_yaml(read_data_file(path, "tool_scenarios.yaml"), str(path or "pytest_glmf/data/tool_scenarios.yaml"))
    tools = {name: {"type": "function", "function": {"name": name, **spec}} for name, spec in data["tools"].items()}
    out = []
    for s in data["scenarios"]:
        unknown = [t for t in s["tools"] + list(s["expect"]) if t not in tools]
        if unknown:
            raise ValueError(f"scenario {s['id']}: unknown tool(s) {unknown}")
        out.append(Scenario(s["id"], [tools[t] for t in s["tools"]], list(s["messages"]), list(s["expect"])))
    return out


@dataclass
class ToolAnswer:
    """What came back for one request, normalised across streamed and non-streamed."""

    mode: str                                         # "non-stream" | "stream"
    finish_reason: str | None = None
    content: str = ""
    reasoning: str = ""
    calls: list[dict[str, str]] = field(default_factory=list)   # {"name", "arguments"} (raw strings)
    finish_reasons: int = 0                           # how many chunks carried one (stream)
    completion_tokens: int | None = None              # usage.completion_tokens, when the server sent usage
    error: str | None = None                          # the request failed: why, in one line
    error_cause: str | None = None                    # "server" | "network" (gates/verdict.py CAUSES)

    def brief(self) -> str:
        if self.error:
            return f"error: {self.error}"
        calls = ", ".join(f"{c['name']}({c['arguments']})" for c in self.calls) or "no tool_calls"
        text = f"; content {self.content[:80]!r}" if self.content else ""
        return f"finish={self.finish_reason}; {calls}{text}"


def answer_from_response(body: dict[str, Any]) -> ToolAnswer:
    choice = (body.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    calls = [{"name": (tc.get("function") or {}).get("name") or "",
              "arguments": (tc.get("function") or {}).get("arguments") or ""}
             for tc in msg.get("tool_calls") or []]
    used = (body.get("usage") or {}).get("completion_tokens")
    return ToolAnswer("non-stream", choice.get("finish_reason"), msg.get("content") or "",
                      msg.get("reasoning_content") or msg.get("reasoning") or "", calls,
                      1 if choice.get("finish_reason") else 0,
                      completion_tokens=used if isinstance(used, int) and not isinstance(used, bool) else None)


def answer_from_chunks(chunks: Iterable[dict[str, Any]]) -> ToolAnswer:
    """Assemble streamed deltas: content and reasoning concatenated, tool calls per `index`
    (the first delta of a call brings id and name, later ones argument fragments)."""
    ans = ToolAnswer("stream")
    by_index: dict[int, dict[str, str]] = {}
    content, reasoning = [], []
    for chunk in chunks:
        for ch in chunk.get("choices") or []:
            d = ch.get("delta") or {}
            content.append(d.get("content") or "")
            reasoning.append(d.get("reasoning_content") or d.get("reasoning") or "")
            for tc in d.get("tool_calls") or []:
                slot = by_index.setdefault(int(tc.get("index", 0)), {"name": "", "arguments": ""})
                fn = tc.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            if ch.get("finish_reason"):
                ans.finish_reason = ch["finish_reason"]
                ans.finish_reasons += 1
        used = (chunk.get("usage") or {}).get("completion_tokens")
        if isinstance(used, int) and not isinstance(used, bool):
            ans.completion_tokens = used
    ans.content, ans.reasoning = "".join(content), "".join(reasoning)
    ans.calls = [by_index[i] for i in sorted(by_index)]
    return ans


def find_leaks(text: str) -> list[str]:
    return [p.pattern.replace("\\", "") for p in LEAK_PATTERNS if p.search(text or "")]


def request_body(s: Scenario, tool_choice: str = DEFAULTS.tool_choice, *, model: str | None = None,
                 strict: bool = DEFAULTS.strict,
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
    tools = [{**t, "function": {**t["function"], "strict": True}} if strict else t for t in s.tools]
    # skip_special_tokens sent, false: tool markup that is a special token stays in the text the
    # leak check reads, whatever default the engine applies (vLLM >= 0.33 takes it from the
    # model's generation_config.json; parsers that need the markup force false themselves).
    body: dict[str, Any] = {"messages": s.messages, "tools": tools, "temperature": 0, "max_tokens": max_tokens,
                            "skip_special_tokens": False}
    if tool_choice == "named":
        body["tool_choice"] = {"type": "function", "function": {"name": s.expect[0]}}
    else:
        body["tool_choice"] = tool_choice
    if model:
        body["model"] = model
    return body


def applies(s: Scenario, tool_choice: str) -> str | None:
    """None when the turn can run under this tool_choice, else why it is skipped."""
    if tool_choice == "required" and not s.expect:
        return "wants no call, but tool_choice=required forces one"
    if tool_choice == "named" and len(s.expect) != 1:
        return "a named tool_choice needs exactly one expected call"
    return None


def _parse_args(raw: str) -> tuple[Any, str | None]:
    try:
        return json.loads(raw), None
    except (json.JSONDecodeError, TypeError) as exc:
        return None, f"arguments are not JSON ({exc.msg if hasattr(exc, 'msg') else exc}): {raw[:80]!r}"


def check_answer(s: Scenario, ans: ToolAnswer, tool_choice: str = DEFAULTS.tool_choice,
                 max_tokens: int | None = None) -> list[str]:
    """Every problem of one answer, as short sentences (empty list: the answer is right).
    `max_tokens`: the request's budget, which tells a cut call that its engine reports as
    `finish_reason: tool_calls` (vLLM 0.32) from a finished one."""
    if ans.error:
        return [f"{ans.mode}: request failed: {ans.error}"]
    problems = []
    tag = ans.mode
    forced = tool_choice in ("required", "named") and bool(s.expect)
    if ans.finish_reason == "length" and (ans.calls or find_leaks(ans.content) or (forced and not ans.content.strip())):
        what = ("partial tool_calls" if ans.calls else "raw tool markup in content" if ans.content.strip()
                else "nothing streamed: the parser held the unfinished call back")
        return [f"{tag}: CUT_BY_MAX_TOKENS: the answer reached max_tokens (finish_reason=length) inside a tool "
                f"call ({what}): raise max_tokens"]
    if (ans.calls and ans.finish_reason == "tool_calls" and max_tokens is not None
            and ans.completion_tokens is not None and ans.completion_tokens >= max_tokens):
        return [f"{tag}: CUT_BY_MAX_TOKENS: the answer reached max_tokens ({ans.completion_tokens} of {max_tokens} "
                f"tokens, finish_reason={ans.finish_reason}, as vLLM 0.32 reports a cut call) inside a tool call "
                "(partial tool_calls): raise max_tokens"]
    for where, text in (("content", ans.content), ("reasoning", ans.reasoning)):
        leaks = find_leaks(text)
        if leaks:
            problems.append(f"{tag}: LEAK tool markup {leaks} in {where}: {text[:100]!r}")
    if ans.mode == "stream" and ans.finish_reasons != 1:
        problems.append(f"{tag}: {ans.finish_reasons} finish_reason chunks (expected exactly 1)")
    if not s.expect:
        if ans.calls:
            problems.append(f"{tag}: WRONG_CALL: no call wanted, got " + ", ".join(c["name"] for c in ans.calls))
        elif not ans.content.strip():
            problems.append(f"{tag}: no call wanted, but the answer is empty (finish={ans.finish_reason})")
        return problems
    if not ans.calls:
        if find_leaks(ans.content) or find_leaks(ans.reasoning):
            problems.append(f"{tag}: NOT_PARSED: expected {s.expect}, tool markup in the answer but tool_calls "
                            f"empty (finish={ans.finish_reason})")
        else:
            said = "answered with text" if ans.content.strip() else "answered with nothing"
            problems.append(f"{tag}: {said}, finish_reason={ans.finish_reason}: the model did not call "
                            f"{', '.join(dict.fromkeys(s.expect))}")
        return problems
    ok_finish = ("tool_calls", "stop") if tool_choice == "named" else ("tool_calls",)
    if ans.finish_reason not in ok_finish:
        problems.append(f"{tag}: finish_reason {ans.finish_reason!r}, expected 'tool_calls'")
    offered = {t["function"]["name"] for t in s.tools}
    got_names = [c["name"] for c in ans.calls]
    if Counter(got_names) != Counter(s.expect):
        problems.append(f"{tag}: WRONG_CALL: calls {got_names}, expected {s.expect}")
    for c in ans.calls:
        if c["name"] not in offered:
            problems.append(f"{tag}: WRONG_CALL: {c['name']!r} is not an offered tool {sorted(offered)}")
            continue
        args, err = _parse_args(c["arguments"])
        if err:
            problems.append(f"{tag}: BAD_ARGS {c['name']}: {err}")
            continue
        schema = s.schema_of(c["name"]) or {}
        if args == {} and schema.get("required"):
            problems.append(f"{tag}: EMPTY_ARGS {c['name']}: arguments '{{}}' but the schema requires {schema['required']}")
            continue
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(args), key=lambda e: list(e.path))
        if errors:
            problems.append(f"{tag}: BAD_ARGS {c['name']}: " + "; ".join(
                f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors[:3]))
    return problems


def merge_problems(problems: list[str]) -> list[str]:
    """One line per distinct problem: "non-stream: X" and "stream: X" become "non-stream+stream: X",
    and a problem repeated for several calls of one answer is listed once."""
    modes: dict[str, list[str]] = {}
    for p in problems:
        mode, _, text = p.partition(": ")
        if mode not in modes.setdefault(text, []):
            modes[text].append(mode)
    return [f"{'+'.join(m)}: {text}" for text, m in modes.items()]


def compare_answers(a: ToolAnswer, b: ToolAnswer) -> list[str]:
    """Streamed vs non-streamed: same calls (name, parsed arguments) in the same order."""
    if a.error or b.error:
        return []
    def norm(ans: ToolAnswer) -> list[tuple[str, str]]:
        out = []
        for c in ans.calls:
            args, err = _parse_args(c["arguments"])
            out.append((c["name"], json.dumps(args, sort_keys=True) if err is None else c["arguments"]))
        return out
    if norm(a) != norm(b):
        return [f"MISMATCH stream vs non-stream: {b.brief()} vs {a.brief()}"]
    return []


@dataclass
class TurnResult:
    scenario: str
    repeat: int
    expect: list[str]
    tool_choice: str
    answers: list[ToolAnswer]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def leaked(self) -> bool:
        return any("LEAK" in p for p in self.problems)

    @property
    def wrong_call(self) -> bool:
        return any(k in p for p in self.problems for k in ("WRONG_CALL", "BAD_ARGS", "EMPTY_ARGS"))

    @property
    def failed_request(self) -> ToolAnswer | None:
        return next((a for a in self.answers if a.error), None)

    @property
    def text_answer(self) -> bool:
        return any(": answered with " in p for p in self.problems)


def ask(client: Client, body: dict[str, Any], stream: bool) -> ToolAnswer:
    try:
        if stream:
            return answer_from_chunks(ev for _, ev in client.stream_events("/v1/chat/completions", body))
        return answer_from_response(client.post_json("/v1/chat/completions", body))
    except Exception as exc:  # noqa: BLE001 - the turn reports it
        # the server answered something unusable (e.g. a 200 that is not JSON): its doing too
        cause, why = request_failure(exc) or ("server", f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
        return ToolAnswer("stream" if stream else "non-stream", error=why[:300], error_cause=cause)


def run_turn(client: Client, s: Scenario, *, tool_choice: str = DEFAULTS.tool_choice, model: str | None = None,
             strict: bool = DEFAULTS.strict, check_stream: bool = True, repeat: int = 0,
             max_tokens: int = DEFAULT_MAX_TOKENS) -> TurnResult:
    body = request_body(s, tool_choice, model=model, strict=strict, max_tokens=max_tokens)
    answers = [ask(client, body, stream=False)]
    if check_stream:
        answers.append(ask(client, body, stream=True))
    problems = merge_problems([p for a in answers for p in check_answer(s, a, tool_choice, max_tokens)])
    if check_stream:
        problems += compare_answers(answers[0], answers[1])
    return TurnResult(s.id, repeat, s.expect, tool_choice, answers, problems)


def summarize(results: list[TurnResult], skipped: dict[str, str]) -> dict[str, Any]:
    n = len(results)
    failed = [a for r in results if (a := r.failed_request) is not None]
    return {"turns": n, "parsed": sum(r.ok for r in results),
            "parsed_fraction": sum(r.ok for r in results) / n if n else None,
            "leaks": sum(r.leaked for r in results), "wrong_calls": sum(r.wrong_call for r in results),
            "empty_args": sum(any("EMPTY_ARGS" in p for p in r.problems) for r in results),
            "failed_requests": len(failed),
            "request_errors": dict(Counter(a.error for a in failed).most_common()),
            "text_answers": sum(r.text_answer for r in results),
            "cut_calls": sum(any("CUT_BY_MAX_TOKENS" in p for p in r.problems) for r in results),
            "bad_turns": [f"{r.scenario}#{r.repeat}" for r in results if not r.ok], "skipped": skipped}


def request_error_cause(summary: dict[str, Any]) -> str | None:
    """The failure ledger's class of the run's failed requests: "network" when none reached the
    server, else "server"; None without failed requests."""
    causes = {a.get("error_cause") for r in summary["results"] for a in r["answers"] if a.get("error")}
    return None if not causes else "network" if causes == {"network"} else "server"


def failure_hint(summary: dict[str, Any]) -> str | None:
    """The cause behind the unparsed turns, when it is not the tool-call parser: failed requests
    (the server's answer, once) or the model answering with text. None: look at the parser."""
    bad = summary["turns"] - summary["parsed"]
    if not bad:
        return None
    if summary.get("failed_requests") == bad:
        top = next(iter(summary["request_errors"]))
        return f"{bad} turn(s) got no answer: {top}; not a tool-parser problem"
    if summary.get("cut_calls") == bad:
        return (f"max_tokens cut the tool call in {bad} turn(s) (finish_reason=length): not a parser problem; "
                "raise max_tokens")
    if summary.get("text_answers") == bad:
        return (f"the model answered with text instead of calling in {bad} turn(s): not a parser problem; "
                "check the prompt, tool_choice (required or named for small models) and max_tokens")
    return None


def harness_summary(results: list[TurnResult], scenarios: list[Scenario], *, concurrency: int = 1,
                    tool_choice: str = DEFAULTS.tool_choice, strict: bool = DEFAULTS.strict) -> dict[str, Any]:
    """The summary of the turns run (all of them, or those that finished before a Ctrl-C)."""
    out = summarize(results, {s.id: why for s in scenarios if (why := applies(s, tool_choice))})
    out.update({"concurrency": concurrency, "tool_choice": tool_choice, "strict": strict,
                "results": [{**asdict(r), "ok": r.ok} for r in results]})
    return out


def run_harness(client: Client, scenarios: list[Scenario], *, concurrency: int = 1,
                tool_choice: str = DEFAULTS.tool_choice, strict: bool = DEFAULTS.strict, model: str | None = None,
                check_stream: bool = True, max_tokens: int = DEFAULT_MAX_TOKENS,
                on_turn: Callable[[TurnResult], None] | None = None) -> dict[str, Any]:
    """Run every applicable turn (repeated until `concurrency` turns are in flight) and summarise.
    `on_turn` gets each turn as it ends; a Ctrl-C cancels the turns not started yet."""
    if tool_choice not in TOOL_CHOICES:
        raise ValueError(f"tool_choice {tool_choice!r}: use one of {TOOL_CHOICES}")
    if model is None:
        model = served_model(client)  # vLLM wants the served model's name; SGLang ignores it
    todo = [s for s in scenarios if not applies(s, tool_choice)]
    repeats = max(1, -(-concurrency // len(todo))) if todo else 0
    jobs = [(s, r) for r in range(repeats) for s in todo]

    def turn(job: tuple[Scenario, int]) -> TurnResult:
        result = run_turn(client, job[0], tool_choice=tool_choice, model=model, strict=strict,
                          check_stream=check_stream, repeat=job[1], max_tokens=max_tokens)
        if on_turn is not None:
            on_turn(result)
        return result

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:
        results = list(pool.map(turn, jobs))
    finally:    # on Ctrl-C the queued turns are dropped, the ones in flight end
        pool.shutdown(wait=True, cancel_futures=True)
    return harness_summary(results, scenarios, concurrency=concurrency, tool_choice=tool_choice, strict=strict)
