"""The cores free for a client (pytest_glmf/cpus.py): the cores less the 1-minute load that is not
the client's own, at least 1, and what was chosen said in words."""
from __future__ import annotations

import pytest

from pytest_glmf import cpus
from pytest_glmf.cpus import FreeCores, free_cores


def test_an_idle_machine_leaves_every_core_free() -> None:
    assert free_cores(8, 0.2) == FreeCores(8, "8 cores, 1-minute load 0.2: all 8 free")


def test_others_load_takes_its_cores_away() -> None:
    # the CI runner of issue 41's note: 2 cores, load 6 (two CPU hogs and a test): one worker, not two
    assert free_cores(2, 6.0) == FreeCores(1, "2 cores, 1-minute load 6.0: others keep 6.0 busy -> 1 free (at least 1)")
    assert free_cores(8, 3.0) == FreeCores(5, "8 cores, 1-minute load 3.0: others keep 3.0 busy -> 5 free")
    # a core counts as free while others keep less than half of it busy
    assert free_cores(8, 2.4).count == 6 and free_cores(8, 2.6).count == 5


def test_the_clients_own_load_is_not_counted_against_it() -> None:
    # its earlier rows kept 2 workers busy: that load is its own, so the 4 cores stay free
    assert free_cores(4, 2.1, own_load=2.0) == FreeCores(
        4, "4 cores, 1-minute load 2.1 of which 2.0 this client's: all 4 free")
    assert free_cores(4, 3.0, own_load=1.0) == FreeCores(
        2, "4 cores, 1-minute load 3.0 of which 1.0 this client's: others keep 2.0 busy -> 2 free")
    # own load above the load average (the average lags a short pass) leaves no negative others
    assert free_cores(4, 0.5, own_load=1.5).count == 4


def test_an_unknown_load_counts_every_core_and_says_so() -> None:
    assert free_cores(4, None) == FreeCores(4, "4 cores, load unknown: all counted free")


def test_no_cores_is_refused() -> None:
    with pytest.raises(ValueError, match="cores must be >= 1, got 0"):
        free_cores(0, 1.0)


def test_free_cores_now_reads_the_affinity_mask_and_the_load_average(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(cpus.os, "getloadavg", lambda: (3.2, 1.0, 0.5), raising=False)
    assert cpus.free_cores_now() == FreeCores(1, "4 cores, 1-minute load 3.2: others keep 3.2 busy -> 1 free")
    assert cpus.free_cores_now(own_load=1.0).count == 2

    def no_load() -> tuple[float, float, float]:
        raise OSError("no load average")

    monkeypatch.setattr(cpus.os, "getloadavg", no_load, raising=False)
    assert cpus.free_cores_now() == FreeCores(4, "4 cores, load unknown: all counted free")

