"""Every injectable fault of the simulator, through real processes: boot failures, crashes, cut
streams, 503s, malformed SSE, empty answers, slowdowns, broken tool-call markup."""
from __future__ import annotations

import json
import time

import httpx
import pytest

from pytest_glmf.engine.client import SSEError, parse_sse_line
from pytest_glmf.gates.boot.parse import parse_boot_log
from pytest_glmf.sim.faults import expected_self_abs_dlogp
from pytest_glmf.sim.process import SimProcess

CHAT = {"messages": [{"role": "user", "content": "Tell me about the report."}], "max_tokens": 8, "temperature": 0}


def stream_lines(url: str, body: dict) -> tuple[list[str], Exception | None]:
    lines: list[str] = []
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=10) as r:
            for line in r.iter_lines():
                lines.append(line)
    except httpx.HTTPError as exc:
        return lines, exc
    return lines, None


def test_boot_oom_exits_1_with_sglangs_message():
    sim = SimProcess(["--fault", "boot-oom"]).start()
    try:
        assert sim.wait_exit(30) == 1
    finally:
        sim.stop()
    facts = parse_boot_log(sim.log)
    assert not facts.ready and any("Not enough memory" in p for p in facts.problems)
    assert "Scheduler hit an exception" in sim.log and "Load weight end" in sim.log


def test_config_that_does_not_fit_is_a_boot_oom():
    sim = SimProcess(["--speculative-algorithm", "DFLASH", "--max-mamba-cache-size", "400"]).start()
    try:
        assert sim.wait_exit(30) == 1
    finally:
        sim.stop()
    assert "Not enough GPU memory for hybrid (mamba/linear-attention) state cache" in sim.log


def test_boot_hang_never_gets_ready():
    sim = SimProcess(["--fault", "boot-hang"]).start()
    try:
        with pytest.raises(RuntimeError, match="not ready after"):
            sim.wait_ready(timeout_s=2.0)
        assert sim.proc.poll() is None                                   # alive, stuck in "graph capture"
        assert sim.log.splitlines()[-1].endswith("This can take up to several minutes. avail mem=91.56 GB")
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{sim.url}/health", timeout=1)
    finally:
        sim.stop()
    assert sim.proc.returncode is not None


@pytest.mark.parametrize("flags,ok_before", [(["--fault", "crash-first-request"], 0),
                                             (["--fault", "crash-after-requests=2"], 2),
                                             (["--speculative-algorithm", "NEXTN"], 0),
                                             (["--speculative-algorithm", "DFLASH", "--mamba-ssm-dtype", "bfloat16"], 0)])
def test_crash_on_request(flags, ok_before):
    sim = SimProcess(flags, time_scale=0.01).start()
    try:
        sim.wait_ready()
        with httpx.Client(base_url=sim.url, timeout=10) as c:
            assert c.get("/health").status_code == 200                   # introspection does not count
            for _ in range(ok_before):
                assert c.post("/v1/chat/completions", json=CHAT).status_code == 200
            with pytest.raises(httpx.HTTPError):
                c.post("/v1/chat/completions", json=CHAT)
        assert sim.wait_exit(10) == 1
    finally:
        sim.stop()
    assert "Scheduler hit an exception" in sim.log and "illegal memory access" in sim.log
    assert parse_boot_log(sim.log).problems


@pytest.fixture(scope="module")
def sim():
    with SimProcess(["--tool-call-parser", "glm47"], time_scale=0.01) as s:
        yield s


@pytest.fixture
def faults(sim):
    """Set faults through the admin endpoint; cleared after the test."""
    def set_(*specs: str) -> dict:
        r = httpx.post(sim.url + "/sim/faults", json={"faults": list(specs), "replace": True})
        assert r.status_code == 200, r.text
        return r.json()

    yield set_
    httpx.delete(sim.url + "/sim/faults")


def test_admin_endpoint_validates(sim, faults):
    assert faults("slow=2")["slow"] == 2.0
    bad = httpx.post(sim.url + "/sim/faults", json={"faults": ["explode=1"]})
    assert bad.status_code == 400 and "valid forms" in bad.json()["message"]
    assert httpx.get(sim.url + "/sim/faults").json()["specs"] == ["slow=2"]


def test_stream_cut_drops_the_connection(sim, faults):
    faults("stream-cut=3")
    lines, err = stream_lines(sim.url, {**CHAT, "max_tokens": 20})
    assert isinstance(err, httpx.RemoteProtocolError)                     # incomplete chunked body
    data = [ln for ln in lines if ln.startswith("data:")]
    assert len(data) == 3 and "data: [DONE]" not in lines
    assert httpx.get(sim.url + "/health").status_code == 200              # the server itself survives


def test_http_503_then_normal_service(sim, faults):
    faults("http-503=2")
    with httpx.Client(base_url=sim.url, timeout=10) as c:
        codes = [c.post("/v1/chat/completions", json=CHAT).status_code for _ in range(3)]
        gen = c.post("/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 1}}).status_code
    assert codes == [503, 503, 200] and gen == 200


def test_malformed_sse_line(sim, faults):
    faults("malformed-sse")
    lines, err = stream_lines(sim.url, CHAT)
    assert err is None and lines[-2:] == ["data: [DONE]", ""] or "data: [DONE]" in lines
    bad = 0
    for line in lines:
        try:
            parse_sse_line(line)
        except SSEError:
            bad += 1
    assert bad == 1


def test_no_tokens(sim, faults):
    faults("no-tokens")
    r = httpx.post(sim.url + "/v1/chat/completions", json=CHAT, timeout=10).json()
    assert r["usage"]["completion_tokens"] == 0 and r["choices"][0]["message"]["content"] == ""
    lines, err = stream_lines(sim.url, {**CHAT, "stream_options": {"include_usage": True}})
    events = [json.loads(ln[6:]) for ln in lines if ln.startswith("data: {")]
    assert err is None and events[-1]["usage"]["completion_tokens"] == 0
    assert not any(e["choices"] and e["choices"][0]["delta"].get("content") for e in events)


def test_slow_multiplies_modelled_time(sim, faults):
    body = {**CHAT, "max_tokens": 400, "ignore_eos": True}
    modelled_s = 0.01 * (0.17 + 400 / 142)   # time scale x (prefill + 400 decode steps at 142 tok/s)
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        c.post("/v1/chat/completions", json=body)
        t = time.perf_counter()
        c.post("/v1/chat/completions", json=body)
        normal_s = time.perf_counter() - t
        faults("slow=8")
        t = time.perf_counter()
        c.post("/v1/chat/completions", json=body)
        slow_s = time.perf_counter() - t
    assert slow_s - normal_s >= 0.7 * 7 * modelled_s, (normal_s, slow_s, modelled_s)


def test_tool_empty_args(sim, faults):
    faults("tool-empty-args")
    tools = [{"type": "function", "function": {"name": "search_web", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]
    body = {**CHAT, "max_tokens": 200, "tools": tools,
            "messages": [{"role": "user", "content": "Search the web for SGLang releases."}]}
    r = httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=10).json()
    call = r["choices"][0]["message"]["tool_calls"][0]
    assert r["choices"][0]["finish_reason"] == "tool_calls" and call["function"] == {"name": "search_web", "arguments": "{}"}


def _scored(url: str, ids: list[int], start: int, k: int = 4) -> tuple[list[float], list[list]]:
    r = httpx.post(url + "/generate", json={"input_ids": ids, "sampling_params": {"max_new_tokens": 0},
                                            "return_logprob": True, "logprob_start_len": start - 1,
                                            "top_logprobs_num": k}, timeout=10).json()
    meta = r["meta_info"]
    return [e[0] for e in meta["input_token_logprobs"][1:]], meta["input_top_logprobs"][1:]


def test_logprob_noise_and_shift_are_seeded_and_of_the_stated_size(sim, faults):
    prompt = httpx.post(sim.url + "/tokenize", json={"prompt": "Tell me about the report."}).json()["tokens"]
    out = httpx.post(sim.url + "/generate", json={"input_ids": prompt, "sampling_params": {
        "max_new_tokens": 400, "temperature": 0}}, timeout=30).json()["output_ids"]
    ids, start = prompt + out, len(prompt)   # greedy tokens: the model's candidates, which the noise moves
    exact, _ = _scored(sim.url, ids, start)
    assert _scored(sim.url, ids, start)[0] == exact                       # no fault: the same ids score exactly alike
    faults("logprob-shift=0.25")
    shifted, tops = _scored(sim.url, ids, start)
    assert all(abs((a - b) - 0.25) < 1e-12 for a, b in zip(exact, shifted))
    faults("logprob-noise=0.1")
    first, tops = _scored(sim.url, ids, start)
    second, _ = _scored(sim.url, ids, start)
    d = [abs(a - b) for a, b in zip(first, second)]
    # two draws of 0.1 * N(0, 1) differ by 0.1 * sqrt(2) * |N(0, 1)|: mean 2 * 0.1 / sqrt(pi) = 0.113
    assert all(x > 0 for x in d)
    assert abs(sum(d) / len(d) - expected_self_abs_dlogp(0.1)) < 0.015, sum(d) / len(d)
    # the top-k is re-ranked after the noise: best first, and the scored token carries its own value
    for lp, top, tid in zip(first, tops, ids[start:]):
        values = [e[0] for e in top]
        assert values == sorted(values, reverse=True)
        assert all(abs(e[0] - lp) < 1e-12 for e in top if e[1] == tid)


def test_runaway_answers_never_stop(sim, faults):
    from pytest_glmf.sim.faults import is_runaway
    from pytest_glmf.sim.tokenizer import apply_chat_template

    body = {**CHAT, "max_tokens": 2200}   # the natural answer: 700..2100 tokens (logits.py)
    normal = httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=30).json()
    assert normal["choices"][0]["finish_reason"] == "stop"
    assert not is_runaway(apply_chat_template(CHAT["messages"]), 0, 0.0)
    faults("runaway=1")
    r = httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=30).json()
    assert r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 2200
    bad = httpx.post(sim.url + "/sim/faults", json={"faults": ["runaway=1.5"]})
    assert bad.status_code == 400 and "runaway=P" in bad.json()["message"]
