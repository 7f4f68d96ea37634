"""One document per measurement: what `glmf <gate> --json` writes is a result document, the shape a
pytest session's result file has (`{"schema", "session_id", "lane", "provenance", "gates", ...}`),
so `glmf report`, `glmf compare` and `glmf history import` take a shell command's output as they
take a session's.

    gates           the gate's entries, keyed and shaped as the suite's fixture records them (the
                    same `to_record()`): the document names its gate(s) by these keys
    provenance      `written_by` (the command), `url`, `started_at`; `glmf bootlog` its engine and version
    exitstatus      the command's exit code (0: every check passed; 1: one missed)
    incomplete      the reasons the command stopped before the end (Ctrl-C), as a session's file says them
    command_output  what only the command has (`glmf curve` its rows with per-request records,
                    `glmf capacity` its searches' full output, `glmf agents` its --min/--max and
                    what missed), as the command wrote it before this shape

A command's document names no lane: the reader names it after the file (`curve.json` -> lane
`curve`). Files written by older versions (the command's own shape at top level) are still read
(`legacy_document`): each gate reads its own command's older output (`GateReport.legacy`, in its
folder), and what none of them reads goes to the gate most of whose metrics it carries.
"""
from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_glmf.gates.registry import GATES, report_hooks

RESULT_SCHEMA = 1
COMMAND_OUTPUT = "command_output"


class NotAGateOutput(ValueError):
    """The JSON is neither a result file nor any gate command's output."""


def command_document(command: str, gates: Mapping[str, Mapping[str, Any]], *, url: Any = None,
                     exitstatus: int | None = None, output: Mapping[str, Any] | None = None,
                     provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The result document of one `glmf <command>` run (module docstring): `gates` as the suite
    records them, `output` what only the command has."""
    now = time.gmtime()
    prov: dict[str, Any] = {"written_by": f"glmf {command}",
                            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", now)}
    if url is not None:
        prov["url"] = url
    prov.update(provenance or {})
    doc: dict[str, Any] = {"schema": RESULT_SCHEMA,
                           "session_id": time.strftime("%Y%m%d-%H%M%S", now) + "-" + secrets.token_hex(2),
                           "lane": {}, "provenance": prov, "gates": {g: dict(e) for g, e in gates.items()}}
    if exitstatus is not None:
        doc["exitstatus"] = exitstatus
    if output is not None:
        doc[COMMAND_OUTPUT] = dict(output)
    return doc


def write_document(path: str | Path, doc: Mapping[str, Any]) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, default=str, ensure_ascii=False))


def as_result_document(data: Any, source: str | Path) -> dict[str, Any]:
    """A result document from a result file's JSON or a gate command's (this version's or an older
    one's); NotAGateOutput naming the file and what is read otherwise."""
    if isinstance(data, dict) and isinstance(data.get("gates"), Mapping):
        lane: Mapping[str, Any] = data["lane"] if isinstance(data.get("lane"), Mapping) else {}
        if lane.get("name") or (data.get("provenance") or {}).get("lane"):
            return data
        return {**data, "lane": {**lane, "name": Path(source).stem}, "session_id": data.get("session_id")
                or Path(source).stem}
    if not isinstance(data, dict):
        raise NotAGateOutput(_refusal(source))
    return legacy_document(data, source)


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


# ---------------------------------------------------------------------------- older files

def legacy_document(data: Mapping[str, Any], source: str | Path) -> dict[str, Any]:
    """What a `glmf <gate> --json` of an older version wrote (the command's own shape), as a result
    document: its gate guessed from its keys, its `incomplete` kept."""
    gate, entries = _read_gate(data)
    incomplete = [str(x) for x in data.get("incomplete") or []]
    if not entries and not incomplete:
        raise NotAGateOutput(_refusal(source))
    command = GATES[gate].command
    prov = {"written_by": f"glmf {command.name if command is not None else gate}"}
    if isinstance(data.get("url"), str):
        prov["url"] = data["url"]
    doc = {"schema": RESULT_SCHEMA, "session_id": Path(source).stem, "lane": {"name": Path(source).stem},
           "provenance": prov, "gates": {gate: entries}}
    if incomplete:
        doc["incomplete"] = incomplete
    return doc


def _read_gate(data: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The gate whose older output `data` is, and its entries: the gate that knows its own output's
    keys (`GateReport.legacy`), else the gate most of whose metrics it carries."""
    for gate in GATES:
        legacy = report_hooks(gate).legacy
        if legacy is not None and (entries := legacy(data)) is not None:
            return gate, entries
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
        return {"cli": scalars(data)}
    out: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and metrics & set(value):     # {"agents": summary}
            out[str(key)] = scalars(value)
            continue
        items = value if isinstance(value, list) else list(value.values()) if isinstance(value, Mapping) else []
        for i, item in enumerate(items):
            if isinstance(item, Mapping) and metrics & set(item):
                out[str(item.get("label") or item.get("candidate") or item.get("name") or i)] = scalars(item)
    return out


def scalars(d: Mapping[str, Any]) -> dict[str, Any]:
    """A record without its bulky parts (per-request records, turn records)."""
    return {k: v for k, v in d.items() if k not in ("records", "turn_records", "per_run", "definitions")}
