"""Capacity as text: the headline sentence, the probes behind it, the frontier (plain data in, text out)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.capacity.measure import CapacityResult, FrontierResult, RateResult, kv_bound_users, workload_text
from pytest_glmf.gates.capacity.search import SearchResult
from pytest_glmf.gates.capacity.slo import Probe
from pytest_glmf.gates.capacity.spec import SLO
from pytest_glmf.gates.verdict import fit_table, fmt, render_table

STOPPED = {"slo": "the service level", "seats": "the seats", "kv_pool": "the KV pool",
           "max_users": "the search's ceiling", "max_rate": "the search's ceiling", "floor": "the floor",
           "undecided": "a probe the client could not measure"}


def _x(probe: Probe | None, rate: bool) -> str:
    if probe is None:
        return "-"
    return f"{probe.x:.3g}/s" if rate else str(probe.users)


def search_sentence(search: SearchResult, *, what: str, unit: str, rate: bool = False) -> str:
    """Why the answer is what it is, with the evidence on both sides."""
    lp, ff = search.last_pass, search.first_fail
    cost = cost_text(search)
    if search.stopped_by == "undecided":
        return f"{what}: undecided: {search.undecided}; {cost}"
    if search.value is None:
        missed = "; ".join(m.text() for m in ff.misses) if ff else "nothing measured"
        return f"{what}: none: even {_x(ff, rate)} {unit} missed the service level ({missed}); {cost}"
    value = f"{search.value:.3g}/s" if rate else f"{int(search.value)}"
    if search.stopped_by == "slo" and ff is not None:
        missed = "; ".join(m.text() for m in ff.misses)
        step = f"{search.step:.3g}/s" if rate else f"{int(search.step)}"
        cliff = (f"; a cliff between {_x(lp, rate)} and {_x(ff, rate)}: the capacity is anywhere between them"
                 if search.boundary == "cliff" else "")
        return (f"{what}: {value} {unit} (the last probe that passed: the service level held at {_x(lp, rate)}, "
                f"{_x(ff, rate)} missed {missed}; resolution {step}{cliff}){boundary_text(search, rate)}; {cost}")
    b = search.bound
    held = "the service level still held there" if lp is not None else "nothing could be measured below it"
    return f"{what}: {value} {unit}, stopped by {STOPPED.get(b.kind, b.kind)}: {b.text()} ({held}); {cost}"


def boundary_text(search: SearchResult, rate: bool = False) -> str:
    """'; the boundary (a fit of the probes' margins) at 46.3, 95 % CI 46-48' (nothing when the
    answer is a bound, or there is no interval). The boundary's, named as such: the answer is the
    last pass, below it by up to a resolution step."""
    ci = search.boundary_ci95
    if not ci:
        return ""
    at = "" if search.boundary_x is None else f" at {search.boundary_x:.3g}" + ("/s" if rate else "")
    span = f"{ci[0]:.3g}-{ci[1]:.3g}/s" if rate else f"{int(ci[0])}-{int(ci[1])}"
    return f"; the boundary (a fit of the probes' margins){at}, 95 % CI {span}"


def cost_text(search: SearchResult) -> str:
    """'4 probe(s) (3 chosen by the model), 564 requests, 12 s'."""
    model = f" ({search.model_probes} chosen by the model)" if search.model_probes else ""
    return f"{len(search.probes)} probe(s){model}, {search.requests:,} requests, {search.wall_s:.0f} s"


def capacity_sentence(result: CapacityResult) -> str:
    what = f"capacity at {result.slo.describe()} ({workload_text(result.workload)})"
    return search_sentence(result.search, what=what, unit="users")


def rate_sentence(result: RateResult) -> str:
    what = f"open-loop capacity at {result.slo.describe()} ({workload_text(result.workload)}, Poisson arrivals)"
    return search_sentence(result.search, what=what, unit="requests/s", rate=True)


def probes_table(probes: Sequence[Probe], search: SearchResult | None = None, *, rate: bool = False,
                 slo: SLO | None = None) -> str:
    """Every probe, in the order measured: what its users saw and the bounds it missed (a long miss
    as a note under the table), then what measuring it took: two tables, each within 120 columns."""
    seen, cost = [], []
    for p in probes:
        role = ""
        if search is not None and p is search.last_pass:
            role = " (last pass)"
        elif search is not None and p is search.first_fail:
            role = " (first fail)"
        meeting = "-" if p.users_meeting_pct is None else f"{p.users_meeting_pct:.0f} %"
        verdict = "pass" if p.passed else "UNMEASURED" if p.unmeasured else "FAIL"
        seen.append([_x(p, rate), verdict + role, fmt(p.per_user_tok_s_at_pct), meeting,
                     fmt(p.per_user_tok_s), fmt(p.ttft_s), fmt(p.ttft_p50_s), fmt(p.aggregate_tok_s),
                     "; ".join(m.text() for m in p.misses) or "; ".join(p.flags)])
        cost.append([_x(p, rate), "-" if p.spread_pct is None else f"{p.spread_pct:.1f} %", fmt(p.margin),
                     str(p.runs), str(p.requests), f"{p.wall_s:.0f}"])
    slo = slo or SLO()
    at = f">= {slo.per_user_tok_s:g}" if slo.per_user_tok_s is not None else "meeting"
    x = "requests/s" if rate else "users"
    return (fit_table([x, "verdict", f"p{100 - slo.users_pct:g} tok/s", f"users {at}", "per-user tok/s",
                       f"TTFT p{slo.ttft_pct:g} s", "TTFT p50 s", "aggregate tok/s", "missed / flags"], seen,
                      first=(8,))
            + "\n" + render_table(cost, [x, "spread", "margin", "runs", "requests", "wall s"]))


def capacity_report(result: CapacityResult) -> str:
    return capacity_sentence(result) + "\n" + probes_table(result.probes, result.search, slo=result.slo)


def rate_report(result: RateResult) -> str:
    return rate_sentence(result) + "\n" + probes_table(result.search.probes, result.search, rate=True, slo=result.slo)


def frontier_rows(frontier: FrontierResult, facts: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One plain row per context: the measured capacity and the bounds beside it."""
    facts = dict(facts or {})
    facts.setdefault("kv_tokens", frontier.kv_tokens)
    out = []
    for p in frontier.points:
        first = p.first_fail
        out.append({"context_tokens": p.workload["prompt_tokens"], "users": p.users, "stopped_by": p.stopped_by,
                    "missed_at": first.users if first is not None else None,
                    "missed": "; ".join(m.what for m in first.misses) if first is not None else "",
                    "seats": frontier.seats, "kv_bound_users": kv_bound_users(p, facts),
                    "kv_tokens_per_user": (frontier.kv_tokens // p.users) if frontier.kv_tokens and p.users else None,
                    "boundary_ci95": p.boundary_ci95, "undecided": p.undecided, "probes": len(p.probes),
                    "requests": p.search.requests, "wall_s": p.wall_s})
    return out


def frontier_table(frontier: FrontierResult, facts: Mapping[str, Any] | None = None) -> str:
    """The recipe's "many short sessions or few long ones", measured: capacity per context length."""
    body = []
    for r in frontier_rows(frontier, facts):
        why = STOPPED.get(r["stopped_by"], r["stopped_by"])
        if r["stopped_by"] == "slo" and r["missed_at"] is not None:
            why = f"{r['missed']} at {r['missed_at']}"
        ci = "-" if not r["boundary_ci95"] else f"{int(r['boundary_ci95'][0])}-{int(r['boundary_ci95'][1])}"
        body.append([f"{r['context_tokens']:,}", "-" if r["users"] is None else str(r["users"]), ci, why,
                     "-" if r["kv_bound_users"] is None else str(r["kv_bound_users"]),
                     "-" if r["seats"] is None else str(r["seats"]),
                     "-" if r["kv_tokens_per_user"] is None else f"{r['kv_tokens_per_user']:,}",
                     str(r["probes"]), f"{r['requests']:,}", f"{r['wall_s']:.0f}"])
    return fit_table(["context tokens/user", "users at SLO", "boundary 95 % CI", "stopped by", "KV pool users",
                      "seats", "KV tokens/user at capacity", "probes", "requests", "wall s"], body, first=(3,))
