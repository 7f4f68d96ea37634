"""The cores a client process may use now: the cores it may run on, less what the rest of the machine
keeps busy.

The auto worker count (load/workers.py `auto_workers`) was capped by the cores alone, so on a CI
runner with 2 cores and a 1-minute load of 6 it still planned 2 workers, and the advice knew better
only afterwards ("the client was starved of CPU"). The rule here: the cores free for the client are
the cores minus the 1-minute load that is not its own (the load average counts every runnable task,
this client's included; its own share, measured by the caller, is taken off first), rounded to
whole cores, at least 1. A core counts as free while others keep less than half of it busy.

Pure arithmetic over two numbers the OS gives (`os.sched_getaffinity`, `os.getloadavg`), plus
`free_cores_now` that reads them; `FreeCores.why` says what was chosen and why, in the words a row's
`workers_plan` and the progress line print.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class FreeCores:
    """Cores free for the client (at least 1) and why, in one phrase."""

    count: int
    why: str


def affinity_cores() -> int:
    """Cores this process may run on (its affinity mask, which taskset and cgroups narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def load_1m() -> float | None:
    """The machine's 1-minute load average; None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):     # not Unix
        return None


def free_cores(cores: int, load: float | None, own_load: float = 0.0) -> FreeCores:
    """The cores free for a client on `cores` cores with the machine's 1-minute `load`, of which
    `own_load` cores are the client's own (its CPU seconds per second over the last pass: its
    earlier rows show in the load average too and must not crowd it out). Others' load is
    `load - own_load`, never below 0; free is `cores - others` rounded to whole cores, at least 1.
    An unknown load counts every core free."""
    if cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    if load is None:
        return FreeCores(cores, f"{cores} cores, load unknown: all counted free")
    own = min(max(own_load, 0.0), load)
    others = load - own
    count = max(1, min(cores, math.floor(cores - others + 0.5)))
    mine = f" of which {own:.1f} this client's" if own >= 0.05 else ""
    said = f"{cores} cores, 1-minute load {load:.1f}{mine}"
    if count == cores:
        return FreeCores(count, f"{said}: all {cores} free")
    floor = " (at least 1)" if cores - others < 0.5 else ""
    return FreeCores(count, f"{said}: others keep {others:.1f} busy -> {count} free{floor}")


def free_cores_now(own_load: float = 0.0) -> FreeCores:
    """`free_cores` for this process on this machine, now."""
    return free_cores(affinity_cores(), load_1m(), own_load)
