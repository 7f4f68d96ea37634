"""A model-level "server" for the capacity search: users -> a measured curve row of per-request
records, from a known service curve and noise of a stated size, seeded. No HTTP: thousands of
seeded searches in seconds (tests/gates/capacity, bench/capacity_search.py); the HTTP truth
server (truth_server.py) is the end-to-end twin.

    speed of request i in run r at n users = curve(n) * exp(run_sigma * z_r + request_sigma * z_ri)
    TTFT = ttft_s(n) (no noise), `max_tokens` tokens each, a token every 1 / speed seconds

The true capacity under `per_user_tok_s = S for users_pct = P %`: the largest n at which P % of
the requests of a median run reach S, curve(n) * exp(-z_P * request_sigma) >= S (z_P the
standard normal quantile of P %): `true_capacity`.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from pytest_glmf.load import RequestRecord


def smooth(n: float) -> float:
    """The issue 24 curve: 150 tok/s alone, halved at 21 users."""
    return 150.0 / (1.0 + (n - 1.0) / 20.0)


def steep(n: float) -> float:
    """Fast alone, slow soon: 300 tok/s, halved at 5 users."""
    return 300.0 / (1.0 + (n - 1.0) / 4.0)


def cliff(n: float, at: int = 30) -> float:
    """Smooth up to `at` users, then half the speed (a KV pool that starts preempting)."""
    return smooth(n) * (1.0 if n <= at else 0.5)


CURVES: dict[str, Callable[[float], float]] = {"smooth": smooth, "steep": steep, "cliff": cliff}


@dataclass
class ModelServer:
    """A known service curve with seeded noise; `row(users)` is what gates/curve's runner returns."""

    curve: Callable[[float], float]
    request_sigma: float = 0.0          # per-request log-normal noise on speed
    run_sigma: float = 0.0              # per-run log-normal noise on speed (every request of the run)
    ttft_s: Callable[[float], float] = lambda n: 0.05
    max_tokens: int = 64
    runs: int = 3
    seed: int = 0
    calls: int = 0

    def row(self, users: int) -> dict[str, Any]:
        self.calls += 1
        rng = random.Random(f"{self.seed}:{users}:{self.calls}")
        per_run = []
        for _ in range(self.runs):
            run_z = rng.gauss(0.0, 1.0)
            records = []
            for u in range(users):
                speed = self.curve(users) * math.exp(self.run_sigma * run_z + self.request_sigma * rng.gauss(0, 1))
                first = self.ttft_s(users)
                last = first + (self.max_tokens - 1) / speed
                records.append(RequestRecord(user=u, t_send_s=0.0, status=200, t_first_chunk_s=first,
                                             t_first_token_s=first, t_last_token_s=last,
                                             completion_tokens=self.max_tokens))
            per_run.append({"records": records, "requests": users, "errors": 0,
                            "client": {"client_bound": False, "lag_p99_s": 0.0, "notes": []},
                            "token_count": {"problems": []}})
        return {"per_run": per_run, "aggregate_tok_s": users * self.curve(users)}

    def true_capacity(self, per_user_tok_s: float, users_pct: float = 95.0, top: int = 4096) -> int:
        z = NormalDist().inv_cdf(users_pct / 100.0)
        ok = [n for n in range(1, top + 1) if self.curve(n) * math.exp(-z * self.request_sigma) >= per_user_tok_s]
        return max(ok) if ok else 0
