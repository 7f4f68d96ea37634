"""What `glmf <gate> --json` wrote, read as a result document (`{"lane", "provenance", "gates"}`), so
`glmf report` and `glmf compare` take a shell command's output as they take a session's result file.

Each gate's command writes its own shape: `glmf curve` its rows with per-request records, `glmf
capacity` the answer, frontier and rate, `glmf accept` its classes, `glmf bootlog --json` the boot
facts, the others (tools, template, agents, drift compare) one summary whose keys are the gate's
metrics. The document names the lane after the file (`curve.json` -> lane `curve`) and says which
command wrote it (`provenance.written_by`).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_glmf.gates.curve.api import row_record
from pytest_glmf.gates.registry import GATES

RESULT_SCHEMA = 1


class NotAGateOutput(ValueError):
    """The JSON is neither a result file nor any gate command's output."""


def as_result_document(data: Any, source: str | Path) -> dict[str, Any]:
    """A result document from a result file's JSON or a gate command's; NotAGateOutput naming the
    file and what is read otherwise."""
    if isinstance(data, dict) and "gates" in data:
        return data
    if not isinstance(data, dict):
        raise NotAGateOutput(_refusal(source))
    gate, entries = _read_gate(data)
    if not entries:
        raise NotAGateOutput(_refusal(source))
    prov = {"written_by": f"glmf {'bootlog' if gate == 'boot' else 'accept' if gate == 'acceptance' else gate}"}
    if isinstance(data.get("url"), str):
        prov["url"] = data["url"]
    return {"schema": RESULT_SCHEMA, "session_id": Path(source).stem, "lane": {"name": Path(source).stem},
            "provenance": prov, "gates": {gate: entries}}


def read_result(path: str | Path) -> dict[str, Any]:
    """The result document of a file (a session's, or a gate command's --json); ValueError naming it."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the result file: {exc}") from None
    return as_result_document(data, path)


def _refusal(source: str | Path) -> str:
    return (f"{source}: neither a pytest-glmf result file (no 'gates' section) nor the --json output of a glmf "
            f"gate command ({', '.join(GATES)})")


def _read_gate(data: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    if isinstance(data.get("rows"), list) and "knee" in data:
        return "curve", _curve(data)
    if "slo" in data and any(k in data for k in ("capacity", "frontier", "rate")):
        return "capacity", _capacity(data)
    if isinstance(data.get("classes"), list) and "source" in data:
        return "acceptance", {str(r.get("class") or r.get("name") or i): _scalars(r)
                              for i, r in enumerate(data["classes"]) if isinstance(r, Mapping)}
    if "ready" in data and "max_running_requests" in data:      # BootFacts.to_dict()
        return "boot", {"facts": dict(data)}
    scored = []
    for gate, spec in GATES.items():
        entries = _with_metrics(data, set(spec.metrics))
        scored.append((sum(len(set(spec.metrics) & set(e)) for e in entries.values()), gate, entries))
    _, gate, entries = max(scored, key=lambda s: s[0])   # the gate most of whose metrics it carries
    return gate, entries


def _with_metrics(data: Mapping[str, Any], metrics: set[str]) -> dict[str, dict[str, Any]]:
    """The summary itself when its keys are metrics, else the mappings in its lists (a candidate
    each, a scenario each) that carry metrics, keyed by their label."""
    if metrics & set(data):
        return {"cli": _scalars(data)}
    out: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and metrics & set(value):     # {"agents": summary}
            out[str(key)] = _scalars(value)
            continue
        items = value if isinstance(value, list) else list(value.values()) if isinstance(value, Mapping) else []
        for i, item in enumerate(items):
            if isinstance(item, Mapping) and metrics & set(item):
                out[str(item.get("label") or item.get("candidate") or item.get("name") or i)] = _scalars(item)
    return out


def _scalars(d: Mapping[str, Any]) -> dict[str, Any]:
    """A record without its bulky parts (per-request records, turn records)."""
    return {k: v for k, v in d.items() if k not in ("records", "turn_records", "per_run", "definitions")}


def _curve(data: Mapping[str, Any]) -> dict[str, Any]:
    return {f"users={r['users']}": row_record(dict(r)) for r in data["rows"] if isinstance(r, Mapping) and "users" in r}


def _capacity(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    points = [data["capacity"]] if isinstance(data.get("capacity"), Mapping) else []
    points += [p for p in ((data.get("frontier") or {}).get("points") or []) if isinstance(p, Mapping)]
    for p in points:
        w = p.get("workload") or {}
        key = (f"frontier@{w['context_tokens']}" if w.get("context_tokens") and p is not data.get("capacity")
               else f"users@{w.get('prompt_tokens') or 'file'}+{w.get('max_tokens')}")
        out[key] = _capacity_entry(p)
    if isinstance(data.get("rate"), Mapping):
        out["rate"] = _capacity_entry(data["rate"])
    return out


def _capacity_entry(p: Mapping[str, Any]) -> dict[str, Any]:
    search = p.get("search") or {}
    entry = {k: p.get(k) for k in ("users", "rate_per_s", "ci95", "stopped_by", "time_scale") if k in p}
    if isinstance(search.get("probes"), list):
        entry["probes"] = len(search["probes"])
    for k in ("requests", "wall_s"):
        if k in search:
            entry[k] = search[k]
    return entry
