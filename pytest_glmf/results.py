"""The session's result file: what every gate measured, with the server's provenance.

Each process (the single pytest process, or each xdist worker) appends `record(gate, key, data)`
calls to its own JSON-lines part file; the process that owns the session merges the parts into one
result file `<results>/<lane>-<session_id>.json` (and a copy `<lane>-latest.json`) at the end.
Parts instead of one shared file because xdist workers write concurrently.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pytest_glmf.redact import Redactor

SCHEMA = 1


class SessionRecorder:
    """`glmf_results`: gates record JSON-able data under (gate, key)."""

    def __init__(self, results_dir: Path, session_id: str, lane_name: str, worker: str = "main"):
        self.results_dir = Path(results_dir)
        self.session_id = session_id
        self.lane_name = lane_name
        self.worker = worker
        self.part_path = self.results_dir / ".parts" / f"{session_id}-{worker}.jsonl"

    def record(self, gate: str, key: str, data: Any) -> None:
        data = Redactor.from_environment().data(data)   # part files are on disk too
        line = json.dumps({"gate": gate, "key": key, "data": data, "t": time.time()}, allow_nan=True)
        self.part_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.part_path, "a") as f:
            f.write(line + "\n")

    def recorded(self) -> dict[str, dict[str, Any]]:
        """Everything recorded so far by every process of this session (later records win)."""
        gates: dict[str, dict[str, Any]] = {}
        for part in sorted((self.results_dir / ".parts").glob(f"{self.session_id}-*.jsonl")):
            for line in part.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    gates.setdefault(rec["gate"], {})[rec["key"]] = rec["data"]
        return gates

    def write(self, *, lane: dict[str, Any], provenance: dict[str, Any],
              extra: dict[str, Any] | None = None) -> Path | None:
        """Merge the parts into the session's result file; None when nothing was recorded (and
        `extra` does not say the session was incomplete: a failed session leaves a file saying why).
        Secrets (lane env, process env, --api-key style flags) are masked in the whole document."""
        gates = self.recorded()
        if not gates and not (extra or {}).get("incomplete"):
            return None
        doc = {"schema": SCHEMA, "session_id": self.session_id, "lane": lane,
               "provenance": provenance, "gates": gates, **(extra or {})}
        argv = [str(a) for a in [*(provenance.get("argv") or []), *(lane.get("command") or []),
                                 *(lane.get("extra") or [])]]  # a failed boot has no argv in provenance
        doc = Redactor.from_environment(lane.get("env") or {}, argv).data(doc)
        text = json.dumps(doc, indent=2, default=str)
        out = self.results_dir / f"{self.lane_name}-{self.session_id}.json"
        out.write_text(text)
        (self.results_dir / f"{self.lane_name}-latest.json").write_text(text)
        for part in (self.results_dir / ".parts").glob(f"{self.session_id}-*.jsonl"):
            part.unlink()
        return out
