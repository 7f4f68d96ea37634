"""A ground-truth OpenAI-style SSE server: emits tokens at exactly known times and records when it
really sent each one, so a load generator's numbers can be checked against the truth.

    python -m pytest_glmf.testing.truth_server --port 0 --ttft-ms 50 --itl-ms 10 [--seats 8]
    -> prints "READY http://127.0.0.1:PORT" and serves until killed

Behaviour, per streamed chat completion (always the full `max_tokens`, as with ignore_eos):
- a role-only chunk is sent the moment the request is received (even when it must queue), like
  vLLM's first chunk, so a client that stops its TTFT clock there is caught;
- with `--seats K` at most K requests run; the rest wait FIFO (queue time belongs in TTFT);
- the first content token is due `ttft` after the request starts running, token i at
  `ttft + i * itl`; after the first token, chunks carry `--tokens-per-chunk` tokens (as under
  speculative decoding) and go out when their last token is due;
- the final usage chunk reports completion_tokens + `--usage-delta` (to provoke a count mismatch);
- a conversation's prefix cache, exactly: a request's `cached_tokens` is the token count of the
  longest earlier conversation its messages start with (an earlier request's messages, or those
  plus the answer this server gave it), tokens counted as ~4 characters per token of the JSON of
  the messages; `--cache-report` puts it in usage.prompt_tokens_details.cached_tokens (SGLang's
  --enable-cache-report, vLLM's --enable-prompt-tokens-details); /flush_cache empties it;
- `/flush_cache` advances through `--speed-schedule` (factors on ttft and itl) to make runs noisy;
- `--pair-every N`: every Nth chunk of a stream is written together with the next one, in one
  write (a server that batches two events; both are truly sent at that write's time);
- `--metrics-file F`: /metrics serves that text (e.g. a GPU vLLM's, 55 KB: tests/testing/data)
  with its vLLM generation, running and waiting samples replaced by the truth's own;
- a known service curve: with `--itl-per-running-ms X` each token takes itl + X * (running - 1),
  running counted when the token is scheduled (per-user speed falls with concurrency), and with
  `--ttft-per-running-ms Y` a request that starts as the k-th running one gets its first token
  ttft + Y * (k - 1) after it started (TTFT grows with the batch).
Truth endpoints: GET /truth (every request: receive, start and per-chunk send times on the
CLOCK_MONOTONIC `time.perf_counter` clock shared by processes on one host), /metrics
(SGLang counter and gauge names), /flush_cache, /v1/models, /health.

The protocol is a minimal HTTP/1.1 server on purpose: a framework would add per-event costs and
jitter to the very times this server is meant to pin down. For the same reason a request's receive
time is the kernel's (SO_TIMESTAMPNS: when its bytes reached the socket), not the moment this
single-threaded server got round to reading it: when a burst of 128 requests lands at once, the
last one is read ~5 ms after it arrived, and that wait is the server's, so it belongs in the true
TTFT (the first token is due `ttft` after the kernel's receive time), never in a client's error.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx

from pytest_glmf.load import StampedSender, enable_kernel_stamps, recv_stamped

perf = time.perf_counter


@dataclass
class TruthConfig:
    ttft_s: float = 0.05
    itl_s: float = 0.01
    tokens_per_chunk: int = 1
    seats: int = 0                       # 0: unlimited
    usage_delta: int = 0
    speed_schedule: list[float] = field(default_factory=lambda: [1.0])
    prompt_tokens: int | None = None     # None: ~4 characters per token of the messages
    itl_per_running_s: float = 0.0       # each token: itl + this * (running - 1)
    ttft_per_running_s: float = 0.0      # first token: ttft + this * (running at start - 1)
    cache_report: bool = False           # usage.prompt_tokens_details.cached_tokens
    pair_every: int = 0                  # every Nth chunk goes out with the next one, in one write (0: never)
    metrics_text: str | None = None      # a real server's /metrics to serve around the truth's own counters


@dataclass
class Job:
    rid: str
    proto: "_Conn"
    max_tokens: int
    prompt_tokens: int
    include_usage: bool
    continuous_usage: bool
    t_recv_s: float
    t_start_s: float | None = None
    request_tag: str | None = None
    messages: list[tuple[str, str]] = field(default_factory=list)   # (role, content) as received
    cached_tokens: int = 0
    sends: list[tuple[float, int]] = field(default_factory=list)   # (perf_counter send time, tokens)
    factor: float = 1.0
    next_token: int = 0
    t_next_s: float = 0.0                # when the next token is due
    done: bool = False


class TruthState:
    def __init__(self, cfg: TruthConfig):
        self.cfg = cfg
        self.jobs: list[Job] = []
        self.queue: deque[Job] = deque()
        self.running = 0
        self.generated_tokens = 0
        self.prompt_tokens = 0
        self.flushes = 0
        self.next_id = 0
        self.conversations: set[tuple[tuple[str, str], ...]] = set()   # the prefix cache (conversation.md)

    def cached_tokens(self, messages: list[tuple[str, str]]) -> int:
        """Tokens of the longest cached conversation `messages` starts with (all but the last
        message can be cached: the new turn is always computed)."""
        for j in range(len(messages) - 1, 0, -1):
            if tuple(messages[:j]) in self.conversations:
                return _tokens_of(messages[:j])
        return 0

    def factor(self) -> float:
        sched = self.cfg.speed_schedule
        return sched[self.flushes % len(sched)]


_MID = b'"object":"chat.completion.chunk","model":"truth","choices":[{"index":0,"delta":{"content":'


def _tokens_of(messages: list[tuple[str, str]]) -> int:
    return max(1, len(json.dumps([{"role": r, "content": c} for r, c in messages])) // 4)


def _plain_messages(req: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(m.get("role")), str(m["content"]) if isinstance(m.get("content"), str) else json.dumps(m.get("content")))
            for m in req.get("messages") or [] if isinstance(m, dict)]


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _sse(obj: Any) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


class _SockTransport:
    """One accepted connection, read with recvmsg so every read carries the kernel's receive time
    (load/sockstamp.py); write() sends at once and buffers only what the socket would not take."""

    def __init__(self, sock: socket.socket, conn: "_Conn", loop: asyncio.AbstractEventLoop):
        self.sock, self.conn, self.loop = sock, conn, loop
        self.sender = StampedSender(sock, loop, self.abort)
        self.sender.on_drained = self._drained
        self.closed = False
        self.stamped = enable_kernel_stamps(sock)     # else: the read time
        loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, t_recv = recv_stamped(self.sock)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self.abort()
        if not data:
            return self.close()
        self.conn.data_received(data, t_recv)

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.sender.write(data)

    def _drained(self) -> None:
        if self.closed:
            self._shut()

    def close(self) -> None:
        """Close after what is buffered has gone out (like asyncio's transport.close)."""
        if self.closed:
            return
        self.closed = True
        self.conn.transport = None
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.sock.fileno())
        if not self.sender.out:
            self._shut()

    def abort(self) -> None:
        """The peer is gone: drop what is buffered."""
        self.sender.discard()
        self.close()
        self._shut()

    def _shut(self) -> None:
        if self.sock.fileno() >= 0:
            self.loop.remove_writer(self.sock.fileno())
            self.sock.close()


class _Conn:
    def __init__(self, state: TruthState):
        self.state = state
        self.buf = b""
        self.close_after = False
        self.request_tag: str | None = None   # a client's X-Request-ID, to pair peers' records with the truth
        self.transport: _SockTransport | None = None
        self.loop = asyncio.get_running_loop()

    def data_received(self, data: bytes, t_recv: float) -> None:
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].decode("latin-1")
            lines = head.split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:] if ":" in h)}
            length = int(headers.get("content-length", "0"))
            if len(self.buf) < head_end + 4 + length:
                return
            body = self.buf[head_end + 4: head_end + 4 + length]
            self.buf = self.buf[head_end + 4 + length:]
            self.close_after = headers.get("connection", "").lower() == "close"
            self.request_tag = headers.get("x-request-id")
            self.route(method, path.split("?")[0], body, t_recv)

    # -- plain responses -------------------------------------------------------------------------
    def reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        if self.transport is None:
            return
        reason = {200: "OK", 404: "Not Found", 400: "Bad Request"}.get(status, "OK")
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                             % (status, reason.encode(), ctype.encode(), len(body), body))
        if self.close_after:
            self.transport.close()

    def route(self, method: str, path: str, body: bytes, t_recv: float) -> None:
        st = self.state
        if path in ("/v1/chat/completions", "/v1/completions") and method == "POST":
            try:
                req = json.loads(body or b"{}")
            except json.JSONDecodeError:
                return self.reply(400, b'{"error":"bad json"}')
            return self.start_stream(req, t_recv, chat=path.endswith("chat/completions"))
        if path in ("/flush_cache", "/reset_prefix_cache"):
            st.flushes += 1
            st.conversations.clear()
            return self.reply(200, b"Cache flushed.", "text/plain")
        if path == "/metrics" and st.cfg.metrics_text is not None:
            return self.reply(200, _vllm_metrics(st).encode(), "text/plain; version=0.0.4")
        if path == "/metrics":
            text = ("# TYPE sglang:generation_tokens_total counter\n"
                    f'sglang:generation_tokens_total{{model_name="truth"}} {st.generated_tokens}\n'
                    f'sglang:prompt_tokens_total{{model_name="truth"}} {st.prompt_tokens}\n'
                    f'sglang:num_running_reqs{{model_name="truth"}} {st.running}\n'
                    f'sglang:num_queue_reqs{{model_name="truth"}} {len(st.queue)}\n')
            return self.reply(200, text.encode(), "text/plain; version=0.0.4")
        if path == "/truth":
            return self.reply(200, json.dumps([_job_dict(j) for j in st.jobs]).encode())
        if path == "/truth/reset":
            st.jobs.clear()
            return self.reply(200, b"{}")
        if path == "/v1/models":
            return self.reply(200, b'{"object":"list","data":[{"id":"truth","object":"model"}]}')
        if path in ("/health", "/health_generate"):
            return self.reply(200, b"")
        return self.reply(404, b'{"error":"not found"}')

    # -- streaming -------------------------------------------------------------------------------
    def start_stream(self, req: dict[str, Any], t_recv: float, chat: bool) -> None:
        st = self.state
        opts = req.get("stream_options") or {}
        text = json.dumps(req.get("messages") or req.get("prompt") or "")
        messages = _plain_messages(req)
        job = Job(rid=f"chatcmpl-truth-{st.next_id}", proto=self, max_tokens=int(req.get("max_tokens") or req.get("max_completion_tokens") or 16),
                  prompt_tokens=st.cfg.prompt_tokens or max(1, len(text) // 4),
                  include_usage=bool(opts.get("include_usage")),
                  continuous_usage=bool(opts.get("continuous_usage_stats")), t_recv_s=t_recv,
                  request_tag=self.request_tag, messages=messages)
        job.cached_tokens = st.cached_tokens(messages)
        st.conversations.add(tuple(messages))
        st.next_id += 1
        st.jobs.append(job)
        st.prompt_tokens += job.prompt_tokens
        if self.transport is None:
            return
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
        self.transport.write(self.event(job, {"role": "assistant", "content": ""}, None))
        if st.cfg.seats and st.running >= st.cfg.seats:
            st.queue.append(job)
        else:
            self.run(job)

    def event(self, job: Job, delta: dict[str, Any], finish: str | None, usage: dict | None = None) -> bytes:
        obj: dict[str, Any] = {"id": job.rid, "object": "chat.completion.chunk", "model": "truth",
                               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            obj["usage"] = usage
        return _sse(obj)

    def run(self, job: Job, queued: bool = False) -> None:
        st = self.state
        st.running += 1
        # a request that found a free seat starts when it arrived (kernel time); a queued one now
        job.t_start_s = perf() if queued else job.t_recv_s
        job.factor = st.factor()
        cfg = st.cfg
        job.t_next_s = job.t_start_s + job.factor * (cfg.ttft_s + cfg.ttft_per_running_s * (st.running - 1))
        self.schedule(job)

    def schedule(self, job: Job) -> None:
        """The next chunk goes out when its last token is due: the first token alone, then
        `tokens_per_chunk` at a time, each token one inter-token interval after the one before."""
        cfg = self.state.cfg
        k = 1 if job.next_token == 0 else cfg.tokens_per_chunk
        n = min(job.next_token + k, job.max_tokens) - job.next_token
        if job.next_token > 0:
            itl = cfg.itl_s + cfg.itl_per_running_s * (self.state.running - 1)
            job.t_next_s += job.factor * itl * n
        self.loop.call_later(max(0.0, job.t_next_s - perf()), self.emit, job, n)

    def emit(self, job: Job, ntok: int) -> None:
        st = self.state
        first = job.next_token
        job.next_token += ntok
        final = job.next_token >= job.max_tokens
        payload = self._payload(job, first, ntok, final)
        cfg = st.cfg
        if not final and cfg.pair_every and (len(job.sends) + 1) % cfg.pair_every == 0:
            # this chunk and the next go out in one write, now (the next one early: truly sent now)
            n2 = min(job.next_token + cfg.tokens_per_chunk, job.max_tokens) - job.next_token
            first2 = job.next_token
            job.next_token += n2
            final = job.next_token >= job.max_tokens
            payload += self._payload(job, first2, n2, final)
            if self.transport is not None:
                t = perf()
                self.transport.write(payload)
                job.sends += [(t, ntok), (t, n2)]
            st.generated_tokens += ntok
            if final:
                return self._finish(job, n2)
            job.t_next_s += job.factor * (cfg.itl_s + cfg.itl_per_running_s * (st.running - 1)) * n2
            st.generated_tokens += n2
            return self.schedule(job)
        if self.transport is not None:
            t = perf()
            self.transport.write(payload)
            job.sends.append((t, ntok))
        st.generated_tokens += ntok
        if not final:
            return self.schedule(job)
        return self._finish(job, 0)

    def _payload(self, job: Job, first: int, ntok: int, final: bool) -> bytes:
        content = "".join(f" w{i}" for i in range(first, first + ntok))
        if final or job.continuous_usage:
            usage = ({"prompt_tokens": job.prompt_tokens, "completion_tokens": job.next_token,
                      "total_tokens": job.prompt_tokens + job.next_token} if job.continuous_usage else None)
            payload = self.event(job, {"content": content}, "length" if final else None, usage)
        else:   # the hot path: no json.dumps per token, so one process can feed hundreds of streams
            data = b'data: {"id":"%s",%s"%s"},"finish_reason":null}]}\n\n' % (job.rid.encode(), _MID, content.encode())
            payload = b"%x\r\n%s\r\n" % (len(data), data)
        return payload

    def _finish(self, job: Job, ntok: int) -> None:
        """The stream's end after its last chunk went out (`ntok`: its tokens, not yet counted)."""
        st = self.state
        st.generated_tokens += ntok
        reported = job.next_token + st.cfg.usage_delta
        if job.messages:   # the answer joins the cache with the conversation it answered
            answer = "".join(f" w{i}" for i in range(job.next_token))
            st.conversations.add(tuple(job.messages) + (("assistant", answer),))
        tail = b""
        if job.include_usage:
            final_usage: dict[str, Any] = {"prompt_tokens": job.prompt_tokens, "completion_tokens": reported,
                                           "total_tokens": job.prompt_tokens + reported}
            if st.cfg.cache_report:
                final_usage["prompt_tokens_details"] = {"cached_tokens": job.cached_tokens}
            tail += _sse({"id": job.rid, "object": "chat.completion.chunk", "model": "truth", "choices": [],
                          "usage": final_usage})
        tail += _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        if self.transport is not None:
            self.transport.write(tail)
            if self.close_after:
                self.transport.close()
        job.done = True
        st.running -= 1
        if st.queue:
            nxt = st.queue.popleft()
            nxt.proto.run(nxt, queued=True)


def _vllm_metrics(st: TruthState) -> str:
    """The configured /metrics text with vLLM's generation, running and waiting samples set to the
    truth's own (every label set of those samples dropped, one line each added)."""
    own = {"vllm:generation_tokens_total": st.generated_tokens, "vllm:num_requests_running": st.running,
           "vllm:num_requests_waiting": len(st.queue)}
    keep = [line for line in (st.cfg.metrics_text or "").splitlines()
            if not any(line.startswith(name + "{") or line.startswith(name + " ") for name in own)]
    return "\n".join(keep + [f'{name}{{model_name="truth"}} {value}' for name, value in own.items()]) + "\n"


def _job_dict(j: Job) -> dict[str, Any]:
    return {"id": j.rid, "request_tag": j.request_tag, "t_recv_s": j.t_recv_s, "t_start_s": j.t_start_s, "max_tokens": j.max_tokens,
            "sends": j.sends, "done": j.done, "prompt_tokens": j.prompt_tokens, "cached_tokens": j.cached_tokens,
            "messages": len(j.messages)}


def true_metrics(job: dict[str, Any]) -> dict[str, float | int | None]:
    """The truth for one request, in the load generator's definitions (see pytest_glmf.load_metrics):
    TTFT from receipt to the first content send (queueing included), per-user tok/s =
    (tokens - 1) / (last send - first send)."""
    sends = job["sends"]
    if not sends:
        return {"ttft_s": None, "tok_s": None, "tokens": 0, "t_first_s": None, "t_last_s": None}
    tokens = sum(n for _, n in sends)
    span = sends[-1][0] - sends[0][0]
    return {"ttft_s": sends[0][0] - job["t_recv_s"], "tok_s": (tokens - 1) / span if span > 0 else None,
            "tokens": tokens, "t_first_s": sends[0][0], "t_last_s": sends[-1][0]}


async def serve(cfg: TruthConfig, host: str, port: int) -> None:
    state = TruthState(cfg)
    loop = asyncio.get_running_loop()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(4096)
    listener.setblocking(False)

    def accept() -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(state)
            conn.transport = _SockTransport(sock, conn, loop)

    loop.add_reader(listener.fileno(), accept)
    print(f"READY http://{host}:{listener.getsockname()[1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        loop.remove_reader(listener.fileno())
        listener.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pytest_glmf.testing.truth_server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--seats", type=int, default=0)
    p.add_argument("--usage-delta", type=int, default=0)
    p.add_argument("--prompt-tokens", type=int, default=None)
    p.add_argument("--speed-schedule", default="1.0", help="comma-separated factors, advanced by /flush_cache")
    p.add_argument("--itl-per-running-ms", type=float, default=0.0,
                   help="each token takes itl + this * (running requests - 1)")
    p.add_argument("--ttft-per-running-ms", type=float, default=0.0,
                   help="first token: ttft + this * (running requests when it started - 1)")
    p.add_argument("--cache-report", action="store_true",
                   help="report each request's prefix-cache hit in usage.prompt_tokens_details.cached_tokens")
    p.add_argument("--pair-every", type=int, default=0,
                   help="every Nth chunk of a stream goes out with the next one, in one write (0: never)")
    p.add_argument("--metrics-file", help="serve this /metrics text (a real server's) around the truth's counters")
    p.add_argument("--no-uvloop", action="store_true")
    a = p.parse_args(argv)
    cfg = TruthConfig(ttft_s=a.ttft_ms / 1e3, itl_s=a.itl_ms / 1e3, tokens_per_chunk=a.tokens_per_chunk,
                      seats=a.seats, usage_delta=a.usage_delta, prompt_tokens=a.prompt_tokens,
                      speed_schedule=[float(x) for x in a.speed_schedule.split(",")],
                      itl_per_running_s=a.itl_per_running_ms / 1e3, ttft_per_running_s=a.ttft_per_running_ms / 1e3,
                      cache_report=a.cache_report, pair_every=a.pair_every,
                      metrics_text=open(a.metrics_file).read() if a.metrics_file else None)
    factory = None
    if not a.no_uvloop:
        try:
            import uvloop
            factory = uvloop.new_event_loop
        except ImportError:
            pass
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(serve(cfg, a.host, a.port))
    except KeyboardInterrupt:
        pass
    return 0


class TruthServer:
    """Run the truth server in a child process: `with TruthServer(itl_ms=5) as ts: ts.url`."""

    def __init__(self, **flags: Any):
        self.argv = [sys.executable, "-m", "pytest_glmf.testing.truth_server"]
        for key, value in flags.items():
            if value is True:    # a switch (cache_report=True)
                self.argv.append(f"--{key.replace('_', '-')}")
            else:
                self.argv += [f"--{key.replace('_', '-')}", str(value)]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> "TruthServer":
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"truth server did not start: {line!r}")
        self.url = line.split()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()

    def _get(self, path: str) -> Any:
        return httpx.get(self.url + path, timeout=30).json()

    def truth(self) -> list[dict[str, Any]]:
        return self._get("/truth")

    def reset(self) -> None:
        self._get("/truth/reset")


if __name__ == "__main__":
    raise SystemExit(main())
