"""One typed record per turn of an agent's session, and the agents' metrics as pure functions.

Definitions (the report and the gates use exactly these; a turn's timing is the curve's, records.py):
- turn TTFT = first chunk with content, reasoning or a tool call - the moment the turn's request
  was written to the socket (the server's queueing and its prefill of the uncached part included);
- per-user tok/s of a turn = (completion_tokens - 1) / (last token - first token);
- cached tokens of a turn = what the server reports: usage.prompt_tokens_details.cached_tokens
  (vLLM with --enable-prompt-tokens-details, SGLang with --enable-cache-report); None when the
  server does not say. A turn's cache hit = cached / prompt tokens; a set of turns' hit rate =
  sum of cached / sum of prompt tokens over the turns that report it;
- think-time lateness = when a turn was sent - when it was due (the previous answer's last token +
  the think time): the client's own error, reported so a late client is seen;
- session time = the last answer's last token - the first turn's send; a session completes when
  every turn was answered (a failed turn ends its session: the conversation cannot go on).
Nothing here prints, sleeps or reads a clock.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, overload

from pytest_glmf.load import RequestRecord, per_user_tok_s, percentile, ttft_s


class SummaryNumber:
    """A result's number from its `summary` dict as a declared, typed attribute
    (`result.ttft_p95_s`); None when the summary does not have it (e.g. no turn completed)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, result: None, owner: type) -> SummaryNumber: ...

    @overload
    def __get__(self, result: object, owner: type | None = None) -> float | None: ...

    def __get__(self, result: Any, owner: type | None = None) -> SummaryNumber | float | None:
        if result is None:
            return self
        value: float | None = result.summary.get(self.name)
        return value


@dataclass
class TurnRecord:
    session: int
    turn: int
    kind: str                           # "user" | "tool"
    request: RequestRecord
    t_due_s: float                      # when it was due (perf_counter)
    cached_tokens: int | None = None    # the server's report, None: not reported
    tool_call: bool = False             # the answer carried a tool call

    @property
    def ok(self) -> bool:
        return self.request.ok

    @property
    def prompt_tokens(self) -> int | None:
        return self.request.prompt_tokens

    @property
    def ttft_s(self) -> float | None:
        return ttft_s(self.request)

    @property
    def cache_hit(self) -> float | None:
        p = self.prompt_tokens
        return None if self.cached_tokens is None or not p else self.cached_tokens / p

    @property
    def lateness_s(self) -> float:
        return self.request.t_send_s - self.t_due_s

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["request"] = self.request.to_dict()
        out.update(ttft_s=self.ttft_s, cache_hit=self.cache_hit, per_user_tok_s=per_user_tok_s(self.request))
        return out


def hit_rate(turns: Sequence[TurnRecord]) -> float | None:
    """Sum of cached / sum of prompt tokens over the turns whose server reported both."""
    rep = [t for t in turns if t.ok and t.cached_tokens is not None and t.prompt_tokens]
    total = sum(t.prompt_tokens or 0 for t in rep)
    return sum(t.cached_tokens or 0 for t in rep) / total if total else None


def turn_metrics(turns: Sequence[TurnRecord]) -> dict[str, Any]:
    """The numbers of a set of turns (one turn index, or all of them)."""
    ok = [t for t in turns if t.ok]
    speeds = [s for s in (per_user_tok_s(t.request) for t in ok) if s is not None]
    ttfts = [t.ttft_s for t in ok if t.ttft_s is not None]
    return {
        "turns": len(turns),
        "errors": len(turns) - len(ok),
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p95_s": percentile(ttfts, 95),
        "per_user_tok_s": percentile(speeds, 50),
        "per_user_tok_s_p5": percentile(speeds, 5),
        "prompt_tokens_p50": percentile([t.prompt_tokens for t in ok if t.prompt_tokens is not None], 50),
        "cached_tokens_p50": percentile([t.cached_tokens for t in ok if t.cached_tokens is not None], 50),
        "cache_hit_pct": _pct(hit_rate(turns)),
        "cache_reported": sum(1 for t in ok if t.cached_tokens is not None),
        "tool_calls": sum(1 for t in ok if t.tool_call),
    }


def _pct(x: float | None) -> float | None:
    return None if x is None else x * 100.0


def session_metrics(turns: Sequence[TurnRecord], planned: Sequence[int]) -> dict[str, Any]:
    """Per session: turns answered, completed, session time. `planned[i]`: session i's turns."""
    per = []
    for i, n in enumerate(planned):
        mine = sorted((t for t in turns if t.session == i), key=lambda t: t.turn)
        answered = [t for t in mine if t.ok]
        last = max((t.request.t_last_token_s for t in answered if t.request.t_last_token_s is not None), default=None)
        span = last - mine[0].request.t_send_s if mine and last is not None else None
        per.append({"session": i, "turns_planned": n, "turns_completed": len(answered),
                    "completed": len(answered) == n, "session_time_s": span})
    times = [p["session_time_s"] for p in per if p["session_time_s"] is not None and p["completed"]]
    return {"sessions": len(per), "sessions_completed": sum(1 for p in per if p["completed"]),
            "turns_completed": sum(p["turns_completed"] for p in per),
            "session_time_p50_s": percentile(times, 50), "session_time_max_s": max(times, default=None),
            "per_session": per}


def lateness_metrics(turns: Sequence[TurnRecord]) -> dict[str, Any]:
    late = [t.lateness_s for t in turns if not math.isnan(t.request.t_send_s)]
    return {"send_lateness_p50_s": percentile(late, 50), "send_lateness_p99_s": percentile(late, 99),
            "send_lateness_max_s": max(late, default=None)}


def summarize(turns: Sequence[TurnRecord], planned: Sequence[int]) -> dict[str, Any]:
    """All the numbers of one measurement: overall, per turn index, per session, and the client's
    lateness. `returning_*`: turns after a session's first (those a prefix cache can serve)."""
    by_turn = {}
    for k in sorted({t.turn for t in turns}):
        by_turn[k] = turn_metrics([t for t in turns if t.turn == k])
    returning = [t for t in turns if t.turn > 0]
    overall = turn_metrics(turns)
    back = turn_metrics(returning)
    return {**overall, "returning_ttft_p95_s": back["ttft_p95_s"], "returning_cache_hit_pct": back["cache_hit_pct"],
            "per_turn": [{"turn": k, **m} for k, m in by_turn.items()],
            **session_metrics(turns, planned), **lateness_metrics(turns)}
