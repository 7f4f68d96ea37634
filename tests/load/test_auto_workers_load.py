"""The auto worker count plans on the cores the rest of the machine leaves free (pytest_glmf/cpus.py):
on 2 cores with a 1-minute load of 2.9, of which 0.1 is the client's own, one worker, and the row's
`workers_plan` says why; on a quiet machine the same client cost plans both cores."""
from __future__ import annotations

import pytest

from pytest_glmf import cpus
from pytest_glmf.load import LoadSettings
from pytest_glmf.load.run import ClientCost, _plan


def _cost() -> ClientCost:
    # 32 streams x 500 token events/s x 100 us a event = 1.6 cores of reading: two workers wanted
    cost = ClientCost(events_per_stream_s=500.0, cpu_per_event_s=100e-6)
    cost.busy_cores = 0.1
    return cost


@pytest.mark.parametrize(("load", "workers", "said"), [
    (0.2, 2, "2 cores, 1-minute load 0.2 of which 0.1 this client's: all 2 free"),
    (2.9, 1, "2 cores, 1-minute load 2.9 of which 0.1 this client's: others keep 2.8 busy -> 1 free (at least 1)"),
])
def test_auto_workers_count_the_cores_others_leave_free(monkeypatch: pytest.MonkeyPatch, load: float,
                                                         workers: int, said: str) -> None:
    monkeypatch.setattr(cpus, "affinity_cores", lambda: 2)
    monkeypatch.setattr(cpus, "load_1m", lambda: load)
    n, why = _plan(LoadSettings(users=[32]), 32, _cost())
    assert n == workers
    assert why.endswith("; " + said), why


def test_set_workers_are_kept_whatever_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpus, "affinity_cores", lambda: 2)
    monkeypatch.setattr(cpus, "load_1m", lambda: 9.0)
    assert _plan(LoadSettings(users=[32], workers=2), 32, _cost()) == (2, "set")
