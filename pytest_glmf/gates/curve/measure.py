"""Concurrency curve: per-user tok/s, aggregate tok/s and TTFT at N users, with a load generator that
checks itself. Usable without pytest:

    from pytest_glmf.gates.curve import api as load
    result = load.run_curve("http://127.0.0.1:30000", users=[1, 8, 16], max_tokens=384, facts=boot_facts)
    print(load.curve_table(result["rows"]))

or `glmf curve --url URL --users 1,8,16 --max-tokens 384 --json OUT`. Definitions: load_records;
the streaming path: load_http; the runner: load_runner; seat/memory/client checks: load_checks.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.curve.records import knee
from pytest_glmf.gates.curve.runner import CurveSettings, Progress, Workload, run_rows, strip_records
from pytest_glmf.gates.curve.table import DEFINITIONS
from pytest_glmf.gates.curve.workload import briefing_prompts

SCHEMA = 1


def run_curve(base_url: str, users: Sequence[int], *, max_tokens: int = 384, runs: int = 3,
              facts: Mapping[str, Any] | None = None, prompts: list[str] | None = None,
              progress: Progress | None = None, workload: Workload | None = None,
              settings: CurveSettings | None = None, **settings_kw: Any) -> dict[str, Any]:
    """Run the curve and return {"schema", "rows", "knee", "definitions"}. `facts` are the boot facts
    (BootFacts.to_dict()): seats and KV pool for the row checks."""
    workload = workload or Workload(prompts=prompts or briefing_prompts(), max_tokens=max_tokens)
    settings = settings or CurveSettings(users=list(users), runs=runs, **settings_kw)
    rows = run_rows(base_url, workload, settings, facts, progress)
    return {"schema": SCHEMA, "url": base_url, "rows": rows, "knee": knee(rows), "definitions": DEFINITIONS,
            "workload": {"max_tokens": workload.max_tokens, "path": workload.path, "prompts": len(workload.prompts),
                         "rate_per_s": settings.rate_per_s}}


def summary(result: Mapping[str, Any], records: bool = False) -> dict[str, Any]:
    """JSON-able result; per-request records only when asked (they are large)."""
    rows = result["rows"] if records else [strip_records(r) for r in result["rows"]]
    return {**result, "rows": rows}
