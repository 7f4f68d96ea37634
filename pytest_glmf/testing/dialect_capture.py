"""The requests of the dialect check, sent alike to the real SGLang and to the simulator, and their
answers as shapes (`dialect.py`).

The bodies are the ones the gates send: the curve's chat stream with usage (`ignore_eos`), the
drift's greedy and scoring `/generate` (input ids, logprobs, top-k), the tool gate's chat with
tools (a whole call, a call cut by max_tokens, streamed), a completions stream, a bad request
(empty messages), and the introspection endpoints. `/health` while starting is polled by
`StartupProbe` from before the server answers until it says 200.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

from pytest_glmf.engine.client import DONE, parse_sse_line
from pytest_glmf.gates.tools.harness import load_scenarios, request_body
from pytest_glmf.sim.process import SimProcess
from pytest_glmf.testing.dialect import Shape, merge, metric_labels, shape, to_json

PROMPT = "Write one sentence about the sea."
MAX_TOKENS = 8
# ids in both vocabularies (SmolLM2's 49152, the simulator's ~17K); longer than two of the
# simulator's 64-token cache pages, so the scoring request after the greedy one hits the prefix cache
INPUT_IDS = list(range(100, 240))
TOOLS_FULL_TOKENS = 96       # the tool gate's default on the real stage
TOOLS_CUT_TOKENS = 12        # cuts a hermes call: SGLang returns its raw text, finish_reason length


def _status(code: int) -> Shape:
    return {"<status>": {str(code)}}


def _text(body: str) -> Shape:
    return {"<body>": {"empty" if not body else "text"}}


def _json_answer(r: httpx.Response) -> Shape:
    try:
        body = r.json()
    except json.JSONDecodeError:
        return _status(r.status_code) | _text(r.text)
    return _status(r.status_code) | shape(body)


def _stream(http: httpx.Client, path: str, body: dict[str, Any]) -> tuple[Shape, Shape]:
    """(chunks, usage chunk): the shape of every chunk but the usage one, merged, and the usage
    chunk's (`choices` empty, `usage` set); `<done>` says whether `data: [DONE]` ended it."""
    chunks: list[dict[str, Any]] = []
    usage: list[dict[str, Any]] = []
    done = False
    with http.stream("POST", path, json=body) as r:
        status = r.status_code
        for line in r.iter_lines():
            ev = parse_sse_line(line)
            if ev is DONE:
                done = True
            elif ev is not None:
                (usage if ev.get("usage") and not ev.get("choices") else chunks).append(ev)
    head = _status(status) | {"<done>": {str(done).lower()}}
    return head | merge(shape(c, "[]") for c in chunks), merge(shape(c) for c in usage)


def _tool_body(max_tokens: int, stream: bool = False) -> dict[str, Any]:
    s = next(s for s in load_scenarios() if s.id == "weather_single")
    body = request_body(s, "required", max_tokens=max_tokens)
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def capture(base_url: str, timeout_s: float = 300.0) -> dict[str, Shape]:
    """Every surface's shape from a server that is up (the order matters little: /metrics last,
    after the generations, so its counters exist)."""
    out: dict[str, Shape] = {}
    chat = {"model": "default", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": MAX_TOKENS,
            "temperature": 0.0, "ignore_eos": True}
    stream_opts = {"stream": True, "stream_options": {"include_usage": True}}
    gen = {"input_ids": INPUT_IDS, "return_text_in_logprobs": False, "return_logprob": True}
    with httpx.Client(base_url=base_url, timeout=timeout_s) as http:
        for name, path in (("health", "/health"), ("health_generate", "/health_generate"), ("ready", "/ready")):
            r = http.get(path)
            out[name] = _status(r.status_code) | _text(r.text)
        for name, path in (("models", "/v1/models"), ("model_info", "/model_info"), ("server_info", "/server_info")):
            out[name] = _json_answer(http.get(path))
        out["chat"] = _json_answer(http.post("/v1/chat/completions", json=chat))
        out["chat_stream"], out["chat_stream_usage"] = _stream(http, "/v1/chat/completions", chat | stream_opts)
        comp = {k: v for k, v in chat.items() if k != "messages"} | {"prompt": PROMPT}
        out["completion"] = _json_answer(http.post("/v1/completions", json=comp))
        out["completion_stream"], out["completion_stream_usage"] = _stream(http, "/v1/completions", comp | stream_opts)
        out["generate_greedy"] = _json_answer(http.post("/generate", json=gen | {
            "sampling_params": {"max_new_tokens": MAX_TOKENS, "temperature": 0}, "logprob_start_len": -1,
            "top_logprobs_num": 0}))
        out["generate_score"] = _json_answer(http.post("/generate", json=gen | {
            "sampling_params": {"max_new_tokens": 1, "temperature": 0}, "logprob_start_len": len(INPUT_IDS) - 3,
            "top_logprobs_num": 5}))
        out["tools"] = _json_answer(http.post("/v1/chat/completions", json=_tool_body(TOOLS_FULL_TOKENS)))
        out["tools_cut"] = _json_answer(http.post("/v1/chat/completions", json=_tool_body(TOOLS_CUT_TOKENS)))
        out["tools_stream"], _ = _stream(http, "/v1/chat/completions", _tool_body(TOOLS_FULL_TOKENS, stream=True))
        out["bad_request"] = _json_answer(http.post("/v1/chat/completions", json=chat | {"messages": []}))
        r = http.get("/metrics")
        out["metrics"] = {n: labels for n, labels in metric_labels(r.text).items()} if r.status_code == 200 else {}
    return out


def dump(captured: dict[str, Shape]) -> dict[str, dict[str, list[str]]]:
    return {name: to_json(s) for name, s in sorted(captured.items())}


class StartupProbe:
    """Polls `/health` from before the server listens until it answers 200 (or `stop`): the
    statuses and body kinds it saw before the first 200 are the shape of `health_starting`."""

    def __init__(self, base_url: str, interval_s: float = 0.2, timeout_s: float = 600.0) -> None:
        self.base_url, self.interval_s, self.timeout_s = base_url, interval_s, timeout_s
        self.seen: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="glmf-dialect-startup-probe")

    def start(self) -> StartupProbe:
        self._thread.start()
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        with httpx.Client(base_url=self.base_url, timeout=30.0) as http:
            while not self._stop.is_set() and time.monotonic() < deadline:
                try:
                    r = http.get("/health")
                except httpx.TransportError:
                    self._stop.wait(self.interval_s)
                    continue
                self.seen.append((r.status_code, r.text))
                if r.status_code == 200:
                    return
                self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=35)

    def shape(self) -> Shape:
        """Statuses before the first 200 (just `200` if the first answer was already 200)."""
        before = [(c, t) for c, t in self.seen if c != 200] or self.seen[:1]
        out: Shape = {"<status>": {str(c) for c, _ in before}} if before else {"<status>": set()}
        out["<body>"] = {"empty" if not t else "text" for _, t in before}
        return out


# The real stage's lane flags that shape answers (examples/real-sglang-lanes.yaml), on the sim's model
SIM_FLAGS = ("--model-path", "/models/GLM-5.3-Flash-NVFP4", "--tool-call-parser", "hermes", "--enable-metrics",
             "--attention-backend", "torch_native", "--max-total-tokens", "32768", "--autotune-s", "0")


def capture_sim(flags: tuple[str, ...] = SIM_FLAGS, time_scale: float = 0.05) -> dict[str, Shape]:
    """Boot the simulator, probe /health from before it listens, capture, stop it."""

    sim = SimProcess(list(flags), time_scale=time_scale)
    probe = StartupProbe(sim.url, interval_s=0.005).start()
    sim.start()
    try:
        sim.wait_ready(60)
        probe.stop()
        return capture(sim.url, timeout_s=60) | {"health_starting": probe.shape()}
    finally:
        probe.stop()
        sim.stop()
