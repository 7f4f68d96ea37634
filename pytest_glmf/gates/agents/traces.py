"""Real traffic: a trace of requests (arrival time, input and output tokens, and which requests
share prefixes), read from the Azure LLM inference trace CSV, the Mooncake trace JSONL or a
user's own JSONL, and replayed open loop against a server at its time scale (or faster).

    trace = load_trace("azure_llm_conv_2023_5min.csv")          # a path, or the packaged slice
    result = replay_trace("http://127.0.0.1:30000", trace.window(0, 60), speedup=2.0)
    print(result.table())

Formats (picked by the file's first line; ConfigError naming file:line on a bad row):
- Azure LLM inference 2023 CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`, a wall-clock time per row;
- Mooncake (FAST'25) JSONL: `{"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}`,
  one hash per 512-token block: requests with equal leading hashes share that prefix (checked
  against kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl: its first row,
  input_length 6758 with 14 hash_ids, is 512-token blocks; every row there starts with hash 0);
- our JSONL: `{"t_s", "input_tokens", "output_tokens"}` and optionally `"hash_ids"` (blocks of
  `block_tokens`, default 512) or `"session"` (requests of one session share their first
  `session_prefix_tokens`).
No trace carries text: each request's prompt is generated words (seeded by its block hashes, or
by its index), fitted to its input tokens at the served tokenizer's tokens per word, sent to
/v1/completions with `ignore_eos` and `max_tokens` = its output tokens (the Azure card: "we send
the input prompt with the required number of tokens, and force the model to generate the
corresponding number of output tokens"). Definitions of the numbers: `replay_summary`.
"""
from __future__ import annotations

import asyncio
import csv
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.engine.timeouts import BETWEEN_TOKENS_S, FIRST_TOKEN_S
from pytest_glmf.gates.agents.records import SummaryNumber
from pytest_glmf.gates.agents.sessions import tokens_per_word, words
from pytest_glmf.gates.agents.spec import REPLAY_DEFAULTS, ReplaySettings
from pytest_glmf.gates.bounds import lane_phrase
from pytest_glmf.load import (
    Progress,
    RequestRecord,
    ShardJob,
    StreamJob,
    Target,
    build_request,
    count_tokens,
    event_loop_factory,
    per_user_tok_s,
    percentile,
    send_lateness_s,
    stream_shard,
    ttft_s,
)
from pytest_glmf.text import fmt, render_table

PACKAGED = {"azure_llm_conv_2023_5min.csv"}
WINDOW_S = 2.0          # connections are opened per window of this many seconds (wall), just before it
CONNECT_AHEAD_S = 0.5


@dataclass(frozen=True)
class TraceRequest:
    t_s: float                               # arrival, seconds after the trace's first request
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()           # prefix blocks (Mooncake): equal leading ids, shared prefix
    session: str | None = None


@dataclass(frozen=True)
class Trace:
    requests: tuple[TraceRequest, ...]
    source: str
    block_tokens: int = REPLAY_DEFAULTS.block_tokens
    session_prefix_tokens: int = REPLAY_DEFAULTS.session_prefix_tokens

    @property
    def duration_s(self) -> float:
        return self.requests[-1].t_s if self.requests else 0.0

    def window(self, start_s: float, end_s: float) -> "Trace":
        """The requests arriving in [start_s, end_s), times from start_s."""
        picked = tuple(replace(r, t_s=r.t_s - start_s) for r in self.requests if start_s <= r.t_s < end_s)
        return replace(self, requests=picked, source=f"{self.source} [{start_s:g}, {end_s:g}) s")


# -- readers ------------------------------------------------------------------------------------

def _resolve(path: str | Path) -> Path:
    p = Path(path)
    if p.is_file() or str(path) not in PACKAGED:
        return p

    return Path(str(resources.files("pytest_glmf.data").joinpath("traces", str(path))))


def load_trace(path: str | Path, *, block_tokens: int = REPLAY_DEFAULTS.block_tokens,
               session_prefix_tokens: int = REPLAY_DEFAULTS.session_prefix_tokens) -> Trace:
    """A trace file (Azure CSV, Mooncake JSONL or our JSONL), or the packaged slice by name."""
    p = _resolve(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: trace file not found (packaged: {', '.join(sorted(PACKAGED))})") from None
    first = text.lstrip().split("\n", 1)[0]
    if first.startswith("TIMESTAMP,"):
        reqs = read_azure_csv(text, str(path))
    elif first.startswith("{"):
        reqs = read_jsonl(text, str(path))
    else:
        raise ConfigError(f"{path}:1: not a trace: expected the Azure CSV header "
                          "'TIMESTAMP,ContextTokens,GeneratedTokens' or JSON lines")
    if not reqs:
        raise ConfigError(f"{path}: the trace has no requests")
    t0 = min(r.t_s for r in reqs)
    ordered = sorted((replace(r, t_s=r.t_s - t0) for r in reqs), key=lambda r: r.t_s)
    return Trace(tuple(ordered), str(path), block_tokens, session_prefix_tokens)


def _count(value: Any, where: str, key: str, low: int = 0) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {key} must be an integer, got {value!r}") from None
    if n < low or (isinstance(value, float) and not value.is_integer()):
        raise ConfigError(f"{where}: {key} must be an integer >= {low}, got {value!r}")
    return n


def read_azure_csv(text: str, source: str) -> list[TraceRequest]:
    rows = csv.reader(text.splitlines())
    header = next(rows)
    if [h.strip() for h in header] != ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]:
        raise ConfigError(f"{source}:1: expected the header TIMESTAMP,ContextTokens,GeneratedTokens, got {header}")
    out = []
    for line, row in enumerate(rows, 2):
        if not row:
            continue
        where = f"{source}:{line}"
        if len(row) != 3:
            raise ConfigError(f"{where}: expected 3 fields (TIMESTAMP,ContextTokens,GeneratedTokens), got {len(row)}")
        stamp = row[0].strip()
        head, _, frac = stamp.partition(".")
        try:   # 7 fractional digits (100 ns) in the file; datetime takes 6
            t = datetime.strptime(head, "%Y-%m-%d %H:%M:%S").timestamp() + (float("0." + frac) if frac else 0.0)
        except ValueError:
            raise ConfigError(f"{where}: TIMESTAMP {stamp!r} is not 'YYYY-MM-DD HH:MM:SS.fffffff'") from None
        out.append(TraceRequest(t, _count(row[1], where, "ContextTokens", 1), _count(row[2], where, "GeneratedTokens", 1)))
    return out


def read_jsonl(text: str, source: str) -> list[TraceRequest]:
    """Mooncake's rows (timestamp in ms) or ours (t_s), one JSON object per line."""
    out = []
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{source}:{line}"
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: expected a JSON object")
        if "timestamp" in row:       # Mooncake
            keys = ("timestamp", "input_length", "output_length")
            t = float(_count(row.get("timestamp"), where, "timestamp")) / 1000.0
            n_in, n_out = row.get("input_length"), row.get("output_length")
        else:
            keys = ("t_s", "input_tokens", "output_tokens")
            try:
                t = float(row.get("t_s"))     # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: t_s must be a number of seconds, got {row.get('t_s')!r}") from None
            n_in, n_out = row.get("input_tokens"), row.get("output_tokens")
        missing = [k for k in keys if k not in row]
        if missing:
            raise ConfigError(f"{where}: missing {missing[0]!r}; a row needs {', '.join(keys)}")
        hashes = row.get("hash_ids") or []
        if not isinstance(hashes, list) or not all(isinstance(h, int) for h in hashes):
            raise ConfigError(f"{where}: hash_ids must be a list of integers")
        session = row.get("session")
        out.append(TraceRequest(t, _count(n_in, where, keys[1], 1), _count(n_out, where, keys[2], 1), tuple(hashes),
                                None if session is None else str(session)))
    return out


# -- prompts ------------------------------------------------------------------------------------

def prompt_for(trace: Trace, index: int, per_word: float) -> str:
    """~input_tokens of text: the request's blocks (each seeded by its hash: equal hashes, equal
    text), or its session's prefix and then its own words, or words seeded by its index."""
    r = trace.requests[index]

    def n_words(tokens: float) -> int:
        return max(1, round(tokens / per_word))

    parts: list[str] = []
    left = r.input_tokens
    if r.hash_ids:
        for h in r.hash_ids:
            take = min(trace.block_tokens, left)
            if take <= 0:
                break
            parts.append(words(random.Random(h * 7919 + 17), n_words(take)))
            left -= take
    elif r.session is not None and trace.session_prefix_tokens:
        take = min(trace.session_prefix_tokens, left)
        parts.append(words(random.Random(f"session:{r.session}"), n_words(take)))
        left -= take
    if left > 0 or not parts:
        parts.append(f"request {index}: " + words(random.Random(index + 1), n_words(max(left, 1))))
    return " ".join(parts)


# -- replay -------------------------------------------------------------------------------------

@dataclass
class ReplayResult:
    """One replay: `summary` holds the numbers (replay_summary; TTFT and tok/s in the trace's own
    units when a simulator ran at a time scale), `records` one per request. `flags` say why the
    numbers are not the server's (failed requests, the client sending late); `assert_replay`
    judges them (gates/agents/replay.py)."""

    summary: dict[str, Any]
    records: list[RequestRecord] = field(repr=False)
    trace: Trace | None = field(default=None, repr=False)
    flags: list[str] = field(default_factory=list)
    lane: str | None = None
    settings: ReplaySettings = REPLAY_DEFAULTS

    @property
    def valid(self) -> bool:
        return not self.flags

    # the summary's numbers (result.ttft_p95_s ...)
    requests = SummaryNumber()
    failed_requests = SummaryNumber()
    wall_s = SummaryNumber()
    send_lateness_p50_s = SummaryNumber()
    send_lateness_p99_s = SummaryNumber()
    send_lateness_max_s = SummaryNumber()
    ttft_p50_s = SummaryNumber()
    ttft_p95_s = SummaryNumber()
    per_user_tok_s = SummaryNumber()
    output_tokens_exact_pct = SummaryNumber()
    prompt_tokens_error_p50_pct = SummaryNumber()
    prompt_tokens_error_p95_pct = SummaryNumber()

    def table(self) -> str:
        s = self.summary
        rows = [[k, fmt(s.get(k))] for k in TABLE_KEYS]
        unit = f", simulator time scale {s['time_scale']:g}: recipe units" if s.get("time_scale", 1.0) != 1.0 else ""
        flags = f"\nflags: {'; '.join(self.flags)}" if self.flags else ""
        return (f"trace replay{lane_phrase(self.lane)}: {s.get('source')} at x{s.get('speedup'):g}{unit}\n"
                + render_table(rows, ["metric", "value"]) + flags)

    def to_record(self) -> dict[str, Any]:
        """What a result file keeps: the summary and the flags (no per-request records: a trace
        window holds hundreds)."""
        return {**self.summary, "valid": self.valid, "flags": "; ".join(self.flags) or "ok"}


TABLE_KEYS = ("requests", "failed_requests", "wall_s", "send_lateness_p50_s", "send_lateness_p99_s",
              "send_lateness_max_s", "ttft_p50_s", "ttft_p95_s", "per_user_tok_s", "output_tokens_exact_pct",
              "prompt_tokens_error_p50_pct", "prompt_tokens_error_p95_pct")


def replay_summary(trace: Trace, records: Sequence[RequestRecord], scale: float) -> dict[str, Any]:
    """send lateness = sent - due (due: the trace's arrival x time scale / speedup, from the common
    start); output tokens exact = usage.completion_tokens == the trace's output tokens; prompt
    tokens error = |usage.prompt_tokens - input tokens| / input tokens (the text is fitted at a
    measured tokens per word, so it is close, not exact). Times in the trace's own seconds
    (divided by `scale`)."""
    ok = [r for r in records if r.ok]
    late = send_lateness_s(records)
    by_user = {r.user: r for r in records}
    exact = [by_user[i].completion_tokens == trace.requests[i].output_tokens for i in by_user if by_user[i].ok]
    errs = [abs((by_user[i].prompt_tokens or 0) - trace.requests[i].input_tokens) / trace.requests[i].input_tokens * 100
            for i in by_user if by_user[i].ok and by_user[i].prompt_tokens is not None]
    speeds = [s for s in (per_user_tok_s(r) for r in ok) if s is not None]
    ttfts = [t for t in (ttft_s(r) for r in ok) if t is not None]
    return {"requests": len(records), "failed_requests": len(records) - len(ok),
            "error_examples": sorted({r.error for r in records if r.error})[:3],
            "send_lateness_p50_s": percentile(late, 50), "send_lateness_p99_s": percentile(late, 99),
            "send_lateness_max_s": max(late, default=None),
            "ttft_p50_s": _div(percentile(ttfts, 50), scale), "ttft_p95_s": _div(percentile(ttfts, 95), scale),
            "per_user_tok_s": None if not speeds else (percentile(speeds, 50) or 0.0) * scale,
            "output_tokens_exact_pct": 100.0 * sum(exact) / len(exact) if exact else None,
            "prompt_tokens_error_p50_pct": percentile(errs, 50), "prompt_tokens_error_p95_pct": percentile(errs, 95)}


def _div(x: float | None, scale: float) -> float | None:
    return None if x is None else x / scale


async def _replay(url: str, trace: Trace, scale: float, time_scale: float, model: str | None, path: str,
                  first_token_timeout_s: float, between_tokens_timeout_s: float,
                  progress: Progress | None) -> tuple[list[RequestRecord], float]:
    target = Target(url)
    model = model or await target.served_model() or "default"
    per_word = await asyncio.get_running_loop().run_in_executor(
        None, tokens_per_word, lambda text: count_tokens(url, text, model))
    bodies = [{"model": model, "prompt": prompt_for(trace, i, per_word), "max_tokens": r.output_tokens,
               "ignore_eos": True, "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}}
              for i, r in enumerate(trace.requests)]
    await target.flush()
    due = [r.t_s * scale for r in trace.requests]
    windows: dict[int, list[StreamJob]] = {}
    for i, body in enumerate(bodies):
        request = build_request(target.host, target.port, target.prefix + path, body, request_id=f"trace-{i}")
        windows.setdefault(int(due[i] // WINDOW_S), []).append(StreamJob(user=i, endpoint=0, request=request,
                                                                         due_s=due[i]))
    t0 = time.perf_counter() + CONNECT_AHEAD_S
    done: list[int] = []

    async def common_start() -> float:
        return t0

    async def window(k: int, streams: list[StreamJob]) -> list[RequestRecord]:
        await asyncio.sleep(max(0.0, t0 + k * WINDOW_S - CONNECT_AHEAD_S - time.perf_counter()))
        job = ShardJob(worker=0, workers=1, endpoints=[(target.host, target.port, target.https)], streams=streams,
                       first_token_timeout_s=first_token_timeout_s, between_tokens_timeout_s=between_tokens_timeout_s)
        records = (await stream_shard(job, common_start)).records
        if progress is not None:
            done.append(len(records))
            progress(window_line(k, records, scale, time_scale, sum(done), len(bodies)))
        return records

    shards = await asyncio.gather(*(window(k, s) for k, s in sorted(windows.items())))
    return sorted((r for s in shards for r in s), key=lambda r: r.user), per_word


def window_line(k: int, records: Sequence[RequestRecord], scale: float, time_scale: float, done: int,
                total: int) -> str:
    """A progress line: one connection window's requests, once all of them ended (TTFT in the
    trace's units, as the summary's)."""
    ttfts = [t / time_scale for t in (ttft_s(r) for r in records if r.ok) if t is not None]
    failed = sum(1 for r in records if not r.ok)
    p95 = percentile(ttfts, 95)
    return (f"replay: trace [{k * WINDOW_S / scale:g}, {(k + 1) * WINDOW_S / scale:g}) s: {len(records)} requests, "
            f"{failed} failed, TTFT p95 {'-' if p95 is None else f'{p95:.3f}'} s; {done}/{total} done")


def replay_trace(url: str, trace: Trace, *, time_scale: float = 1.0, speedup: float = REPLAY_DEFAULTS.speedup,
                 model: str | None = None, path: str = REPLAY_DEFAULTS.path, first_token_timeout_s: float = FIRST_TOKEN_S,
                 between_tokens_timeout_s: float = BETWEEN_TOKENS_S, progress: Progress | None = None) -> ReplayResult:
    """Send every request of `trace` at its arrival time x time_scale / speedup (open loop: a slow
    server does not slow the arrivals), after one prefix-cache flush, and summarize. `progress`
    gets one line per connection window of WINDOW_S wall seconds, once its requests ended."""
    if speedup <= 0 or time_scale <= 0:
        raise ConfigError(f"replay_trace(): time_scale and speedup must be > 0, got {time_scale!r}, {speedup!r}")
    scale = time_scale / speedup
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        records, per_word = runner.run(_replay(url, trace, scale, time_scale, model, path, first_token_timeout_s,
                                               between_tokens_timeout_s, progress))
    summary = replay_summary(trace, records, time_scale)
    summary.update(source=trace.source, speedup=speedup, time_scale=time_scale, tokens_per_word=per_word,
                   wall_s=trace.duration_s * scale)
    return ReplayResult(summary, records, trace)
