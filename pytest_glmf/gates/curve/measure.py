"""Concurrency curve: per-user tok/s, aggregate tok/s and TTFT at N users, with a load generator that
checks itself. Usable without pytest:

    from pytest_glmf.gates.curve.measure import run_curve
    from pytest_glmf.gates.curve.table import curve_table
    result = run_curve("http://127.0.0.1:30000", users=[1, 8, 16], max_tokens=384, facts=boot_facts)
    print(curve_table(result["rows"]))

or `glmf curve --url URL --users 1,8,16 --max-tokens 384 --json OUT`. The gate's settings (spec.py)
become the runner's `Workload` and `CurveSettings` here (`workload_for`, `run_settings_for`).
Definitions: records.py; the streaming path: http.py; the runner: runner.py; seat/memory/client
checks: checks.py.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_glmf.gates.curve.records import knee
from pytest_glmf.gates.curve.runner import CurveSettings, Progress, Workload, run_rows, strip_records
from pytest_glmf.gates.curve.spec import DEFAULTS, CurveRowSettings
from pytest_glmf.gates.curve.table import DEFINITIONS
from pytest_glmf.gates.curve.workload import load_prompt_variants

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


def run_curve(base_url: str | Sequence[str], users: Sequence[int], *, max_tokens: int = DEFAULTS.max_tokens, runs: int = DEFAULTS.runs,
              facts: Mapping[str, Any] | None = None, prompts: list[str] | None = None,
              progress: Progress | None = None, workload: Workload | None = None,
              settings: CurveSettings | None = None, on_row: Callable[[dict[str, Any]], None] | None = None,
              **settings_kw: Any) -> dict[str, Any]:
    """Run the curve and return {"schema", "rows", "knee", "definitions"}. `facts` are the boot facts
    (BootFacts.to_dict(), or endpoints.replica_facts of several): seats and KV pool for the row
    checks. `base_url`: one server or router, or a list of replicas' URLs."""
    workload = workload or Workload(prompts=prompts or load_prompt_variants(), max_tokens=max_tokens)
    settings = settings or CurveSettings(users=list(users), runs=runs, **settings_kw)
    rows = run_rows(base_url, workload, settings, facts, progress, on_row)
    return curve_result(base_url, rows, workload, settings)


def curve_result(base_url: str | Sequence[str], rows: list[dict[str, Any]], workload: Workload,
                 settings: CurveSettings) -> dict[str, Any]:
    """run_curve's answer for `rows` (all of them, or those finished before a Ctrl-C)."""
    return {"schema": SCHEMA, "url": base_url, "rows": rows, "knee": knee(rows), "definitions": DEFINITIONS,
            "workload": {"model": workload.model, "max_tokens": workload.max_tokens, "path": workload.path,
                         "prompts": len(workload.prompts),
                         "rate_per_s": settings.rate_per_s, "arrival": settings.arrival}}


def summary(result: Mapping[str, Any], records: bool = False) -> dict[str, Any]:
    """JSON-able result; per-request records only when asked (they are large)."""
    rows = result["rows"] if records else [strip_records(r) for r in result["rows"]]
    return {**result, "rows": rows}
