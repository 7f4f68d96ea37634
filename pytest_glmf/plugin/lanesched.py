"""Several lanes under xdist (`--glmf-lane a --glmf-lane b -n N`): one server at a time, every
worker testing it.

The controller owns every lane's server, as it owns the one server of a single-lane session. Its
scheduler (`LaneScheduling`, pytest-xdist's loadgroup scheduling with an order) hands out the work
units lane by lane: tests that use no lane first, then the first lane's, then the next lane's.
A worker that reaches the next lane's first test while the previous lane still runs elsewhere waits
(`wait_published`) until the controller has seen every test of the previous lane complete, stopped
its server, written its result file and booted the next lane (`publish`). A lane's `glmf_serial`
tests are its own xdist group, so its speed tests stay serial on its server.

The controller does not collect, so which lane a test belongs to comes from the workers: each
writes its collection's `{nodeid: lane}` (`write_items`) before xdist hands the collection over.
Both files live under `<results>/.locks/` and are removed at the end of the session.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdist.scheduler import LoadGroupScheduling

from pytest_glmf.launch import server_to_dict
from pytest_glmf.results.recorder import write_atomic

if TYPE_CHECKING:
    import pytest

    from pytest_glmf.launch.base import Server

POLL_S = 0.1


def lock_dir(results_dir: Path) -> Path:
    return Path(results_dir) / ".locks"


def items_path(results_dir: Path, base_session_id: str, worker: str) -> Path:
    return lock_dir(results_dir) / f"{base_session_id}.items-{worker}.json"


def handoff_path(results_dir: Path, lane_session_id: str) -> Path:
    return lock_dir(results_dir) / f"{lane_session_id}.server.json"


def write_items(results_dir: Path, base_session_id: str, worker: str, lanes: dict[str, str]) -> None:
    """Worker: which lane each collected test belongs to, `{nodeid: lane}` (tests without a lane left out)."""
    path = items_path(results_dir, base_session_id, worker)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(lanes))


def read_items(results_dir: Path, base_session_id: str, worker: str) -> dict[str, str]:
    path = items_path(results_dir, base_session_id, worker)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"glmf: worker {worker} did not say which lane its tests belong to ({path}: {exc})") from None


def publish(results_dir: Path, lane_session_id: str, lane: str, *, server: "Server | None" = None,
            boot_error: str | None = None, skip: str | None = None) -> None:
    """Controller: a lane's server, or why it did not boot, or why its tests are not run, for the
    workers waiting on it."""

    doc: dict[str, Any] = {"lane": lane}
    if skip is not None:
        doc["skip"] = skip
    elif boot_error is not None:
        doc["boot_error"] = boot_error
    else:
        assert server is not None
        doc["server"] = server_to_dict(server)
    path = handoff_path(results_dir, lane_session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc))


def wait_published(results_dir: Path, lane_session_id: str, lane: str, worker: str) -> dict[str, Any]:
    """Worker: wait until the controller has booted the lane (the previous lane's tests may still
    run on other workers). A controller that dies ends the wait (the worker is orphaned)."""
    path = handoff_path(results_dir, lane_session_id)
    parent = os.getppid()
    while True:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):   # not written yet (write_atomic: never half-written)
            pass
        if os.getppid() != parent:
            raise RuntimeError(f"glmf: the xdist controller is gone while worker {worker} waited for lane {lane!r}")
        time.sleep(POLL_S)


def cleanup(results_dir: Path, base_session_id: str) -> None:
    for path in lock_dir(results_dir).glob(f"{base_session_id}*.json"):
        if path.name.endswith(".server.json") or ".items-" in path.name:
            path.unlink(missing_ok=True)


def make_scheduler(config: "pytest.Config", log: Any, lanes: list[str], items: Callable[[str], dict[str, str]],
                   next_lane: Callable[[str], None], stopping: Callable[[str], None]) -> Any:
    """The controller's scheduler for several lanes: `items(worker)` reads a worker's `{nodeid: lane}`,
    `next_lane(name)` boots a lane, `stopping(why)` tells the workers waiting for later lanes that the
    session stops (-x, --maxfail). The xdist internals it uses are checked by
    tests/plugin/test_xdist_contract.py (pyproject.toml bounds pytest-xdist to those versions)."""

    class LaneScheduling(LoadGroupScheduling):
        """Loadgroup scheduling whose work units go out lane by lane; when the last test of the
        current lane completes, `next_lane(name)` boots the next lane that has tests."""

        def __init__(self) -> None:
            super().__init__(config, log)
            self.lane_of: dict[str, str] = {}
            self.current: str | None = None
            self.stop_said = False

        def rank(self, scope: str) -> int:
            unit = self.workqueue[scope]
            lane = self.lane_of.get(next(iter(unit)))
            return -1 if lane is None else lanes.index(lane)

        def _assign_work_unit(self, node: Any) -> None:
            # the first unit of the earliest lane (min keeps the queue's order among equals)
            scope = min(self.workqueue, key=self.rank)
            self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

        def pending(self, lane: str) -> bool:
            units = [*self.workqueue.values(), *(u for work in self.assigned_work.values() for u in work.values())]
            return any(not done and self.lane_of.get(nodeid) == lane for unit in units for nodeid, done in unit.items())

        def advance(self) -> None:
            """Boot the next lane with tests once the current one has none left to run."""
            if self.current is not None and self.pending(self.current):
                return
            start = -1 if self.current is None else lanes.index(self.current)
            following = [lane for lane in lanes[start + 1:] if self.pending(lane)]
            if following:
                self.current = following[0]
                next_lane(self.current)

        def schedule(self) -> None:
            first = self.collection is None
            if first and self.collection_is_completed:
                node = next(iter(self.registered_collections))
                self.lane_of = items(node.gateway.id)
            super().schedule()
            if first:
                self.advance()

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            shouldstop = getattr(config.pluginmanager.get_plugin("dsession"), "shouldstop", False)
            if shouldstop:
                if not self.stop_said:
                    self.stop_said = True
                    stopping(str(shouldstop))
                return
            self.advance()

    return LaneScheduling()
