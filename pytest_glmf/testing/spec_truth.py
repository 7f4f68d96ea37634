"""A vLLM-shaped speculative-decoding server whose acceptance is known exactly, for the acceptance gate.

Each prompt class has a per-position acceptance truth `p_1 >= p_2 >= ... >= p_K` (K =
num_speculative_tokens). A request of n completion tokens takes S draft steps, and exactly
round(p_k * S) of them accept draft token k (a step accepts a prefix of its draft, as vLLM's
rejection sampler does): so per request the histogram, the accepted and drafted counts, the length
(1 + accepted / S) and every position's rate are known, and `truth()` returns them.

It answers as vLLM 0.32 does (vllm/entrypoints/generate/base/protocol.py, v1/spec_decode/metrics.py):
`/metrics` with `vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total` and
`vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0".."K-1"}`; with `per_request` the
last (usage) chunk of a streamed chat completion carries `metrics.speculative_decoding`
(`num_spec_steps`, `num_draft_tokens`, `num_accepted_draft_tokens`, `acceptance_histogram`, ...);
`/server_info?config_format=json` tells `vllm_config.speculative_config`. A class in `no_drafts`
gets no draft at all (an n-gram proposer with no match): zero steps, and vLLM's `mean_acceptance_length`
of 1.0 for it. `hold_s` keeps each answer open that long, so concurrent requests overlap;
`max_in_flight` says how many did. With `speculative=False` it is a vLLM served without
--speculative-config: no spec_decode counters on /metrics, no `speculative_config`, no per-request
numbers. `bodies` keeps each request body as received.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COUNTERS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total")
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def plan_request(n_tokens: int, per_pos: list[float]) -> dict[str, Any]:
    """The exact speculation of one request of `n_tokens` under the per-position truth."""
    k = len(per_pos)
    steps = max(1, round((n_tokens - 1) / (1 + sum(per_pos))))
    at_least = [steps, *(round(p * steps) for p in per_pos), 0]        # steps that accepted >= j drafts
    histogram = [at_least[j] - at_least[j + 1] for j in range(k + 1)]
    accepted = sum(at_least[1:k + 1])
    return {"steps": steps, "histogram": histogram, "accepted": accepted, "drafted": steps * k,
            "per_pos": at_least[1:k + 1], "completion_tokens": 1 + steps + accepted}


class JsonHandler(BaseHTTPRequestHandler):
    """What the small HTTP servers of the tests answer with: a body of known length, or server-sent
    events ended by `[DONE]` on a connection then closed; no request log on stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a: Any) -> None:
        pass

    def reply(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def reply_events(self, events: Iterable[Mapping[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for ev in events:
            self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """`handler` on 127.0.0.1 at a free port, in a daemon thread: the server (shut it down and close
    it) and its URL. A backlog of 128: the default of 5 resets connections under concurrency."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
    server.request_queue_size = 128
    server.server_bind()
    server.server_activate()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class SpecTruthServer:
    """In-process (a thread) truth server; use as a context manager. `classes` maps a class name to
    its per-position truth; `class_of(text)` names the class of the last user message."""

    def __init__(self, classes: Mapping[str, list[float]], class_of: Callable[[str], str], *,
                 method: str = "ngram", per_request: bool = True, no_drafts: set[str] | frozenset[str] = frozenset(),
                 hold_s: float = 0.0, spec_config: Mapping[str, Any] | None = None, speculative: bool = True):
        widths = {len(p) for p in classes.values()}
        if len(widths) != 1 or any(list(p) != sorted(p, reverse=True) for p in classes.values()):
            raise ValueError("every class needs the same number of positions, non-increasing")
        self.k = widths.pop()
        self.classes, self.class_of, self.method = dict(classes), class_of, method
        self.per_request, self.no_drafts, self.hold_s = per_request and speculative, set(no_drafts), hold_s
        self.speculative = speculative
        self.spec_config = dict(spec_config or {"method": method, "num_speculative_tokens": self.k}) \
            if speculative else None
        self.bodies: list[dict[str, Any]] = []
        self.totals = {name: 0 for name in COUNTERS}
        self.per_pos = [0] * self.k
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self._start()

    # ------------------------------------------------------------------ what is true

    def truth(self) -> list[dict[str, Any]]:
        """One entry per answered request: class, steps, histogram, accepted, drafted, per_pos."""
        with self._lock:
            return [dict(r) for r in self.requests]

    def class_truth(self, name: str) -> dict[str, Any]:
        """The class pooled over its requests: accept_rate, accept_length and accept_pos, or no drafts."""
        reqs = [r for r in self.truth() if r["class"] == name]
        steps = sum(r["steps"] for r in reqs)
        if not steps:
            return {"no_drafts": True}
        accepted = sum(r["accepted"] for r in reqs)
        return {"no_drafts": False, "accept_rate": accepted / sum(r["drafted"] for r in reqs),
                "accept_length": 1 + accepted / steps,
                "accept_pos": [sum(r["per_pos"][j] for r in reqs) / steps for j in range(self.k)]}

    # ------------------------------------------------------------------ serving

    def _answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        name = self.class_of(body["messages"][-1]["content"])
        n = int(body.get("max_tokens") or 16)
        plan: dict[str, Any]
        if name in self.no_drafts or not self.speculative:
            plan = {"steps": 0, "histogram": [0] * (self.k + 1), "accepted": 0, "drafted": 0,
                    "per_pos": [0] * self.k, "completion_tokens": n}
        else:
            plan = plan_request(n, self.classes[name])
        tokens = plan["completion_tokens"]
        usage: dict[str, Any] = {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": tokens,
                                                          "total_tokens": 20 + tokens}}
        if self.per_request:
            steps = plan["steps"]
            usage["metrics"] = {"speculative_decoding": {
                "mean_acceptance_length": 1.0 + plan["accepted"] / steps if steps else 1.0,
                "draft_acceptance_rate": plan["accepted"] / plan["drafted"] if plan["drafted"] else 0.0,
                "acceptance_histogram": plan["histogram"], "num_spec_steps": steps,
                "num_accepted_draft_tokens": plan["accepted"], "num_draft_tokens": plan["drafted"],
                "num_spec_tokens": self.k}}
        events = [{"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {"content": "b" * (tokens - 1)}, "finish_reason": "length"}]},
                  usage]
        return events, {"class": name, **plan}

    def _count(self, plan: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(plan)
            self.totals[COUNTERS[0]] += plan["steps"]
            self.totals[COUNTERS[1]] += plan["drafted"]
            self.totals[COUNTERS[2]] += plan["accepted"]
            for j, c in enumerate(plan["per_pos"]):
                self.per_pos[j] += c

    def metrics_text(self) -> str:
        lab = 'engine="0",model_name="truth"'
        lines = ["# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} {self.in_flight}.0"]
        with self._lock:
            if not self.speculative:      # vLLM registers the spec_decode counters only with a drafter
                return "\n".join(lines) + "\n"
            for name in COUNTERS:
                lines += [f"# TYPE {name[:-6]} counter", f"{name}{{{lab}}} {float(self.totals[name])}"]
            lines.append(f"# TYPE {PER_POS[:-6]} counter")
            lines += [f'{PER_POS}{{{lab},position="{j}"}} {float(c)}' for j, c in enumerate(self.per_pos)]
        return "\n".join(lines) + "\n"

    def _start(self) -> None:
        truth = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if self.path == "/version":
                    self.reply(200, b'{"version": "0.32.0"}')
                elif self.path == "/v1/models":
                    self.reply(200, b'{"object": "list", "data": [{"id": "truth", "owned_by": "vllm"}]}')
                elif self.path == "/health":
                    self.reply(200, b"")
                elif self.path.startswith("/server_info"):
                    cfg = {"speculative_config": truth.spec_config, "scheduler_config": {"max_num_seqs": 256}}
                    self.reply(200, json.dumps({"vllm_config": cfg}).encode())
                elif self.path == "/metrics":
                    self.reply(200, truth.metrics_text().encode(), "text/plain; version=0.0.4")
                else:
                    self.reply(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with truth._lock:
                    truth.bodies.append(body)
                if self.path != "/v1/chat/completions":
                    self.reply(404, b'{"error": "not found"}')
                    return
                with truth._lock:
                    truth.in_flight += 1
                    truth.max_in_flight = max(truth.max_in_flight, truth.in_flight)
                try:
                    events, plan = truth._answer(body)
                    time.sleep(truth.hold_s)
                    truth._count(plan)       # before the last chunk: the counters are settled when it arrives
                    self.reply_events(events)
                finally:
                    with truth._lock:
                        truth.in_flight -= 1

        self._server, self.url = serve(Handler)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "SpecTruthServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
