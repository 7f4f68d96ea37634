"""Capacity as text: the headline sentence, the probes behind it, the frontier (plain data in, text out)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.capacity.measure import CapacityResult, FrontierResult, RateResult, kv_bound_users, workload_text
from pytest_glmf.gates.capacity.search import Bound, SearchResult
from pytest_glmf.gates.capacity.slo import Miss, Probe
from pytest_glmf.gates.capacity.spec import SLO
from pytest_glmf.text import fit_table, fmt, render_table

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
    """'; the boundary (a fit of the probes' margins) at 46.3, 95 % CI 45.8-46.9' (nothing when the
    answer is a bound, or there is no interval). The boundary's, named as such: the answer is the
    last pass, below it by up to a resolution step. The estimate and its interval in one unit and
    one precision (interval.py: the interval holds the estimate)."""
    ci = search.boundary_ci95
    if not ci:
        return ""
    at = "" if search.boundary_x is None else f" at {search.boundary_x:.3g}" + ("/s" if rate else "")
    return f"; the boundary (a fit of the probes' margins){at}, 95 % CI {interval_text(ci, rate)}"


def interval_text(ci: Sequence[float] | None, rate: bool = False) -> str:
    """'45.8-46.9' ('-/s' for rates; '-' without an interval): the precision of the boundary beside it."""
    if not ci:
        return "-"
    return f"{ci[0]:.3g}-{ci[1]:.3g}" + ("/s" if rate else "")


def cost_text(search: SearchResult) -> str:
    """'4 probe(s) (3 chosen by the model), 564 requests, 12 s'."""
    model = f" ({search.model_probes} chosen by the model)" if search.model_probes else ""
    return f"{len(search.probes)} probe(s){model}, {search.requests:,} requests, {search.wall_s:.0f} s"


def capacity_sentence(result: CapacityResult) -> str:
    return search_sentence(result.search, what=_what(result.slo, result.workload), unit="users")


def rate_sentence(result: RateResult) -> str:
    return search_sentence(result.search, what=_what(result.slo, result.workload, rate=True), unit="requests/s",
                           rate=True)


def _what(slo: SLO, workload: Mapping[str, Any], rate: bool = False) -> str:
    if rate:
        return f"open-loop capacity at {slo.describe()} ({workload_text(workload)}, Poisson arrivals)"
    return f"capacity at {slo.describe()} ({workload_text(workload)})"


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


def recorded_report(entries: Mapping[str, Any]) -> str:
    """What `glmf capacity` printed, from a result document's `gates.capacity` entries (a session's
    or the command's own --json): per search its answer, boundary and interval, and its probes.
    Entries without their search (files of older versions) say nothing here."""
    parts = []
    for key, entry in entries.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("search"), Mapping):
            continue
        search = search_from_dict(entry["search"])
        slo = SLO(**{k: v for k, v in (entry.get("slo") or {}).items() if k in SLO.__dataclass_fields__})
        rate = key == "rate" or "rate_per_s" in entry
        workload = entry.get("workload") or {"prompt_tokens": None, "max_tokens": "?"}
        unit = "requests/s" if rate else "users"
        parts.append(search_sentence(search, what=_what(slo, workload, rate), unit=unit, rate=rate) + "\n"
                     + probes_table(search.probes, search, rate=rate, slo=slo))
    return "\n\n".join(parts)


def search_from_dict(d: Mapping[str, Any]) -> SearchResult:
    """A search as `SearchResult.to_dict` wrote it (its probes without their samples)."""
    probes = [probe_from_dict(p) for p in d.get("probes") or [] if isinstance(p, Mapping) and "x" in p]

    def among(p: Mapping[str, Any] | None) -> Probe | None:     # the same object as in probes (the table's roles)
        if not isinstance(p, Mapping) or "x" not in p:
            return None
        return next((q for q in probes if q.x == p["x"]), None) or probe_from_dict(p)

    bound = d.get("bound") or {}
    return SearchResult(value=d.get("value"), last_pass=among(d.get("last_pass")), first_fail=among(d.get("first_fail")),
                        stopped_by=str(d.get("stopped_by") or ""),
                        bound=Bound(bound.get("value", 0), bound.get("kind", ""), bound.get("detail", ""),
                                    bound.get("hint", "")),
                        step=float(d.get("step") or 0), probes=probes, wall_s=float(d.get("wall_s") or 0),
                        model_probes=int((d.get("cost") or {}).get("model_probes") or 0), boundary=d.get("boundary"),
                        slope=d.get("slope"), boundary_x=d.get("boundary_x"), boundary_ci95=d.get("boundary_ci95"),
                        undecided=str(d.get("undecided") or ""))


def probe_from_dict(d: Mapping[str, Any]) -> Probe:
    """A probe as `Probe.to_dict` wrote it."""
    known = {k: v for k, v in d.items() if k in Probe.__dataclass_fields__ and k not in ("misses", "samples")}
    known.setdefault("passed", False)
    return Probe(**known, misses=[Miss(**m) for m in d.get("misses") or [] if isinstance(m, Mapping)])


def users_key(workload: Mapping[str, Any]) -> str:
    """The result file's key of a users search: `users@PROMPT+OUTPUT` (PROMPT `file`: the prompt file as it is)."""
    return f"users@{workload.get('prompt_tokens') or 'file'}+{workload.get('max_tokens')}"


def frontier_entries(frontier: FrontierResult, facts: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The result file's entries of a frontier: `frontier@CONTEXT`, each search's record with the
    bounds beside it (the suite's glmf_capacity and `glmf capacity --json` record the same)."""
    return {f"frontier@{row['context_tokens']}": {**point.to_record(),
                                                   **{k: row[k] for k in ("kv_bound_users", "seats", "kv_tokens_per_user")}}
            for point, row in zip(frontier.points, frontier_rows(frontier, facts))}


def frontier_table(frontier: FrontierResult, facts: Mapping[str, Any] | None = None) -> str:
    """The recipe's "many short sessions or few long ones", measured: capacity per context length."""
    body = []
    for r in frontier_rows(frontier, facts):
        why = STOPPED.get(r["stopped_by"], r["stopped_by"])
        if r["stopped_by"] == "slo" and r["missed_at"] is not None:
            why = f"{r['missed']} at {r['missed_at']}"
        body.append([f"{r['context_tokens']:,}", "-" if r["users"] is None else str(r["users"]),
                     interval_text(r["boundary_ci95"]), why,
                     "-" if r["kv_bound_users"] is None else str(r["kv_bound_users"]),
                     "-" if r["seats"] is None else str(r["seats"]),
                     "-" if r["kv_tokens_per_user"] is None else f"{r['kv_tokens_per_user']:,}",
                     str(r["probes"]), f"{r['requests']:,}", f"{r['wall_s']:.0f}"])
    return fit_table(["context tokens/user", "users at SLO", "boundary 95 % CI", "stopped by", "KV pool users",
                      "seats", "KV tokens/user at capacity", "probes", "requests", "wall s"], body, first=(3,))
