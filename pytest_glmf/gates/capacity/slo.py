"""One probe against the service level: a measured curve row (load/run.py: run_row) in, a
`Probe` (the numbers the service level speaks of, and what it missed) out. Pure functions.

Per measured run: the share of requests whose decode speed reaches `per_user_tok_s` (a failed or
unmeasurable request does not), the speed the slowest allowed share still reaches (the
(100 - users_pct)th percentile of the speeds), and the `ttft_pct` percentile of TTFT. A probe's
numbers are the medians over its runs (the curve's rule); it passes when those meet the service
level, no request failed and the client's self-check and token counts held (else the numbers are
not the server's). On a simulator at time scale s the numbers are converted to the units of the
GPU it models (tok/s x s, seconds / s) before they are judged.

A probe the client could not measure (its self-check marked the row client-bound, or the token
counts disagree) is `unmeasured`: not passed, and not a miss either (the search stops undecided).

A probe's `margin` says how far from the service level it is, for the model-guided search
(search.py) and the interval (interval.py): per bound, the load `allowed speed / measured speed`
(per_user_tok_s over the p(100 - users_pct) speed) or `measured TTFT / allowed TTFT`, and margin =
1 - the larger load (> 0 inside, 0 on the boundary, < 0 beyond). On a server whose time per token
grows linearly with users the load is linear in users. None when the numbers are not the
server's (failed requests, a client-bound run, token counts that disagree).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_glmf.gates.capacity.spec import SLO
from pytest_glmf.load import RequestRecord, describe_flags, median, per_user_tok_s, percentile, spread_pct, ttft_s


@dataclass
class Miss:
    """One bound a probe missed, in words and numbers."""

    what: str           # e.g. "per-user tok/s", "TTFT p95", "failed requests"
    measured: str
    expected: str

    def text(self) -> str:
        return f"{self.what}: {self.measured}, needs {self.expected}"


@dataclass
class Probe:
    """One users value (or request rate) measured against the service level."""

    x: float                              # users, or requests per second
    passed: bool
    misses: list[Miss] = field(default_factory=list)
    users_meeting_pct: float | None = None      # share of requests at or above per_user_tok_s
    per_user_tok_s_at_pct: float | None = None  # the speed the (100 - users_pct) % slowest reach
    per_user_tok_s: float | None = None         # median over users
    ttft_s: float | None = None                 # the ttft_pct percentile
    ttft_p50_s: float | None = None
    aggregate_tok_s: float | None = None
    spread_pct: float | None = None
    runs: int = 0
    requests: int = 0
    errors: int = 0
    prompt_tokens: float | None = None
    max_running: int | None = None              # /metrics, when sampled
    max_queued: int | None = None
    flags: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    replaced_runs: int = 0                      # runs measured again: the client, not the server, set their pace
    margin: float | None = None                 # 1 - load (module docstring); None: not the server's numbers
    unmeasured: str = ""                        # why these numbers are not the server's (the client could not
    #                                             keep up, token counts disagree): no verdict either way
    workers: int | None = None                  # client worker processes that read the streams
    # per measured run, per request: (speed, TTFT) in the modelled GPU's units, for the bootstrap
    samples: list[list["Sample"]] = field(default_factory=list, repr=False)

    @property
    def users(self) -> int:
        return int(self.x)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("samples")      # thousands of numbers per probe: the result file keeps the summaries
        return out


Sample = tuple[float | None, float | None]      # one request: per-user tok/s and TTFT s (None: not measured)


def _records(run: Mapping[str, Any]) -> list[RequestRecord]:
    return [r if isinstance(r, RequestRecord) else RequestRecord(**r) for r in run.get("records", [])]


def samples(records: Sequence[RequestRecord], time_scale: float = 1.0) -> list[Sample]:
    """Each request's speed and TTFT, in the modelled GPU's units (None for a failed request)."""
    out: list[Sample] = []
    for r in records:
        speed = per_user_tok_s(r) if r.ok else None
        ttft = ttft_s(r) if r.ok else None
        out.append((None if speed is None else speed * time_scale, None if ttft is None else ttft / time_scale))
    return out


def sample_numbers(requests: Sequence[Sample], slo: SLO) -> dict[str, float | None]:
    """The service level's numbers of one run's requests (the bootstrap calls this on resamples)."""
    speeds = [s for s, _ in requests]
    measured = [s for s in speeds if s is not None]
    ttfts = [t for _, t in requests if t is not None]
    meeting = None
    if slo.per_user_tok_s is not None and requests:
        meeting = 100.0 * sum(1 for s in speeds if s is not None and s >= slo.per_user_tok_s) / len(requests)
    return {"users_meeting_pct": meeting,
            "per_user_tok_s_at_pct": percentile(measured, 100.0 - slo.users_pct),
            "per_user_tok_s": median(measured),
            "ttft_s": percentile(ttfts, slo.ttft_pct),
            "ttft_p50_s": percentile(ttfts, 50)}


def margin(per_run: Sequence[Mapping[str, float | None]], slo: SLO) -> float | None:
    """1 - the larger load over the runs' medians (module docstring); None without numbers."""
    loads = []
    if slo.per_user_tok_s is not None:
        speed = median([n["per_user_tok_s_at_pct"] for n in per_run if n["per_user_tok_s_at_pct"] is not None])
        if speed is None:
            return None
        loads.append(slo.per_user_tok_s / speed if speed > 0 else math.inf)
    if slo.ttft_s is not None:
        ttft = median([n["ttft_s"] for n in per_run if n["ttft_s"] is not None])
        if ttft is None:
            return None
        loads.append(ttft / slo.ttft_s)
    return 1.0 - max(loads) if loads else None


def judge(x: float, row: Mapping[str, Any], slo: SLO, time_scale: float = 1.0, wall_s: float = 0.0) -> Probe:
    """The probe of one measured curve row (with its per-run records)."""
    runs = row.get("per_run") or []
    per_samples = [samples(_records(r), time_scale) for r in runs]
    per_run = [sample_numbers(s, slo) for s in per_samples]

    def med(key: str) -> float | None:
        return median([v for n in per_run if (v := n[key]) is not None])

    server = [r.get("server") or {} for r in runs]
    probe = Probe(
        x=x, passed=False, users_meeting_pct=med("users_meeting_pct"), per_user_tok_s_at_pct=med("per_user_tok_s_at_pct"),
        per_user_tok_s=med("per_user_tok_s"), ttft_s=med("ttft_s"), ttft_p50_s=med("ttft_p50_s"),
        aggregate_tok_s=None if row.get("aggregate_tok_s") is None else row["aggregate_tok_s"] * time_scale,
        spread_pct=spread_pct([n["per_user_tok_s_at_pct"] for n in per_run] if slo.per_user_tok_s is not None
                              else [n["ttft_s"] for n in per_run]),
        runs=len(runs), requests=sum(int(r.get("requests") or 0) for r in runs),
        errors=sum(int(r.get("errors") or 0) for r in runs), prompt_tokens=row.get("prompt_tokens_p50"),
        max_running=max((s["max_running"] for s in server if s.get("max_running") is not None), default=None),
        max_queued=max((s["max_queued"] for s in server if s.get("max_queued") is not None), default=None),
        flags=describe_flags(row), wall_s=wall_s)
    probe.misses = misses(probe, slo, row)
    probe.passed = not probe.misses
    probe.workers = row.get("workers")
    probe.unmeasured = "; ".join(m.text() for m in probe.misses if m.what in UNMEASURED)
    if not any(m.what in INVALID for m in probe.misses):
        probe.margin, probe.samples = margin(per_run, slo), per_samples
    return probe


INVALID = ("failed requests", "client self-check", "token counts")   # misses that make the numbers not the server's
# ...of which these say nothing about the server at all: a probe with one is neither a pass nor a miss
# (failed requests are the server's own verdict)
UNMEASURED = ("client self-check", "token counts")


def misses(probe: Probe, slo: SLO, row: Mapping[str, Any]) -> list[Miss]:
    """Every bound the probe missed: the service level, then the measurement's own validity."""
    out = []
    if slo.per_user_tok_s is not None:
        share = probe.users_meeting_pct
        if share is None or share < slo.users_pct:
            at = "-" if probe.per_user_tok_s_at_pct is None else f"{probe.per_user_tok_s_at_pct:.1f}"
            out.append(Miss("per-user tok/s", f"{_pct(share)} of users >= {slo.per_user_tok_s:g} "
                                              f"(p{100 - slo.users_pct:g} {at})", f"{slo.users_pct:g} %"))
    if slo.ttft_s is not None and (probe.ttft_s is None or probe.ttft_s > slo.ttft_s):
        out.append(Miss(f"TTFT p{slo.ttft_pct:g}", "-" if probe.ttft_s is None else f"{probe.ttft_s:.3f} s",
                        f"<= {slo.ttft_s:g} s"))
    if probe.errors:
        examples = sorted({e for r in row.get("per_run", []) for e in r.get("error_examples", [])})[:2]
        out.append(Miss("failed requests", f"{probe.errors} ({'; '.join(examples)})" if examples else str(probe.errors),
                        "0"))
    if row.get("client_bound"):
        out.append(Miss("client self-check", "client-bound run(s): the numbers are the client's, not the server's",
                        "a client that keeps up (fewer users per client process, a quieter machine)"))
    if row.get("count_mismatch"):
        out.append(Miss("token counts", "usage, chunks and /metrics disagree", "agreement within 0.5 %"))
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f} %"
