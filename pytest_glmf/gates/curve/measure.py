"""The curve gate's settings (spec.py) as a load run's (`load_settings`: pytest_glmf/load), and the
load engine's answer as `glmf curve --json` writes it (`curve_result`, `summary`). The one entry
point is `api.measure_curve` (the fixture, the suite and `glmf curve` call it). Definitions, the
streaming path, the runner and the client self-check: pytest_glmf/load; the gate rows: checks.py.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.curve.spec import SPEC, CurveRowSettings
from pytest_glmf.load import LoadSettings, Workload, knee, strip_records

SCHEMA = 1


def load_settings(settings: CurveRowSettings, users: Sequence[int],
                  timeouts: Mapping[str, float] | None = None) -> LoadSettings:
    """A row's load run, from the gate's settings (the one place they become one): the settings
    named like the load engine's are its; a timeout they leave unset comes from the lane's
    `timeouts` (first_token_s, between_tokens_s), else the client's. Its `workload(prompts)` is
    what every user sends."""
    return LoadSettings.of(settings, users, timeouts=timeouts)


def curve_result(base_url: str | Sequence[str], rows: list[dict[str, Any]], workload: Workload,
                 settings: LoadSettings) -> dict[str, Any]:
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
