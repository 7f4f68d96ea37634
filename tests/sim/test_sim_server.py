"""The simulator's HTTP surface against real processes: SGLang's shapes, determinism of the
logits through the API, tool calls, speculative meta_info, the configured flip rate."""
from __future__ import annotations

import json
import time

import httpx
import pytest

from pytest_glmf.engine.client import DONE, Client, parse_sse_line
from pytest_glmf.sim import logits
from pytest_glmf.sim.process import SimProcess

BATCH = ["--model-path", "/models/GLM-5.3-Flash-NVFP4", "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.90",
         "--context-length", "131072", "--cuda-graph-max-bs-decode", "128", "--max-mamba-cache-size", "640",
         "--mamba-ssm-dtype", "bfloat16", "--tool-call-parser", "glm47", "--enable-metrics"]
DAILY = ["--model-path", "/models/GLM-5.3-Flash-NVFP4", "--speculative-algorithm", "DFLASH",
         "--speculative-draft-model-path", "/models/GLM-5.3-Flash-DFlash2", "--speculative-dflash-block-size", "7",
         "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.85", "--context-length", "1048576",
         "--cuda-graph-max-bs-decode", "16", "--max-mamba-cache-size", "48"]


@pytest.fixture(scope="module")
def batch():
    sim = SimProcess(BATCH + ["--autotune-s", "0"], time_scale=0.01).start()
    try:
        sim.wait_ready()
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def client(batch):
    with Client(batch.url) as c:
        yield c


def events(client: Client, path: str, body: dict) -> list:
    with httpx.stream("POST", client.base_url + path, json={**body, "stream": True}, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        out = [parse_sse_line(line) for line in r.iter_lines()]
    return [e for e in out if e is not None]


def chat_body(content: str = "Tell me about the report.", **kw) -> dict:
    return {"messages": [{"role": "user", "content": content}], "temperature": 0, **kw}


def test_introspection(client, batch):
    assert httpx.get(batch.url + "/health").status_code == 200
    models = client.get_json("/v1/models")
    assert models["data"][0]["id"] == "/models/GLM-5.3-Flash-NVFP4" and models["data"][0]["max_model_len"] == 131072
    for path in ("/get_server_info", "/server_info"):
        info = client.get_json(path)
        assert info["max_running_requests"] is None          # echoes the requested value, like SGLang
        assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 128
        assert info["max_mamba_cache_size"] == 640 and info["kv_cache_dtype"] == "fp8_e4m3" and "time_scale" not in info
    assert client.get_json("/get_model_info")["is_generation"] is True
    metrics = client.get_text("/metrics")
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:generation_tokens_total",
                 "sglang:prompt_tokens_total", "sglang:time_to_first_token_seconds_count"):
        assert f"\n{name}{{" in "\n" + metrics, name
    assert httpx.post(batch.url + "/flush_cache").status_code == 200
    assert httpx.get(batch.url + "/nope").status_code == 404


def test_chat_stream_shape(client):
    evs = events(client, "/v1/chat/completions", chat_body(max_tokens=12, ignore_eos=True,
                                                           stream_options={"include_usage": True}))
    assert evs[-1] is DONE
    chunks = evs[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}   # role-only first chunk (0.5.23 StreamDelta)
    content = [c for c in chunks[1:] if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert content and all(c["object"] == "chat.completion.chunk" for c in chunks)
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finish) == 1 and finish[0]["choices"][0]["finish_reason"] == "length"
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 12
    text = "".join(c["choices"][0]["delta"]["content"] for c in content)
    non_stream = client.post_json("/v1/chat/completions", chat_body(max_tokens=12, ignore_eos=True))
    assert non_stream["choices"][0]["message"]["content"] == text                     # same greedy text
    assert non_stream["usage"] == {**usage["usage"]}


def test_chat_logprobs(client):
    r = client.post_json("/v1/chat/completions", chat_body(max_tokens=5, logprobs=True, top_logprobs=3))
    content = r["choices"][0]["logprobs"]["content"]
    assert len(content) == 5
    for item in content:
        assert len(item["top_logprobs"]) == 3 and item["logprob"] == item["top_logprobs"][0]["logprob"]  # greedy = top-1
        assert item["logprob"] <= 0 and isinstance(item["bytes"], list)
    evs = events(client, "/v1/chat/completions", chat_body(max_tokens=5, logprobs=True, top_logprobs=3))
    streamed = [lp for e in evs[:-1] if e["choices"] and e["choices"][0].get("logprobs")
                for lp in e["choices"][0]["logprobs"]["content"]]
    assert [x["logprob"] for x in streamed] == [x["logprob"] for x in content]


def test_completions_with_token_ids(client):
    ids = client.post_json("/tokenize", {"prompt": "the report describes"})["tokens"]
    r = client.post_json("/v1/completions", {"prompt": ids, "max_tokens": 4, "temperature": 0, "logprobs": 2, "echo": True})
    lp = r["choices"][0]["logprobs"]
    assert r["usage"]["prompt_tokens"] == len(ids) and r["usage"]["completion_tokens"] == 4
    assert lp["token_logprobs"][0] is None and len(lp["token_logprobs"]) == len(ids) + 4
    assert r["choices"][0]["text"].startswith("the report describes")
    evs = events(client, "/v1/completions", {"prompt": "the report", "max_tokens": 4, "temperature": 0,
                                             "stream_options": {"include_usage": True}})
    assert evs[-1] is DONE and evs[-2]["usage"]["completion_tokens"] == 4


def test_greedy_then_teacher_forced_scoring_is_exact(client):
    """The drift instrument's self-check: generation log-probs == scoring log-probs, twice."""
    prompt = client.post_json("/tokenize", {"messages": [{"role": "user", "content": "Explain the memory cap."}]})["tokens"]
    templated = client.post_json("/v1/chat/completions", {**chat_body("Explain the memory cap."), "max_tokens": 1,
                                                          "return_prompt_token_ids": True})
    assert templated["choices"][0]["prompt_token_ids"] == prompt
    gen = client.post_json("/generate", {"input_ids": prompt, "sampling_params": {"max_new_tokens": 24, "temperature": 0},
                                         "return_logprob": True, "logprob_start_len": -1})
    out_ids = gen["output_ids"]
    out_lp = [t[0] for t in gen["meta_info"]["output_token_logprobs"]]
    assert gen["meta_info"]["input_token_logprobs"] == [] and len(out_ids) == 24
    body = {"input_ids": prompt + out_ids, "sampling_params": {"max_new_tokens": 0, "temperature": 0},
            "return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": 5}
    s1, s2 = client.post_json("/generate", body), client.post_json("/generate", body)
    meta = s1["meta_info"]
    assert meta["prompt_tokens"] == len(prompt) + 24 and meta["completion_tokens"] == 0 and s1["output_ids"] == []
    inp = meta["input_token_logprobs"]
    assert inp[0] == [None, prompt[0], None] and meta["input_top_logprobs"][0] is None
    assert [t[1] for t in inp] == prompt + out_ids
    scored = [t[0] for t in inp[len(prompt):]]
    assert max(abs(a - b) for a, b in zip(scored, out_lp)) == 0.0
    assert s2["meta_info"]["input_token_logprobs"] == inp                            # twice: 0.0 difference
    tops = meta["input_top_logprobs"][len(prompt):]
    assert all(top[0][1] == tok for top, tok in zip(tops, out_ids))               # greedy token = argmax
    start = client.post_json("/generate", {**body, "logprob_start_len": len(prompt)})["meta_info"]["input_token_logprobs"]
    # SGLang 0.5.23: the first entry from logprob_start_len is null, wherever it starts
    # (sglang/srt/managers/scheduler_components/logprob_result_processor.py `[None] + ...[:-1]`)
    assert start[0] == [None, out_ids[0], None] and start[1:] == inp[len(prompt) + 1:]


def test_generate_batch_stream_and_errors(client, batch):
    r = client.post_json("/generate", {"text": ["a b", "c d"], "sampling_params": {"max_new_tokens": 3, "temperature": 0}})
    assert isinstance(r, list) and [x["meta_info"]["completion_tokens"] for x in r] == [3, 3]
    evs = events(client, "/generate", {"text": "the report", "sampling_params": {"max_new_tokens": 5, "temperature": 0}})
    assert evs[-1] is DONE and evs[-2]["meta_info"]["finish_reason"] == {"type": "length", "length": 5}
    assert len(evs[-2]["text"]) >= len(evs[0]["text"])                               # cumulative text
    too_long = httpx.post(batch.url + "/generate", json={"input_ids": [5] * 131072, "sampling_params": {"max_new_tokens": 1}})
    assert too_long.status_code == 400 and "context length" in too_long.json()["message"]
    assert httpx.post(batch.url + "/v1/chat/completions", content=b"{not json").status_code == 400


WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_tool_calls_parsed_and_streamed(client):
    body = chat_body("Compare the weather in Tokyo and in Oslo.", tools=WEATHER)
    r = client.post_json("/v1/chat/completions", body)
    choice = r["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Oslo"})]
    assert "<tool_call>" not in (choice["message"]["content"] or "")
    evs = events(client, "/v1/chat/completions", body)
    deltas = [tc for e in evs[:-1] if e["choices"] for tc in e["choices"][0]["delta"].get("tool_calls") or []]
    firsts = [d for d in deltas if d.get("id")]      # argument deltas carry id and name null, as in SGLang
    assert [d["function"] for d in firsts] == [{"name": "get_weather", "arguments": ""}] * 2 and firsts[0]["type"] == "function"
    args = {0: "", 1: ""}
    for d in deltas:
        args[d["index"]] += d["function"].get("arguments", "")
    assert [json.loads(a) for a in args.values()] == [{"city": "Tokyo"}, {"city": "Oslo"}]
    finishes = [e["choices"][0]["finish_reason"] for e in evs[:-1] if e["choices"] and e["choices"][0]["finish_reason"]]
    assert finishes == ["tool_calls"]
    answer = client.post_json("/v1/chat/completions", {**chat_body(), "max_tokens": 5, "tools": WEATHER, "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [calls[1]]},
        {"role": "tool", "tool_call_id": calls[1]["id"], "content": '{"temp_c": 4}'}]})
    assert answer["choices"][0]["finish_reason"] == "length" and not answer["choices"][0]["message"].get("tool_calls")


def test_tool_markup_leaks_without_a_parser():
    with SimProcess(["--tool-leak-rate", "0"], time_scale=0.01) as sim:   # no --tool-call-parser
        r = httpx.post(sim.url + "/v1/chat/completions", json=chat_body("Weather in Paris?", tools=WEATHER), timeout=30).json()
    choice = r["choices"][0]
    assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]   # dropped when none, as SGLang
    assert choice["message"]["content"] == "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"


def test_tool_leak_rate_leaks_a_share_of_turns():
    with SimProcess(["--tool-call-parser", "hermes", "--tool-leak-rate", "0.5"], time_scale=0.01) as sim, \
            Client(sim.url) as c:
        leaked = 0
        for i in range(40):
            r = c.post_json("/v1/chat/completions", chat_body(f"Weather in Paris? (turn {i})", tools=WEATHER))
            content = r["choices"][0]["message"]["content"] or ""
            leaked += '<tool_call>\n{"name": "get_weather"' in content
            assert (r["choices"][0]["finish_reason"] == "stop") == bool(content)
        assert 8 <= leaked <= 32


def test_speculative_meta_info_per_class():
    with SimProcess(DAILY, time_scale=0.01) as sim, Client(sim.url) as c:
        rates = {}
        for name, prompt in [("math", "Solve step by step: 3x + 5 = 20."), ("prose", "Write a short story about rain.")]:
            ids = c.post_json("/tokenize", {"messages": [{"role": "user", "content": prompt}]})["tokens"]
            meta = c.post_json("/generate", {"input_ids": ids, "sampling_params": {
                "max_new_tokens": 400, "temperature": 0, "ignore_eos": True}})["meta_info"]
            assert meta["spec_verify_ct"] > 0
            assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / meta["spec_verify_ct"])
            # 0.5.23's names (sglang/srt/managers/tokenizer_manager.py _calculate_spec_decoding_metrics)
            assert meta["spec_num_proposed_drafts"] == 6 * meta["spec_verify_ct"]
            assert meta["spec_accept_rate"] == meta["spec_num_correct_drafts"] / meta["spec_num_proposed_drafts"]
            rates[name] = meta["spec_accept_rate"]
        assert rates["math"] == pytest.approx(0.61, abs=0.06) and rates["prose"] == pytest.approx(0.29, abs=0.06)
        assert c.get_json("/get_server_info")["internal_states"][0]["avg_spec_accept_length"] > 1.0


def test_flip_rate_by_direct_count():
    """Greedy tokens from the fp8 sim, scored on the nvidia sim: the argmax flip rate is what
    logits.expected_stats says for the configured perturbation."""
    with SimProcess(["--checkpoint", "fp8"], time_scale=0.002) as oracle, \
            SimProcess(["--checkpoint", "nvidia"], time_scale=0.002) as cand:
        o, q = Client(oracle.url), Client(cand.url)
        flips = n = 0
        for i in range(24):
            ids = o.post_json("/tokenize", {"prompt": f"prompt number {i} about the report"})["tokens"]
            out = o.post_json("/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 60, "temperature": 0,
                                                                                   "ignore_eos": True}})["output_ids"]
            meta = q.post_json("/generate", {"input_ids": ids + out, "sampling_params": {"max_new_tokens": 0},
                                             "return_logprob": True, "logprob_start_len": len(ids) - 1,
                                             "top_logprobs_num": 1})["meta_info"]
            tops = meta["input_top_logprobs"][1:]   # the first entry from logprob_start_len is null
            flips += sum(top[0][1] != tok for top, tok in zip(tops, out))
            n += len(out)
        o.close()
        q.close()
    expected = logits.expected_stats("nvidia", n=6000)["argmax_mismatch"]
    assert abs(flips / n - expected) <= 0.035, (flips / n, expected)


def test_client_disconnect_frees_the_seat(client, batch):
    body = chat_body(max_tokens=5000, ignore_eos=True, stream=True)
    aborted = client.get_json("/sim/state")["counters"]["aborted"]
    with httpx.stream("POST", batch.url + "/v1/chat/completions", json=body, timeout=30) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i == 4:
                assert client.get_json("/sim/state")["running"] == 1
            if i > 6:
                break   # leaving the iterator closes the connection
    for _ in range(100):
        state = client.get_json("/sim/state")
        if state["running"] == 0:
            break
        time.sleep(0.02)
    assert state["running"] == 0 and state["counters"]["aborted"] == aborted + 1
