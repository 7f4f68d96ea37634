"""The crossover of two servers whose curves are known (truth servers: per-user speed
1 / (itl + k * (running - 1))), measured by the curve gate and judged by the comparison.

    fast-start: 1000 / (20 + 2.0 (u - 1)) tok/s   38.5 @ 4, 29.4 @ 8, 20.0 @ 16, 15.2 @ 24
    flat:       1000 / (40 + 0.4 (u - 1)) tok/s   24.3 @ 4, 23.4 @ 8, 21.7 @ 16, 20.3 @ 24
    equal where 20 + 2 (u - 1) = 40 + 0.4 (u - 1): u = 13.5

fast-start has 16 seats: its 24-user row is 24 clients on 16 seats and must be excluded, named."""
from __future__ import annotations

import pytest

from pytest_glmf.compare import assert_lane_beats, crossover
from pytest_glmf.gates.curve import measure_curve
from pytest_glmf.testing.truth_server import TruthServer

USERS = [4, 8, 16, 24]
# slow streams: a loaded box keeps up with them, so the client's self-check holds
SETTINGS = {"max_tokens": 40, "runs": 2, "prompt_tokens": None}
CAP = "max_running_requests is capped to 16 by the mamba state cache (max_mamba_cache_size=80, 5 state slots per request)"


def speed(u: int, itl_ms: float, per_running_ms: float) -> float:
    return 1000.0 / (itl_ms + per_running_ms * (u - 1))


@pytest.fixture(scope="module")
def curves():
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=2.0, seats=16) as fast, \
            TruthServer(ttft_ms=20, itl_ms=40, itl_per_running_ms=0.4) as flat:
        a = measure_curve(fast.url, USERS, boot_facts={"max_running_requests": 16, "cap_reason": CAP}, **SETTINGS)
        b = measure_curve(flat.url, USERS, boot_facts={"max_running_requests": 256}, **SETTINGS)
    return a, b


def test_the_measured_curves_are_the_truth(curves) -> None:
    a, b = curves
    for u in USERS[:3]:
        assert a[u].per_user_tok_s == pytest.approx(speed(u, 20, 2.0), rel=0.05)
    for u in USERS:
        assert b[u].per_user_tok_s == pytest.approx(speed(u, 40, 0.4), rel=0.05)


def test_the_crossover_is_found_within_the_spread_and_the_seat_capped_row_excluded(curves) -> None:
    a, b = curves
    c = crossover(a, b, names=("fast-start", "flat"))
    assert c.excluded == [("fast-start", 24, "seat-starved: 24 users on 16 seats")]
    assert [p.users for p in c.points] == [4, 8, 16]
    assert [p.winner for p in c.points] == ["a", "a", "b"]
    assert (c.leader, c.leads_up_to, c.other_from) == ("fast-start", 8, 16)
    # linear interpolation of the measured difference between 8 and 16 users: the truth is 13.5,
    # the interpolation of the true curves 14.2; the rows' spread moves it a little
    true_zero = 8 + 8 * (speed(8, 20, 2) - speed(8, 40, 0.4)) / (
        (speed(8, 20, 2) - speed(8, 40, 0.4)) - (speed(16, 20, 2) - speed(16, 40, 0.4)))
    assert c.crossover_users == pytest.approx(true_zero, abs=0.8)
    assert c.sentence().startswith("fast-start beats flat per user up to 8 users; from 16 flat wins")


def test_assert_lane_beats_passes_below_and_fails_above_with_the_reason(curves, inline_notes) -> None:
    a, b = curves
    assert_lane_beats(a, b, users=[4, 8], names=("fast-start", "flat"))
    with pytest.raises(pytest.fail.Exception) as exc:
        assert_lane_beats(a, b, users=[8, 16, 24], names=("fast-start", "flat"), source="test")
    text = inline_notes(str(exc.value))
    assert text.startswith("fast-start does not beat flat on per_user_tok_s: 2 threshold(s) missed")
    assert "per_user_tok_s: lead of fast-start over flat @ 16 users" in text and "flat wins" in text
    assert ("@ 24 users | -        | >= 0     | not measured; not a measurement of both lanes: fast-start: "
            "seat-starved: 24 users on 16 seats") in text
    assert "excluded: fast-start @ 24 users: seat-starved: 24 users on 16 seats" in text
