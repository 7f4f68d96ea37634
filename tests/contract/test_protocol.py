"""The simulator's JSON, validated by SGLang 0.5.23's own protocol models, and every request body
the project's gates send, validated by SGLang's own request checks.

Responses: chat (plain, tools, logprobs), stream chunks (plain, tools, logprobs, continuous usage),
completions, the model list, tokenize/detokenize and errors go through the pydantic models of
sglang/srt/entrypoints/openai/protocol.py; no key the simulator sends may be one the model does
not know (the models ignore unknown keys, so an invented field would otherwise pass). `/generate`
has no response model in SGLang: its meta_info keys must be keys sglang/srt/managers/
tokenizer_manager.py can set, with the 0.5.23 rules for speculative counters and log-probs.

Requests: the simulator records every body it receives (`--record-requests`) while the curve,
drift, acceptance and tool gates run against it through their own code; each body then goes
through ChatCompletionRequest / CompletionRequest / TokenizeRequest, or for /generate through
GenerateReqInput.normalize_batch_and_arguments and SamplingParams.verify
(sglang/srt/managers/io_struct.py, sglang/srt/sampling/sampling_params.py).
"""
from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_glmf.engine.client import Client, iter_sse
from pytest_glmf.sim.process import SimProcess

pytestmark = pytest.mark.contract

DAILY = ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/models/GLM-5.3-Flash-DFlash2",
         "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.85", "--context-length", "1048576",
         "--cuda-graph-max-bs-decode", "16", "--max-mamba-cache-size", "48", "--speculative-dflash-block-size", "7",
         "--tool-call-parser", "glm47", "--enable-metrics", "--log-format", "0.5.23", "--autotune-s", "0"]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris? Use get_weather."}]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    record = tmp_path_factory.mktemp("contract") / "requests.jsonl"
    with SimProcess([*DAILY, "--record-requests", str(record)], time_scale=0.01) as s:
        yield s.url, record


def extra_keys(ours: Any, theirs: Any, where: str = "") -> list[str]:
    """Keys in our JSON that SGLang's model dump does not have (recursively)."""
    out: list[str] = []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for k, v in ours.items():
            if k not in theirs:
                out.append(f"{where}.{k}")
            else:
                out += extra_keys(v, theirs[k], f"{where}.{k}")
    elif isinstance(ours, list) and isinstance(theirs, list):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            out += extra_keys(a, b, f"{where}[{i}]")
    return out


def validate(oracle: Any, model: str, data: Any) -> dict[str, Any]:
    verdict = oracle.call("model", name=model, data=data)
    assert verdict["ok"], f"{model} rejects the simulator's JSON: {verdict['errors']}\n{json.dumps(data)[:600]}"
    assert extra_keys(data, verdict["dump"]) == [], f"{model}: keys SGLang does not have"
    return verdict["dump"]


def stream(url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.Client(timeout=60) as http, http.stream("POST", url + path, json={**body, "stream": True}) as r:
        assert r.status_code == 200
        return list(iter_sse(r.iter_lines()))


def test_chat_responses_validate(sglang_oracle: Any, sim: tuple[str, Path]) -> None:
    url, _ = sim
    with Client(url) as c:
        plain = c.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi there"}],
                                                     "max_tokens": 8, "temperature": 0, "logprobs": True,
                                                     "top_logprobs": 2, "return_prompt_token_ids": True})
        tools = c.post_json("/v1/chat/completions", {"messages": ASK_WEATHER, "tools": [WEATHER], "max_tokens": 64})
    validate(sglang_oracle, "ChatCompletionResponse", plain)
    dump = validate(sglang_oracle, "ChatCompletionResponse", tools)
    assert dump["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(dump["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}


@pytest.mark.parametrize("case", ["plain", "tools", "logprobs", "continuous_usage"])
def test_chat_stream_chunks_validate(sglang_oracle: Any, sim: tuple[str, Path], case: str) -> None:
    url, _ = sim
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "Write one line about rain."}], "max_tokens": 12,
                            "temperature": 0, "stream_options": {"include_usage": True}}
    if case == "tools":
        body.update(messages=ASK_WEATHER, tools=[WEATHER], max_tokens=64)
    if case == "logprobs":
        body.update(logprobs=True, top_logprobs=2)
    if case == "continuous_usage":
        body["stream_options"]["continuous_usage_stats"] = True
    chunks = stream(url, "/v1/chat/completions", body)
    for chunk in chunks:
        validate(sglang_oracle, "ChatCompletionStreamResponse", chunk)
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] > 0
    assert sum(1 for ch in chunks if ch["choices"] and ch["choices"][0]["finish_reason"]) == 1
    if case == "continuous_usage":
        # sglang/srt/entrypoints/openai/serving_chat.py: cumulative usage on every content chunk
        content = [ch for ch in chunks if ch["choices"] and ch["choices"][0]["delta"].get("content")]
        running = [ch["usage"]["completion_tokens"] for ch in content]
        assert content and all("usage" in ch for ch in content) and running == sorted(running)
        assert running[-1] <= usage["usage"]["completion_tokens"]


def test_completions_models_tokenize_and_errors_validate(sglang_oracle: Any, sim: tuple[str, Path]) -> None:
    url, _ = sim
    with Client(url) as c:
        done = c.post_json("/v1/completions", {"prompt": "The capital of France is", "max_tokens": 6,
                                               "temperature": 0, "logprobs": 2, "echo": True})
        models = c.get_json("/v1/models")
        tok = c.post_json("/tokenize", {"prompt": "hello world"})
        detok = c.post_json("/detokenize", {"tokens": tok["tokens"]})
    validate(sglang_oracle, "CompletionResponse", done)
    for chunk in stream(url, "/v1/completions", {"prompt": "Once upon", "max_tokens": 6,
                                                 "stream_options": {"include_usage": True}}):
        validate(sglang_oracle, "CompletionStreamResponse", chunk)
    assert validate(sglang_oracle, "ModelList", models)["data"][0]["owned_by"] == "sglang"
    validate(sglang_oracle, "TokenizeResponse", tok)
    validate(sglang_oracle, "DetokenizeResponse", detok)
    bad = httpx.post(url + "/v1/chat/completions", json={"messages": [], "max_tokens": 4}, timeout=30)
    assert bad.status_code == 400
    validate(sglang_oracle, "ErrorResponse", bad.json())


# Where 0.5.23 fills meta_info: the tokenizer manager, the request's time stats (merged into it:
# convert_to_output_meta_info builds `meta_info`/`meta_data`) and the weight-version spans.
META_INFO_SOURCES = ("srt/managers/tokenizer_manager.py", "srt/observability/req_time_stats.py",
                     "srt/utils/weight_versions.py")
META_INFO_NAMES = ("meta_info", "meta_data")


def meta_info_keys(sglang_package: Path) -> set[str]:
    """Every key SGLang's META_INFO_SOURCES can put into meta_info."""
    keys: set[str] = set()
    for source in META_INFO_SOURCES:
        keys |= _meta_info_keys(ast.parse((sglang_package / source).read_text()))
    return keys


def _meta_info_keys(tree: ast.AST) -> set[str]:
    keys: set[str] = set()

    def named(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in META_INFO_NAMES

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and named(node.value) and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
        if isinstance(node, ast.Assign) and any(named(t) for t in node.targets) and isinstance(node.value, ast.Dict):
            keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
                and named(node.func.value) and node.args and isinstance(node.args[0], ast.Dict):
            keys |= {k.value for k in node.args[0].keys if isinstance(k, ast.Constant)}
    return keys


def test_generate_meta_info_is_0_5_23s(sglang_package: Path, sim: tuple[str, Path]) -> None:
    url, _ = sim
    allowed = meta_info_keys(sglang_package)
    assert {"prompt_tokens", "spec_num_correct_drafts", "spec_verify_ct", "output_token_logprobs"} <= allowed
    with Client(url) as c:
        ids = c.post_json("/tokenize", {"prompt": "Solve step by step: 3x + 5 = 20."})["tokens"]
        chunks = [e for _, e in c.stream_events("/generate", {"input_ids": ids, "sampling_params": {
            "max_new_tokens": 48, "temperature": 0, "ignore_eos": True}, "return_logprob": True,
            "logprob_start_len": 3, "top_logprobs_num": 2})]
        one = c.post_json("/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 1}})
    metas = [ch["meta_info"] for ch in chunks]
    for meta in metas + [one["meta_info"]]:
        assert set(meta) - allowed == set(), f"meta_info keys SGLang 0.5.23 never sets: {set(meta) - allowed}"
    spec = {"spec_accept_rate", "spec_accept_length", "spec_num_correct_drafts", "spec_num_proposed_drafts",
            "spec_verify_ct"}
    # tokenizer_manager.py `_calculate_spec_decoding_metrics`: finished answers only, spec_verify_ct > 0 only
    assert all(not (spec & set(m)) for m in metas[:-1]) and spec <= set(metas[-1])
    assert metas[-1]["spec_num_proposed_drafts"] == 6 * metas[-1]["spec_verify_ct"]
    assert "e2e_latency" in metas[-1] and "e2e_latency" not in metas[0]
    # logprob_result_processor.py: the first entry from logprob_start_len is null, not position 0's
    inp = metas[-1]["input_token_logprobs"]
    assert inp[0] == [None, ids[3], None] and all(isinstance(e[0], float) for e in inp[1:])
    assert len(inp) == len(ids) - 3 and metas[-1]["input_top_logprobs"][0] is None
    assert metas[-1]["output_token_logprobs_length"] == len(metas[-1]["output_token_logprobs"]) == 48


def test_request_bodies_the_gates_send_pass_sglangs_checks(sglang_oracle: Any, sim: tuple[str, Path]) -> None:
    from pytest_glmf.engine.introspect import detect_engine
    from pytest_glmf.gates.acceptance.probe import load_prompt_classes, probe
    from pytest_glmf.gates.curve import measure_curve
    from pytest_glmf.gates.drift.adapters import make_adapter
    from pytest_glmf.gates.drift.prompts import load_chat_prompts
    from pytest_glmf.gates.drift.reference import make_reference, score_candidate
    from pytest_glmf.gates.tools.harness import load_scenarios, run_harness

    url, record = sim
    record.write_text("")
    measure_curve(url, [2], max_tokens=8, runs=1)
    adapter = make_adapter(url)
    ref = make_reference(adapter, load_chat_prompts(n=2), max_tokens=6, k=3)
    score_candidate(adapter, ref)
    adapter.close()
    with Client(url) as client:
        assert detect_engine(client) == "sglang"
        probe(client, "sglang", load_prompt_classes()[:1], prompts_per_class=1, max_tokens_scale=0.05)
        run_harness(client, load_scenarios()[:2])
    bodies = [json.loads(line) for line in record.read_text().splitlines()]
    models = {"/v1/chat/completions": "ChatCompletionRequest", "/v1/completions": "CompletionRequest",
              "/tokenize": "TokenizeRequest"}
    seen: dict[str, int] = {}
    for entry in bodies:
        if not entry["body"]:
            continue                       # /flush_cache: no body
        body = json.loads(entry["body"])
        path = entry["path"]
        seen[path] = seen.get(path, 0) + 1
        if path == "/generate":
            verdict = sglang_oracle.call("generate_request", data=body)
            assert verdict["ok"], f"SGLang's /generate checks reject {body!r}: {verdict['error']}"
        elif path in models:
            verdict = sglang_oracle.call("model", name=models[path], data=body)
            assert verdict["ok"], f"{models[path]} rejects {json.dumps(body)[:400]}: {verdict['errors']}"
        else:
            pytest.fail(f"a gate sent a body to {path}, which this test does not know how to check")
    assert {"/v1/chat/completions", "/generate"} <= set(seen), seen
