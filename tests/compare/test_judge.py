"""The crossover judged from rows whose truth is written down: winners beyond the margin of both
spreads, ties within it, seat- and KV-starved rows excluded with their reason, the metric's
direction, several changes of winner reported as such."""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.compare.judge import judge
from pytest_glmf.compare.lanecurve import exclusion, from_rows


def row(users: int, per_user: float, spread: float = 1.0, seats: int = 256, **extra: Any) -> dict[str, Any]:
    return {"users": users, "per_user_tok_s": per_user, "aggregate_tok_s": per_user * users, "spread_pct": spread,
            "ttft_p95_s": extra.pop("ttft", 0.5), "seats": seats, "valid": True,
            "seat": {"seats": seats, "shared": users > seats}, **extra}


def test_a_wins_low_ties_between_b_wins_high_with_the_zero_interpolated() -> None:
    a = from_rows("daily", [row(1, 250), row(8, 106), row(16, 80), row(24, 60), row(32, 45)])
    b = from_rows("batch", [row(1, 142), row(8, 90), row(16, 79.5), row(24, 66), row(32, 55)])
    c = judge(a, b)
    assert [p.winner for p in c.points] == ["a", "a", "tie", "b", "b"]
    assert (c.leader, c.leads_up_to, c.other_from) == ("daily", 8, 24)
    # a - b: +16 at 8, +0.5 at 16, -6 at 24: zero at 16 + 8 * 0.5 / 6.5
    assert c.crossover_users == pytest.approx(16 + 8 * 0.5 / 6.5)
    assert c.sentence() == ("daily beats batch per user up to 8 users; from 24 batch wins; between, within noise "
                            "(difference crosses zero near 16.6 users)")
    assert c.winner_at(16) == "tie" and c.winner_at(24) == "batch"


def test_the_margin_is_both_half_ranges_summed() -> None:
    # 100 at 4 % spread vs 95 at 2 %: margin (100 * 4 + 95 * 2) / 200 = 2.95 < 5: a wins
    c = judge(from_rows("a", [row(8, 100, 4.0)]), from_rows("b", [row(8, 95, 2.0)]))
    assert c.points[0].margin == pytest.approx(2.95) and c.points[0].winner == "a"
    # twice the spreads: margin 5.9 > 5: within noise
    c = judge(from_rows("a", [row(8, 100, 8.0)]), from_rows("b", [row(8, 95, 4.0)]))
    assert c.points[0].margin == pytest.approx(5.9) and c.points[0].winner == "tie"
    assert c.sentence() == "a and b are within noise per user at every valid users value (8)"
    # no spread recorded (one run): the 1 % floor of the larger value
    c = judge(from_rows("a", [row(8, 100, 0.0)]), from_rows("b", [row(8, 99.5, 0.0)]))
    assert c.points[0].margin == pytest.approx(1.0) and c.points[0].winner == "tie"


def test_seat_starved_and_kv_starved_rows_are_excluded_and_named() -> None:
    # the recipe's round 1: a 7-seat DFlash2 lane's 16-user row against AR with more seats
    a = from_rows("dflash-7", [row(8, 61, seats=7), row(16, 31, seats=7), row(4, 120, seats=7)])
    b = from_rows("ar", [row(4, 100), row(8, 84), row(16, 67)])
    kv = row(24, 10, memory={"fits": False, "need_per_user": 2784, "tokens_per_user": 1500})
    b.rows.append(from_rows("ar", [kv]).rows[0])
    c = judge(a, b)
    assert c.excluded == [("dflash-7", 8, "seat-starved: 8 users on 7 seats"),
                          ("dflash-7", 16, "seat-starved: 16 users on 7 seats"),
                          ("ar", 24, "KV-starved: 24 users x 2784 tokens do not fit the KV pool (1500 per user)")]
    assert [p.users for p in c.points] == [4]
    assert c.sentence() == ("dflash-7 beats ar per user at every valid users value (4); "
                            "above 4 only ar has valid rows (8, 16: dflash-7 seat-starved)")
    assert c.unpaired == [("ar", 8), ("ar", 16)]


def test_above_the_seats_only_the_other_lane_has_valid_rows() -> None:
    # the recipe's round 2: "DFlash2 for up to about 24 users, AR above", 120 DFlash2 slots being 24 seats
    dflash = from_rows("dflash2-120", [row(8, 106, seats=24), row(16, 86, seats=24), row(24, 72, seats=24),
                                       row(32, 47, seats=24)])
    ar = from_rows("ar", [row(8, 90, seats=128), row(16, 72, seats=128), row(24, 62, seats=128),
                          row(32, 55, seats=128), row(48, 50, seats=128)])
    c = judge(dflash, ar)
    assert [p.winner for p in c.points] == ["a", "a", "a"] and c.other_from is None
    assert c.excluded == [("dflash2-120", 32, "seat-starved: 32 users on 24 seats")]
    assert c.unpaired == [("ar", 32), ("ar", 48)]
    assert c.sentence() == ("dflash2-120 beats ar per user at every valid users value (8-24); "
                            "above 24 only ar has valid rows (32, 48: dflash2-120 not measured, seat-starved)")
    # rows only one lane has below, between and above the compared ones
    a = from_rows("a", [row(1, 140), row(8, 100), row(24, 60), row(32, 50)])
    b = from_rows("b", [row(8, 90), row(12, 80), row(16, 70), row(24, 70),
                        row(32, 60, valid=False, flags="client-bound run(s) 1"), row(48, 50)])
    c = judge(a, b)
    assert c.sentence() == ("a beats b per user up to 8 users; from 24 b wins (difference crosses zero near 16.0 users); "
                            "below 8 only a has a valid row (1: b not measured); "
                            "only b has valid rows at 12, 16 (a not measured); "
                            "only a has a valid row at 32 (b invalid); only b has a valid row at 48 (a not measured)")


def test_invalid_rows_are_excluded_with_their_flags() -> None:
    bad = row(8, 50, valid=False, flags="client-bound run(s) 1 (worst: lag p99 3 ms); spread 9 % > 5 %")
    assert exclusion(bad) == "invalid: client-bound run(s) 1"
    assert exclusion(row(8, 50, seats=7, allow_queueing=True)) == "seat-starved: 8 users on 7 seats"   # queued all the same


def test_a_lower_is_better_metric_turns_the_winner() -> None:
    a = from_rows("a", [row(8, 100, ttft=0.3), row(32, 60, ttft=1.4)])
    b = from_rows("b", [row(8, 90, ttft=0.4), row(32, 55, ttft=0.8)])
    c = judge(a, b, "ttft_p95_s")
    assert c.direction == "lower" and [p.winner for p in c.points] == ["a", "b"]
    assert c.sentence().startswith("a beats b on TTFT p95 up to 8 users; from 32 b wins")


def test_more_than_one_change_of_winner_is_no_single_crossover() -> None:
    a = from_rows("a", [row(1, 100), row(8, 50), row(16, 40)])
    b = from_rows("b", [row(1, 80), row(8, 60), row(16, 30)])
    c = judge(a, b)
    assert c.changes == 2
    assert c.sentence() == "no single crossover per user: the winner changes 2 times (a wins at 1, 16; b at 8)"


def test_users_subset_and_unknown_metric() -> None:
    a = from_rows("a", [row(1, 100), row(8, 50)])
    b = from_rows("b", [row(1, 80), row(8, 60)])
    assert [p.users for p in judge(a, b, users=[8]).points] == [8]
    with pytest.raises(ValueError, match=r"metric 'tok_s' is not a curve metric; allowed: aggregate_tok_s, "):
        judge(a, b, "tok_s")
    assert judge(from_rows("a", []), b).sentence() == "a vs b per user: no users value with a valid row on both lanes"
