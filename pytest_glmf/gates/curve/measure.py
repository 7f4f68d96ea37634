"""The curve gate's settings (spec.py) as the runner's `Workload` and `CurveSettings`
(`workload_for`, `run_settings_for`), and the runner's answer as `glmf curve --json` writes it
(`curve_result`, `summary`). The one entry point is `api.measure_curve` (the fixture, the suite
and `glmf curve` call it). Definitions: records.py; the streaming path: http.py; the runner:
runner.py; the client self-check: selfcheck.py; seat/memory checks and gate rows: checks.py.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.curve.spec import SPEC, CurveRowSettings
from pytest_glmf.load.records import knee
from pytest_glmf.load.run import CurveSettings, Workload, strip_records

SCHEMA = 1


def workload_for(settings: CurveRowSettings, prompts: list[str]) -> Workload:
    """What every user of a row sends, from the gate's settings."""
    return Workload(prompts=prompts, max_tokens=settings.max_tokens, path=settings.path, model=settings.model,
                    continuous_usage=settings.continuous_usage, shared_prefix=settings.shared_prefix)


def run_settings_for(settings: CurveRowSettings, users: Sequence[int],
                     timeouts: Mapping[str, float] | None = None) -> CurveSettings:
    """How the runner measures `users`, from the gate's settings. A timeout the settings leave
    unset comes from the lane's `timeouts` (first_token_s, between_tokens_s), else the client's."""
    kw: dict[str, Any] = {}
    for key, lane_key in (("first_token_timeout_s", "first_token_s"), ("between_tokens_timeout_s", "between_tokens_s")):
        value = getattr(settings, key)
        value = value if value is not None else (timeouts or {}).get(lane_key)
        if value is not None:
            kw[key] = float(value)
    return CurveSettings(users=list(users), runs=settings.runs, warmup=settings.warmup, rate_per_s=settings.rate_per_s,
                         spread_max_pct=settings.spread_max_pct, lag_p99_max_s=settings.lag_p99_max_s,
                         cpu_max_frac=settings.cpu_max_frac, workers=settings.workers, arrival=settings.arrival,
                         client_error_max_pct=settings.client_error_max_pct,
                         client_retries=settings.client_retries,
                         **kw)


def curve_result(base_url: str | Sequence[str], rows: list[dict[str, Any]], workload: Workload,
                 settings: CurveSettings) -> dict[str, Any]:
    """The runner's answer for `rows` (all of them, or those finished before a Ctrl-C):
    {"schema", "url", "rows", "knee", "definitions", "workload"}."""
    return {"schema": SCHEMA, "url": base_url, "rows": rows, "knee": knee(rows), "definitions": SPEC.glossary(),
            "workload": {"model": workload.model, "max_tokens": workload.max_tokens, "path": workload.path,
                         "prompts": len(workload.prompts),
                         "rate_per_s": settings.rate_per_s, "arrival": settings.arrival}}


def summary(result: Mapping[str, Any], records: bool = False) -> dict[str, Any]:
    """JSON-able result; per-request records only when asked (they are large)."""
    rows = result["rows"] if records else [strip_records(r) for r in result["rows"]]
    return {**result, "rows": rows}
