"""One typed record per streamed request, and the curve's metrics as pure functions over records.

Definitions (the report and the gates use exactly these):
- TTFT = first chunk carrying content, reasoning or a tool call - the moment the request was
  written to the socket. The role-only chunk does not count; queueing on the server is included
  (a seat-starved server shows it). Connection setup is not included: connections are opened
  before the run starts.
- per-user tok/s, per request = (completion_tokens - 1) / (t_last_token - t_first_token); a row
  reports the median over users and the p5 (the slowest users).
- aggregate tok/s = all completion tokens / (last token anywhere - first send).
- ITL = gaps between successive content chunks (one chunk may carry several tokens under
  speculative decoding; `itl_per_token_*` divides each gap by the chunk's token count when the
  server reports per-chunk usage).
- completion tokens come from `usage` (include_usage); chunk-derived counts and the server's
  /metrics counter delta are cross-checks, a mismatch over 0.5 % marks the run.
Nothing here prints, sleeps or reads a clock.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_glmf.engine.client import DONE, SSEError, parse_sse_line
from pytest_glmf.redact import Redactor

COUNT_MISMATCH_MAX_FRAC = 0.005


@dataclass
class RequestRecord:
    user: int
    t_send_s: float
    status: int | None = None
    t_first_chunk_s: float | None = None      # any chunk with choices (may be role-only)
    t_first_token_s: float | None = None      # first content/reasoning/tool-call chunk
    t_last_token_s: float | None = None
    chunk_times_s: list[float] = field(default_factory=list)     # content-bearing chunks only
    chunk_tokens: list[int] | None = None     # per content chunk, when usage rides on every chunk
    chunk_prev_read_s: list[float] | None = None   # per content chunk: the previous read's time (http.decode_reads)
    chunk_newest: list[bool] | None = None    # per content chunk: the newest event of its read (its time exact)
    chunk_read_user_s: list[float] | None = None  # per content chunk: when its read was made (user space)
    completion_tokens: int | None = None      # usage.completion_tokens
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    error: str | None = None
    endpoint: int = 0                         # which of the row's server URLs served it (round-robin)
    worker: int = 0                           # which client worker process sent and read it
    t_due_s: float | None = None              # open loop: when the arrival process said to send it

    @property
    def ok(self) -> bool:
        return self.error is None and self.t_first_token_s is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _has_content(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    if delta is None:  # /v1/completions
        return bool(choice.get("text"))
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                or delta.get("tool_calls"))


def record_from_lines(user: int, t_send_s: float, status: int | None, lines: Iterable[tuple[Any, ...]],
                      error: str | None = None) -> RequestRecord:
    """Build the record of one request from its timed SSE lines: (receive time, line), or with
    what bounds each time (http.decode_reads with reads_info): (time, line, previous read's time,
    newest of its read, when the read was made)."""
    rec = RequestRecord(user=user, t_send_s=t_send_s, status=status, error=error)
    if status is not None and status != 200 and rec.error is None:
        rec.error = f"HTTP {status}"
    seen_done = False
    cumulative: list[int] = []
    prevs: list[float] = []
    newest: list[bool] = []
    made: list[float] = []
    for item in lines:
        t, line = item[0], item[1]
        try:
            event = parse_sse_line(line)
        except SSEError as exc:
            rec.error = rec.error or str(exc)
            continue
        if event is None:
            continue
        if event is DONE:
            seen_done = True
            break
        if "error" in event and not event.get("choices"):
            rec.error = rec.error or f"server error: {str(event['error'])[:200]}"
            continue
        rec.response_id = rec.response_id or event.get("id")
        usage = event.get("usage")
        choices = event.get("choices") or []
        if choices and rec.t_first_chunk_s is None:
            rec.t_first_chunk_s = t
        content = any(_has_content(c) for c in choices)
        if content:
            if rec.t_first_token_s is None:
                rec.t_first_token_s = t
            rec.t_last_token_s = t
            rec.chunk_times_s.append(t)
            if len(item) == 5:
                prevs.append(item[2])
                newest.append(item[3])
                made.append(item[4])
            if usage and usage.get("completion_tokens") is not None:
                cumulative.append(int(usage["completion_tokens"]))
        for c in choices:
            rec.finish_reason = c.get("finish_reason") or rec.finish_reason
        if usage and usage.get("completion_tokens") is not None:
            rec.completion_tokens = int(usage["completion_tokens"])
            rec.prompt_tokens = usage.get("prompt_tokens", rec.prompt_tokens)
    if prevs and len(prevs) == len(rec.chunk_times_s):
        # the request went out at t_send: no answer byte arrived before it
        rec.chunk_prev_read_s = [max(p, t_send_s) for p in prevs]
        rec.chunk_newest = newest
        rec.chunk_read_user_s = made
    if cumulative and len(cumulative) == len(rec.chunk_times_s):
        rec.chunk_tokens = [b - a for a, b in zip([0] + cumulative[:-1], cumulative)]
    if rec.error is None and status == 200 and not seen_done:
        rec.error = "stream ended without [DONE]"
    if rec.error is None and rec.t_first_token_s is None:
        rec.error = "no content chunk"
    # the error says the body's excerpt (http.decode_reads): a server may echo a key or a token,
    # masked like everything the plugin writes (redact.py)
    rec.error = Redactor.from_environment().text(rec.error) if rec.error else rec.error
    return rec


def merge_records(shards: Iterable[Sequence[RequestRecord]]) -> list[RequestRecord]:
    """The records of several workers as one run's: every record once, in user order. Every
    statistic of a run is a function of its records alone (run_metrics, token_count_check), so
    the merged row is exactly the row of the concatenated records; all times are on the one
    monotonic clock the workers share."""
    merged = sorted((r for shard in shards for r in shard), key=lambda r: r.user)
    users = [r.user for r in merged]
    if len(set(users)) != len(users):
        raise ValueError("two workers returned a record for the same user")
    return merged


def send_lateness_s(records: Sequence[RequestRecord]) -> list[float]:
    """Open loop: how long after its scheduled arrival each request was really sent (negative: early,
    by less than the event loop timers' 1 ms resolution)."""
    return [r.t_send_s - r.t_due_s for r in records if r.t_due_s is not None and not math.isnan(r.t_send_s)]


# -- per-request metrics -------------------------------------------------------------------------

def merged_events(rec: RequestRecord) -> int:
    """Content chunks that arrived in the same socket read as the next one (equal receive times):
    their timestamp is the later chunk's, so late by up to the gap between them."""
    t = rec.chunk_times_s
    return sum(1 for a, b in zip(t, t[1:]) if a == b)


def ttft_s(rec: RequestRecord) -> float | None:
    return None if rec.t_first_token_s is None else rec.t_first_token_s - rec.t_send_s


def ttft_first_chunk_s(rec: RequestRecord) -> float | None:
    """vLLM bench's rule (first chunk with choices, often role-only), kept for comparison only."""
    return None if rec.t_first_chunk_s is None else rec.t_first_chunk_s - rec.t_send_s


def per_user_tok_s(rec: RequestRecord) -> float | None:
    if rec.completion_tokens is None or rec.t_first_token_s is None or rec.t_last_token_s is None:
        return None
    span = rec.t_last_token_s - rec.t_first_token_s
    return (rec.completion_tokens - 1) / span if span > 0 and rec.completion_tokens > 1 else None


def itls_s(rec: RequestRecord) -> list[float]:
    t = rec.chunk_times_s
    return [b - a for a, b in zip(t, t[1:])]


def chunk_token_count(rec: RequestRecord) -> int:
    """Tokens as the chunks show them: exact when usage rides on every chunk, else the number of
    content chunks (a lower bound: one chunk can carry several tokens)."""
    return sum(rec.chunk_tokens) if rec.chunk_tokens is not None else len(rec.chunk_times_s)


# -- statistics ------------------------------------------------------------------------------------

def percentile(values: Sequence[float | None], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no data."""
    xs = sorted(v for v in values if v is not None and not math.isnan(v))
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50)


def spread_pct(values: Sequence[float | None]) -> float | None:
    """(max - min) / median of repeated runs, in percent."""
    xs = [v for v in values if v is not None]
    m = median(xs)
    if not xs or not m:
        return None
    return (max(xs) - min(xs)) / m * 100.0


# -- one run -----------------------------------------------------------------------------------------

def token_count_check(records: Sequence[RequestRecord], metrics_delta: int | None) -> dict[str, Any]:
    """Usage totals against chunk-derived counts and the server's /metrics counter delta.

    Chunk counts are exact only when usage rides on every chunk; otherwise usage below the number
    of content chunks is impossible (a chunk carries at least one token) and marks the run, while
    usage above it is expected under speculative decoding (reported as tokens per chunk)."""
    ok_recs = [r for r in records if r.ok]
    usage_total = sum(r.completion_tokens or 0 for r in ok_recs)
    missing_usage = sum(1 for r in ok_recs if r.completion_tokens is None)
    chunk_total = sum(chunk_token_count(r) for r in ok_recs)
    exact = all(r.chunk_tokens is not None for r in ok_recs) and bool(ok_recs)
    problems: list[str] = []
    if missing_usage:
        problems.append(f"{missing_usage} request(s) without usage (include_usage not honoured)")
    if exact and _frac(usage_total, chunk_total) > COUNT_MISMATCH_MAX_FRAC:
        problems.append(f"usage {usage_total} vs per-chunk usage {chunk_total}")
    bad = [r for r in ok_recs if r.completion_tokens is not None and r.completion_tokens < chunk_token_count(r)]
    if not exact and bad:
        problems.append(f"{len(bad)} request(s) report fewer tokens in usage than content chunks")
    all_total = sum(r.completion_tokens or 0 for r in records)
    if metrics_delta is not None and _frac(all_total, metrics_delta) > COUNT_MISMATCH_MAX_FRAC:
        problems.append(f"usage {all_total} vs server /metrics generation_tokens delta {metrics_delta}"
                        + (" (another client on the server?)" if metrics_delta > all_total else ""))
    return {"usage_tokens": usage_total, "chunk_tokens": chunk_total, "chunk_counts_exact": exact,
            "tokens_per_chunk": usage_total / chunk_total if chunk_total else None,
            "metrics_delta": metrics_delta, "problems": problems, "ok": not problems}


def _frac(a: int, b: int) -> float:
    return abs(a - b) / max(abs(b), 1)


def run_metrics(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The numbers of one run. Failed requests count as errors and are left out of the speeds."""
    ok = [r for r in records if r.ok]
    ttfts = [ttft_s(r) for r in ok]
    all_speeds = [per_user_tok_s(r) for r in ok]
    speeds = [s for s in all_speeds if s is not None]
    itls = [g for r in ok for g in itls_s(r)]
    itl_tok = [g / n for r in ok if r.chunk_tokens for g, n in zip(itls_s(r), r.chunk_tokens[1:]) if n]
    tokens = sum(r.completion_tokens or 0 for r in ok)
    first_send = min((r.t_send_s for r in records), default=None)
    last_token = max((r.t_last_token_s for r in ok if r.t_last_token_s is not None), default=None)
    window = (last_token - first_send) if first_send is not None and last_token is not None else None
    return {
        "requests": len(records),
        "errors": len(records) - len(ok),
        "error_examples": sorted({r.error for r in records if r.error})[:3],
        "completion_tokens": tokens,
        "prompt_tokens_p50": median([r.prompt_tokens for r in ok if r.prompt_tokens is not None]),
        "aggregate_tok_s": tokens / window if window and window > 0 else None,
        "per_user_tok_s": median(speeds),
        "per_user_tok_s_p5": percentile(speeds, 5),
        # a stream whose tokens all arrived in one read has no measurable speed (span 0)
        "speed_unmeasured": len(all_speeds) - len(speeds),
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p95_s": percentile(ttfts, 95),
        "ttft_p99_s": percentile(ttfts, 99),
        "ttft_first_chunk_p50_s": percentile([ttft_first_chunk_s(r) for r in ok], 50),
        "itl_p50_s": percentile(itls, 50),
        "itl_p95_s": percentile(itls, 95),
        "itl_p99_s": percentile(itls, 99),
        "itl_per_token_p50_s": percentile(itl_tok, 50),
        "window_s": window,
    }


# -- how far the client's timestamps can be off ----------------------------------------------------------

# the row's numbers a late timestamp can move; the self-check bounds each, and judges each by its own
# bound (selfcheck.client_check)
ERROR_METRICS = ("per_user_tok_s", "per_user_tok_s_p5", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "itl_p50_s",
                 "itl_p95_s", "itl_p99_s")


def early_times(rec: RequestRecord, late_max_s: float | None = None, kernel: bool = True) -> list[float]:
    """Per content chunk, the earliest moment its event can have reached the client; its stamped
    time is the latest (a receive time is never early). Every event of a read arrived after the
    previous read, and no more than `late_max_s` (how late the loop can have been to read: its
    longest measured lag plus the probe interval; None: unknown) before the read was made.
    Kernel receive times (`kernel`) carry the arrival of a read's newest bytes, so the newest
    event of a read is exact. A record without read information (built from plain (time, line)
    pairs) is taken as exact."""
    t = rec.chunk_times_s
    if rec.chunk_prev_read_s is None or rec.chunk_newest is None:
        return list(t)
    made = rec.chunk_read_user_s or t
    out = []
    for ti, prev, new, u in zip(t, rec.chunk_prev_read_s, rec.chunk_newest, made):
        if kernel and new:
            out.append(ti)
        else:
            out.append(min(ti, prev if late_max_s is None else max(prev, u - late_max_s)))
    return out


def error_bounds(records: Sequence[RequestRecord], late_max_s: float | None | Mapping[int, float | None] = None,
                 kernel: bool | Mapping[int, bool] = True) -> dict[str, Any]:
    """How far this run's numbers can be from the times the events really arrived: for each of
    ERROR_METRICS the interval [lo, hi] that holds the true value, and `bound` = the larger
    distance from the stamped value to either end (`bound_pct` of the value). Every request's
    TTFT, speed and gaps are bounded from its chunks' earliest and stamped times (early_times);
    a percentile or median is monotone in each of its values, so the percentile of the lower
    ends and of the upper ends bound the true one. `late_max_s`: one value, or one per worker
    (user-space stamps), None for kernel stamps. Also counts `shared_events`: content events
    that were not the newest of their read (the only ones whose kernel time can be late)."""
    ok = [r for r in records if r.ok]
    sides: dict[str, tuple[list[float], list[float], list[float]]] = {
        k: ([], [], []) for k in ("speed", "ttft", "itl")}   # (stamped, lo, hi)
    shared = 0
    for r in ok:
        late = late_max_s.get(r.worker) if isinstance(late_max_s, Mapping) else late_max_s
        by_kernel = kernel.get(r.worker, True) if isinstance(kernel, Mapping) else kernel
        t, e = r.chunk_times_s, early_times(r, late, by_kernel)
        shared += sum(1 for a, b in zip(t, e) if b < a)
        if not t:
            continue
        sides["ttft"][0].append(t[0] - r.t_send_s)
        sides["ttft"][1].append(e[0] - r.t_send_s)
        sides["ttft"][2].append(t[0] - r.t_send_s)
        speed = per_user_tok_s(r)
        if speed is not None:
            n = (r.completion_tokens or 0) - 1
            short = e[-1] - t[0]                       # the span at its shortest and longest
            sides["speed"][0].append(speed)
            sides["speed"][1].append(n / (t[-1] - e[0]))
            sides["speed"][2].append(n / short if short > 0 else math.inf)
        for j in range(1, len(t)):
            sides["itl"][0].append(t[j] - t[j - 1])
            sides["itl"][1].append(max(0.0, e[j] - t[j - 1]))
            sides["itl"][2].append(t[j] - e[j - 1])
    out: dict[str, Any] = {"shared_events": shared, "token_events": sum(len(r.chunk_times_s) for r in ok)}
    for name, side, q in (("per_user_tok_s", "speed", 50), ("per_user_tok_s_p5", "speed", 5),
                          ("ttft_p50_s", "ttft", 50), ("ttft_p95_s", "ttft", 95), ("ttft_p99_s", "ttft", 99),
                          ("itl_p50_s", "itl", 50), ("itl_p95_s", "itl", 95), ("itl_p99_s", "itl", 99)):
        stamped, lo, hi = sides[side]
        out[name] = interval(percentile(stamped, q), percentile(lo, q), percentile(hi, q))
    return out


def interval(value: float | None, lo: float | None, hi: float | None) -> dict[str, float | None]:
    """{value, lo, hi, bound, bound_pct}: bound = how far the true value can be from `value`;
    bound_pct = bound in % of the value, defined only where the value is > 0 (or the bound is 0):
    a zero estimate (several tokens per read make ITL p50 zero) with a bound has no relative
    error, only the absolute one (None, not an infinite %)."""
    if value is None or lo is None or hi is None:
        return {"value": value, "lo": lo, "hi": hi, "bound": None, "bound_pct": None}
    hi = math.inf if math.isnan(hi) else hi
    bound = max(hi - value, value - lo, 0.0)
    pct = bound / value * 100.0 if value > 0 else (0.0 if bound == 0 else None)
    return {"value": value, "lo": lo, "hi": hi, "bound": bound, "bound_pct": pct}


def combine_error_bounds(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A row's bounds from its runs' (each run's `error`): the row's number is the median over
    runs, and a median is monotone in each run's value, so the medians of the runs' lower and
    upper ends bound it."""
    out: dict[str, Any] = {}
    for name in ERROR_METRICS:
        each = [r[name] for r in runs if r and r.get(name) and r[name]["bound"] is not None]
        if each:
            out[name] = interval(median([x["value"] for x in each]), median([x["lo"] for x in each]),
                                 median([x["hi"] for x in each]))
    return out


# -- repeated runs and the curve ----------------------------------------------------------------------

ROW_MEDIAN_KEYS = ("aggregate_tok_s", "per_user_tok_s", "per_user_tok_s_p5", "ttft_p50_s", "ttft_p95_s",
                   "ttft_p99_s", "itl_p50_s", "itl_p95_s", "itl_p99_s", "prompt_tokens_p50")


def combine_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Median over runs per metric; spread_pct = the larger of the aggregate and per-user spreads
    ((max - min) / median of the runs, in percent)."""
    out: dict[str, Any] = {k: median([r[k] for r in runs if r.get(k) is not None]) for k in ROW_MEDIAN_KEYS}
    spreads = {k: spread_pct([r.get(k) for r in runs]) for k in ("aggregate_tok_s", "per_user_tok_s",
                                                                 "ttft_p50_s")}
    out["spread_by_metric_pct"] = spreads
    speed_spreads = [v for k, v in spreads.items() if k != "ttft_p50_s" and v is not None]
    out["spread_pct"] = max(speed_spreads) if speed_spreads else None
    return out


def knee(rows: Sequence[dict[str, Any]], min_gain_pct: float = 5.0) -> dict[str, Any]:
    """Was aggregate tok/s still climbing at the last row? Climbing = the last row's aggregate beats
    the previous row's by more than `min_gain_pct` and by more than both rows' spreads."""
    pts = [(r["users"], float(r["aggregate_tok_s"]), r.get("spread_pct") or 0.0) for r in rows
           if r.get("aggregate_tok_s")]
    pts.sort()
    if len(pts) < 2:
        return {"still_climbing": None, "last_gain_pct": None, "peak_users": pts[0][0] if pts else None}
    (u0, a0, s0), (u1, a1, s1) = pts[-2], pts[-1]
    gain = (a1 / a0 - 1.0) * 100.0
    peak = max(pts, key=lambda p: p[1])[0]
    return {"still_climbing": gain > max(min_gain_pct, s0, s1), "last_gain_pct": gain, "peak_users": peak,
            "between_users": [u0, u1]}
