"""The session's result file: what every gate measured, with the server's provenance.

Each process (the single pytest process, or each xdist worker) appends `record(gate, key, data)`
calls to its own JSON-lines part file; the process that owns the session merges the parts into one
result file `<results>/<lane>-<session_id>.json` (and a copy `<lane>-latest.json`) at the end.
Parts instead of one shared file because xdist workers write concurrently.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
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
        # The plugin points this at a list while a test runs: what that test recorded is then
        # compared with the baseline and reported through record_property (plugin/bookkeeping.py, judge_recorded).
        self.capture: list[tuple[str, str, Any]] | None = None

    def record(self, gate: str, key: str, data: Any) -> None:
        data = Redactor.from_environment().data(data)   # part files are on disk too
        line = json.dumps({"gate": gate, "key": key, "data": data, "t": time.time()}, allow_nan=True)
        self.part_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.part_path, "a") as f:
            f.write(line + "\n")
        if self.capture is not None:
            self.capture.append((gate, key, data))

    def parts(self) -> list[Path]:
        """This session's part files: `<session_id>-<worker>.jsonl`, the worker `main` or an xdist
        `gwN` (not the parts of lane `b-x` when this is lane `b` of a several-lanes session)."""
        prefix = f"{self.session_id}-"
        return sorted(p for p in (self.results_dir / ".parts").glob(f"{prefix}*.jsonl")
                      if re.fullmatch(r"main|gw\d+", p.name[len(prefix):-len(".jsonl")]))

    def recorded(self) -> dict[str, dict[str, Any]]:
        """Everything recorded so far by every process of this session (later records win)."""
        gates: dict[str, dict[str, Any]] = {}
        for part in self.parts():
            for line in part.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    gates.setdefault(rec["gate"], {})[rec["key"]] = rec["data"]
        return gates

    def write(self, *, lane: dict[str, Any], provenance: dict[str, Any],
              extra: dict[str, Any] | None = None, final: bool = True, keep: bool = False,
              update: Callable[[dict[str, Any]], None] | None = None) -> Path | None:
        """Merge the parts into the session's result file; None when nothing was recorded (and
        `extra` does not say the session was incomplete: a failed session leaves a file saying why).
        Secrets (lane env, process env, --api-key style flags) are masked in the whole document.
        `final=False` writes a checkpoint while the session runs (the parts stay), so a session
        killed without a chance to clean up still leaves a readable file saying it is incomplete.
        `keep`: write it even with nothing recorded (the session's checks verified something).
        `update` changes the document in place before its secrets are masked (the plugin's
        pytest_glmf_update_result hook)."""
        gates = self.recorded()
        if not gates and not keep and not (extra or {}).get("incomplete"):
            if final:   # nothing to keep: the session ended cleanly, not killed
                (self.results_dir / ".parts" / f"{self.session_id}.owner").unlink(missing_ok=True)
            return None
        doc = {"schema": SCHEMA, "session_id": self.session_id, "lane": lane, "provenance": provenance,
               "gates": gates, **(extra or {})}
        if update is not None:
            update(doc)
        doc = redact_result(doc)
        text = json.dumps(doc, indent=2, default=str)
        out = self.results_dir / f"{self.lane_name}-{self.session_id}.json"
        write_atomic(out, text)
        write_atomic(self.results_dir / f"{self.lane_name}-latest.json", text)
        if final:
            for part in self.parts():
                part.unlink()
            (self.results_dir / ".parts" / f"{self.session_id}.owner").unlink(missing_ok=True)
        return out


def redact_result(doc: dict[str, Any]) -> dict[str, Any]:
    """A result document with its secrets masked: the environment's, the lane's env, and values of
    secret-named flags in the server's command line (the engine may echo them back)."""
    lane, provenance = doc.get("lane") or {}, doc.get("provenance") or {}
    argv = [str(a) for a in [*(provenance.get("argv") or []), *(lane.get("command") or []),
                             *(lane.get("extra") or [])]]  # a failed boot has no argv in provenance
    return Redactor.from_environment(lane.get("env") or {}, argv).data(doc)


def write_atomic(path: Path, text: str) -> None:
    """Readers (a CI step, `glmf report`, the next session) never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


RUNNING = "the session had not finished when this file was written (still running, or killed)"


def mark_owner(results_dir: Path, session_id: str, lane: dict[str, Any]) -> None:
    """The owning process's pid and lane, so a later session can tell this one was killed."""
    path = Path(results_dir) / ".parts" / f"{session_id}.owner"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": os.getpid(), "lane": lane}, default=str))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_killed_sessions(results_dir: Path) -> list[tuple[str, dict[str, Any], Path | None]]:
    """Finish the result files of earlier sessions whose owner died without cleaning up (SIGKILL,
    OOM killer, a lost runner). Returns (session_id, lane, result file) for each; the caller
    writes the ledger line."""
    found = []
    for owner in sorted((Path(results_dir) / ".parts").glob("*.owner")):
        try:
            info = json.loads(owner.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if _pid_alive(int(info.get("pid", 0))):
            continue
        session_id, lane = owner.stem, info.get("lane") or {}
        name = lane.get("name", "unknown")
        prior = Path(results_dir) / f"{name}-{session_id}.json"
        provenance: dict[str, Any] = {}
        if prior.exists():
            try:
                provenance = json.loads(prior.read_text()).get("provenance") or {}
            except (OSError, json.JSONDecodeError):
                pass
        reason = f"the session's process (pid {info.get('pid')}) died without a clean stop (killed)"
        out = SessionRecorder(Path(results_dir), session_id, name).write(
            lane=lane, provenance=provenance, extra={"incomplete": [reason]})
        owner.unlink(missing_ok=True)
        found.append((session_id, lane, out))
    return found
