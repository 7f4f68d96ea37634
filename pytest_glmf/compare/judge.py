"""The crossover of two lanes, judged: at which users value one lane stops beating the other on a
curve metric, from valid rows only, with the run-to-run spread of both as the margin.

Definitions (every number the sentence states):
- a users value is compared only when both lanes have a row there and neither row is excluded
  (seat-starved, KV-starved, invalid: lanecurve.exclusion); excluded rows are listed with why;
- margin at a users value: half of each row's run-to-run range, summed, in the metric's units,
  `(a * spread_a + b * spread_b) / 200` with spread in % ((max - min) / median over the measured
  runs), but at least `floor_pct` % of the larger value. Two medians closer than that have
  overlapping ranges: neither lane is measurably ahead ("within noise");
- winner: "a" when a is better than b by more than the margin (better: the metric's direction,
  higher for tok/s, lower for TTFT), "b" the other way round, "tie" otherwise;
- the crossover: the last users value the leading lane wins before the other first wins, and that
  first value; `crossover_users` interpolates linearly where the difference crosses zero between
  them. More than one change of winner is reported as such, never smoothed into one crossover;
- where only one lane has a valid row (the other's is excluded or was not measured) the sentence
  says so after the verdict, with the other row's kind: the recipe's "DFlash2 for up to about 24
  users, AR above" is DFlash2 winning every users value it has seats for and AR alone above them.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pytest_glmf.compare.lanecurve import LaneCurve, workload_difference
from pytest_glmf.gates.registry import metric_directions
from pytest_glmf.text import fmt

FLOOR_PCT = 1.0


@dataclass(frozen=True)
class Point:
    users: int
    a: float
    b: float
    margin: float
    winner: Literal["a", "b", "tie"]


@dataclass
class Crossover:
    a: str
    b: str
    metric: str
    direction: str                                    # "higher" | "lower" is better
    points: list[Point]
    excluded: list[tuple[str, int, str]] = field(default_factory=list)   # (lane, users, why)
    unpaired: list[tuple[str, int]] = field(default_factory=list)        # a valid row the other lane lacks
    mismatched: list[tuple[int, str]] = field(default_factory=list)      # (users, which settings differ)
    leader: str | None = None                         # the lane that wins at the lowest users it wins
    leads_up_to: int | None = None                    # leader's last win before the other's first
    other_from: int | None = None                     # the other lane's first win
    crossover_users: float | None = None              # interpolated zero of the difference
    changes: int = 0                                  # changes of winner along users (ties skipped)

    def winner_at(self, users: int) -> str | None:
        p = next((p for p in self.points if p.users == users), None)
        return None if p is None else {"a": self.a, "b": self.b, "tie": "tie"}[p.winner]

    def sentence(self) -> str:
        """The verdict over the users values both lanes measured, then where only one lane has valid
        rows (its rival's excluded or missing there): "dflash2-120 beats ar per user at every valid
        users value (8-24); above 24 only ar has valid rows (32: dflash2-120 seat-starved)"."""
        what = METRIC_PHRASES.get(self.metric, f"on {self.metric}")
        if not self.points:
            return "; ".join([f"{self.a} vs {self.b} {what}: no users value with a valid row on both lanes",
                              *self._mismatch_clauses()])
        return "; ".join([self._verdict(what), *self._one_lane_clauses(), *self._mismatch_clauses()])

    def _mismatch_clauses(self) -> list[str]:
        """Users values not compared because the two rows sent different workloads, grouped by what differs."""
        by_diff: dict[str, list[int]] = {}
        for users, diff in self.mismatched:
            by_diff.setdefault(diff, []).append(users)
        return [f"not compared at {', '.join(map(str, users))} users: the workloads differ ({diff})"
                for diff, users in by_diff.items()]

    def _verdict(self, what: str) -> str:
        users = [p.users for p in self.points]
        span = f"{users[0]}" if len(users) == 1 else f"{users[0]}-{users[-1]}"
        if self.leader is None:
            return f"{self.a} and {self.b} are within noise {what} at every valid users value ({span})"
        other = self.b if self.leader == self.a else self.a
        if self.other_from is None:
            ties = [p.users for p in self.points if p.winner == "tie"]
            tail = f" (within noise at {', '.join(map(str, ties))})" if ties else ""
            return f"{self.leader} beats {other} {what} at every valid users value ({span}){tail}"
        if self.changes > 1:
            wins = {n: [p.users for p in self.points if p.winner == w] for n, w in ((self.a, "a"), (self.b, "b"))}
            return (f"no single crossover {what}: the winner changes {self.changes} times ({self.a} wins at "
                    f"{', '.join(map(str, wins[self.a]))}; {self.b} at {', '.join(map(str, wins[self.b]))})")
        assert self.leads_up_to is not None   # set with other_from (crossover)
        between = [p.users for p in self.points if self.leads_up_to < p.users < self.other_from]
        at = f" (difference crosses zero near {fmt(self.crossover_users)} users)" if self.crossover_users else ""
        if between:
            return (f"{self.leader} beats {other} {what} up to {self.leads_up_to} users; from {self.other_from} "
                    f"{other} wins; between, within noise{at}")
        return (f"{self.leader} beats {other} {what} up to {self.leads_up_to} users; from {self.other_from} "
                f"{other} wins{at}")

    def _one_lane_clauses(self) -> list[str]:
        """Users values only one lane has a valid row at, below, between or above the compared ones,
        with what the other lane's row is there (its exclusion's kind, or not measured). "above 24
        only ar has valid rows" when ar alone has rows above; rows of both lanes on one side are
        named each by its users values."""
        low, high = self.points[0].users, self.points[-1].users
        kinds = {(lane, u): why.split(":")[0] for lane, u, why in self.excluded}
        clauses = []
        for side, inside in (("below", lambda u: u < low), ("between", lambda u: low < u < high),
                             ("above", lambda u: u > high)):
            by_lane = {lane: sorted(u for name, u in self.unpaired if name == lane and inside(u))
                       for lane in (self.a, self.b)}
            by_lane = {lane: users for lane, users in by_lane.items() if users}
            for lane, users in by_lane.items():
                other = self.b if lane == self.a else self.a
                there = ", ".join(sorted({kinds.get((other, u), "not measured") for u in users}))
                at = ", ".join(map(str, users))
                rows = "valid rows" if len(users) > 1 else "a valid row"
                if side == "between" or len(by_lane) > 1:
                    clauses.append(f"only {lane} has {rows} at {at} ({other} {there})")
                else:
                    edge = low if side == "below" else high
                    clauses.append(f"{side} {edge} only {lane} has {rows} ({at}: {other} {there})")
        return clauses

METRIC_PHRASES = {"per_user_tok_s": "per user", "aggregate_tok_s": "on aggregate tok/s",
                  "ttft_p95_s": "on TTFT p95", "ttft_p50_s": "on TTFT p50", "per_user_tok_s_p5": "on the slowest users"}


def direction_of(metric: str) -> str:
    directions = metric_directions("curve")
    if metric not in directions:
        raise ValueError(f"metric {metric!r} is not a curve metric; allowed: {', '.join(sorted(directions))}")
    return directions[metric]


def judge(a: LaneCurve, b: LaneCurve, metric: str = "per_user_tok_s", *, users: Sequence[int] | None = None,
          floor_pct: float = FLOOR_PCT) -> Crossover:
    """The crossover of lanes a and b on `metric` (a curve metric), over `users` (default: every
    users value either lane measured)."""
    direction = direction_of(metric)
    wanted = sorted(set(users) if users is not None else {r.users for r in (*a.rows, *b.rows)})
    out = Crossover(a.name, b.name, metric, direction, [])
    for u in wanted:
        ra, rb = a.row(u), b.row(u)
        for lane, r in ((a, ra), (b, rb)):
            if r is not None and r.excluded:
                out.excluded.append((lane.name, u, r.excluded))
            elif r is not None and r.get(metric) is None:
                out.excluded.append((lane.name, u, f"no {metric} recorded"))
        usable = [r for r in (ra, rb) if r is not None and not r.excluded and r.get(metric) is not None]
        diff = workload_difference([ra, rb], [a.name, b.name]) if len(usable) == 2 else None
        if diff is not None:
            out.mismatched.append((u, diff))
        elif len(usable) == 2:
            out.points.append(_point(u, ra, rb, metric, direction, floor_pct))
        elif len(usable) == 1:
            out.unpaired.append((a.name if usable[0] is ra else b.name, u))
    _locate(out)
    return out


def _point(u: int, ra, rb, metric: str, direction: str, floor_pct: float) -> Point:  # noqa: ANN001
    va, vb = ra.get(metric), rb.get(metric)
    sa, sb = ra.get("spread_pct") or 0.0, rb.get("spread_pct") or 0.0
    margin = max((abs(va) * sa + abs(vb) * sb) / 200, floor_pct / 100 * max(abs(va), abs(vb)))
    lead = (va - vb) if direction == "higher" else (vb - va)
    winner: Literal["a", "b", "tie"] = "a" if lead > margin else "b" if lead < -margin else "tie"
    return Point(u, va, vb, margin, winner)


def _locate(c: Crossover) -> None:
    decided = [p for p in c.points if p.winner != "tie"]
    if not decided:
        return
    c.leader = c.a if decided[0].winner == "a" else c.b
    c.changes = sum(1 for p, q in zip(decided, decided[1:]) if p.winner != q.winner)
    first = decided[0].winner
    flip = next((i for i, p in enumerate(decided) if p.winner != first), None)
    if flip is None:
        return
    last, nxt = decided[flip - 1], decided[flip]
    c.leads_up_to, c.other_from = last.users, nxt.users
    # the difference (a - b) changes sign between `last` and `nxt`: the users value of its zero
    inside = [p for p in c.points if last.users <= p.users <= nxt.users]
    for p, q in zip(inside, inside[1:]):
        dp, dq = p.a - p.b, q.a - q.b
        if dp == 0:
            c.crossover_users = float(p.users)
            return
        if dp * dq < 0:
            c.crossover_users = p.users + (q.users - p.users) * dp / (dp - dq)
            return
