"""A lean streaming load probe for checking the simulator's calibration (tests and by hand).

    python -m pytest_glmf.sim.probe --url http://127.0.0.1:30000 --users 1,48,128 --max-tokens 300

N users each stream one chat completion at once (after an unmeasured warm pass per batch shape,
as the recipe's bench discards the autotune hit). Per-user tok/s = usage.completion_tokens /
(last chunk - first content chunk); TTFT = first chunk with content. The hot path stores
(time, bytes) per socket read and parses afterwards, so 128+ streams fit on two cores.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pytest_glmf.sim.tokenizer import encode

_USAGE = re.compile(rb'"completion_tokens": ?(\d+)')
_CONTENT = re.compile(rb'"(?:content|reasoning_content)": ?"(?!")')


@dataclass
class Record:
    t_send: float
    t_first: float | None = None
    t_last: float | None = None
    completion_tokens: int | None = None
    chunks: int = 0
    done: bool = False
    error: str | None = None

    @property
    def ttft_s(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_send

    @property
    def tok_s(self) -> float | None:
        if self.t_first is None or self.t_last is None or not self.completion_tokens or self.t_last <= self.t_first:
            return None
        return (self.completion_tokens - 1) / (self.t_last - self.t_first)


def briefing(tokens: int = 2400) -> str:
    """A prose prompt of about `tokens` tokens with the simulator's tokenizer."""

    words = ("the report describes how the team measured each system under load and what it found about "
             "memory capacity latency and the cost of serving many users at once ").split()
    out: list[str] = []
    i = 0
    while True:
        out.append(words[i % len(words)])
        i += 1
        if i % 64 == 0 and len(encode(" ".join(out))) >= tokens:
            return " ".join(out)


async def stream_one(host: str, port: int, path: str, body: dict[str, Any], start: asyncio.Event | None = None) -> Record:
    reader, writer = await asyncio.open_connection(host, port)
    payload = json.dumps(body).encode()
    req = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload
    if start is not None:
        await start.wait()
    rec = Record(t_send=time.perf_counter())
    writer.write(req)
    reads: list[tuple[float, bytes]] = []
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            reads.append((time.perf_counter(), data))
            if b"data: [DONE]" in data:
                rec.done = True
                break
    except (ConnectionError, OSError) as exc:
        rec.error = f"{type(exc).__name__}: {exc}"
    finally:
        writer.close()
    for t, data in reads:
        n = len(_CONTENT.findall(data))
        if n:
            rec.chunks += n
            if rec.t_first is None:
                rec.t_first = t
            rec.t_last = t
        m = _USAGE.search(data)
        if m:
            rec.completion_tokens = int(m.group(1))
    if not rec.done and rec.error is None:
        rec.error = "stream ended without [DONE]"
    return rec


async def run_users(base_url: str, users: int, max_tokens: int, prompt: str, path: str = "/v1/chat/completions",
                    extra: dict[str, Any] | None = None) -> list[Record]:
    u = urlsplit(base_url)
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}, **(extra or {})}
    start = asyncio.Event()
    tasks = [asyncio.create_task(stream_one(u.hostname or "127.0.0.1", u.port or 80, path, body, start))
             for _ in range(users)]
    await asyncio.sleep(0.05 + users * 0.001)   # connections open before the clock starts
    start.set()
    return list(await asyncio.gather(*tasks))


def summarize(records: list[Record]) -> dict[str, Any]:
    ok = [r for r in records if r.error is None]
    tok_s = [r.tok_s for r in ok if r.tok_s is not None]
    ttft = sorted(r.ttft_s for r in ok if r.ttft_s is not None)

    def pct(q: float) -> float | None:
        return ttft[min(len(ttft) - 1, int(q * len(ttft)))] if ttft else None

    return {"users": len(records), "ok": len(ok), "errors": sorted({r.error for r in records if r.error}),
            "per_user_tok_s": statistics.mean(tok_s) if tok_s else None,
            "ttft_p50_s": pct(0.5), "ttft_p95_s": pct(0.95),
            "completion_tokens": sum(r.completion_tokens or 0 for r in ok),
            "chunks_per_request": statistics.mean(r.chunks for r in ok) if ok else None}


def measure(base_url: str, users: int, max_tokens: int, prompt: str, warm: bool = True) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        if warm:
            await run_users(base_url, users, 4, prompt)
        return summarize(await run_users(base_url, users, max_tokens, prompt))

    return asyncio.run(go())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_glmf.sim.probe")
    ap.add_argument("--url", required=True)
    ap.add_argument("--users", default="1,48,128")
    ap.add_argument("--max-tokens", type=int, default=300)
    ap.add_argument("--prompt-tokens", type=int, default=2400)
    ns = ap.parse_args(argv)
    prompt = briefing(ns.prompt_tokens)
    for n in (int(x) for x in ns.users.split(",")):
        print(json.dumps(measure(ns.url, n, ns.max_tokens, prompt)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
