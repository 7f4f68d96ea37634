"""The serial lock: `glmf_serial` tests measure alone, also across xdist workers."""
from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_glmf.plugin.run import LaneRun


def serial_lock_path(run: "LaneRun", session_id: str | None = None) -> Path:
    """The lock of the run's server (several lanes: of the lane whose session id is given)."""
    return run.settings.results_dir / ".locks" / f"{session_id or run.session_id}.lock"


@contextmanager
def server_lock(path: Path, exclusive: bool) -> Iterator[None]:
    """glmf_serial tests hold the lock exclusively, every other test on the server holds it
    shared, so a speed measurement never runs beside other traffic from another xdist worker."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
