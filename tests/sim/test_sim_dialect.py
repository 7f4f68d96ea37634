"""Behaviours of the released SGLang 0.5.23 the simulator was not checked against before the real
stage compared them (docs/real-sglang.md "Dialect"): /health while starting and what a /health
costs, /ready, the running gauge refreshed per decode_log_interval, a tool call cut by max_tokens
returned as text."""
from __future__ import annotations

import threading
import time

import httpx
import pytest

from pytest_glmf.engine.client import parse_sse_line
from pytest_glmf.sim.__main__ import cli
from pytest_glmf.sim.process import SimProcess

FLAGS = ["--tool-call-parser", "hermes", "--enable-metrics", "--autotune-s", "0"]


def running_gauge(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    return float(next(ln.split()[-1] for ln in text.splitlines() if ln.startswith("sglang:num_running_reqs{")))


def live_running(url: str) -> int:
    return int(httpx.get(url + "/sim/state", timeout=10).json()["running"])


class LongStream:
    """A streamed chat request long enough to outlast the checks (thousands of tokens, ignore_eos),
    read in a thread; `tokens` counts the content chunks seen."""

    def __init__(self, url: str, max_tokens: int = 8000) -> None:
        self.url, self.max_tokens, self.tokens = url, max_tokens, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = {"messages": [{"role": "user", "content": "Write a very long story."}], "max_tokens": self.max_tokens,
                "ignore_eos": True, "temperature": 0, "stream": True}
        with httpx.stream("POST", self.url + "/v1/chat/completions", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if self._stop.is_set():
                    return          # closing the stream aborts the request
                if parse_sse_line(line) is not None:
                    self.tokens += 1

    def start(self, min_tokens: int = 3) -> LongStream:
        self._thread.start()
        deadline = time.monotonic() + 30
        while self.tokens < min_tokens and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.tokens >= min_tokens, "the long request did not start streaming"
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def wait_idle(url: str) -> None:
    deadline = time.monotonic() + 30
    while live_running(url) and time.monotonic() < deadline:
        time.sleep(0.02)


def test_running_gauge_holds_the_prefill_value_until_a_decode_log_interval() -> None:
    """With a decode_log_interval no run reaches, the gauge says what the last prefill logged (the
    requests running before it): 0 for the first request, 1 once a second one joins; the live count
    is 1 and 2. Idle, it is 0 again."""
    with SimProcess(FLAGS + ["--decode-log-interval", "100000"], time_scale=0.05) as sim:
        assert httpx.get(sim.url + "/server_info", timeout=10).json()["decode_log_interval"] == 100000
        a = LongStream(sim.url).start()
        try:
            assert (live_running(sim.url), running_gauge(sim.url)) == (1, 0.0)
            b = LongStream(sim.url).start()
            try:
                assert (live_running(sim.url), running_gauge(sim.url)) == (2, 1.0)
            finally:
                b.stop()
        finally:
            a.stop()
        wait_idle(sim.url)
        assert running_gauge(sim.url) == 0.0


def test_running_gauge_follows_the_batch_every_decode_log_interval() -> None:
    with SimProcess(FLAGS + ["--decode-log-interval", "1"], time_scale=0.05) as sim:
        a = LongStream(sim.url).start()
        try:
            assert (live_running(sim.url), running_gauge(sim.url)) == (1, 1.0)
        finally:
            a.stop()
        wait_idle(sim.url)
        assert running_gauge(sim.url) == 0.0


def test_health_is_503_until_the_warm_up_ran_then_a_polled_generation() -> None:
    """SGLang answers 503 from the moment it listens until its warm-up request ran (1 s, then 8
    tokens); then each /health is a 1-token generation polled every second (here at time scale 1:
    a lower bound only, the box may be slower)."""
    sim = SimProcess(FLAGS, time_scale=1.0).start()
    try:
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (seen and seen[-1][0] == 200):
            try:
                seen.append((httpx.get(sim.url + "/health", timeout=30).status_code,
                             httpx.get(sim.url + "/ready", timeout=30).status_code))
            except httpx.TransportError:
                time.sleep(0.02)
        assert seen and seen[0] == (503, 503), seen
        assert seen[-1][0] == 200, seen
        sim.wait_ready(30)
        t0 = time.monotonic()
        assert httpx.get(sim.url + "/health", timeout=30).status_code == 200
        assert time.monotonic() - t0 >= 0.9
        assert httpx.get(sim.url + "/ready", timeout=30).status_code == 200
    finally:
        sim.stop()


def test_a_tool_call_cut_by_max_tokens_comes_back_as_text() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    body = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": tools,
            "tool_choice": "required", "temperature": 0, "max_tokens": 6}
    with SimProcess(FLAGS, time_scale=0.01) as sim:
        choice = httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=30).json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert "tool_calls" not in choice["message"]
    assert choice["message"]["content"].startswith("<tool_call>")


def test_decode_log_interval_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["--decode-log-interval", "0"]) == 2
    assert "error: --decode-log-interval 0: must be >= 1" in capsys.readouterr().err
