"""The curve row's verdicts: its gate rows, from the bounds, the row's seat and KV-pool checks
(load/seats.py) and the client's self-check, number by number (load/selfcheck.py); the row's flags
are the load engine's (load/flags.py). Pure functions over plain data (measured rows).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pytest_glmf.gates.boot.hints import seat_cap_hint
from pytest_glmf.gates.verdict import Check, checks_from_bounds
from pytest_glmf.load import advice_text, lane_name
from pytest_glmf.text import fmt


def row_gate_checks(row: Mapping[str, Any], bounds: Mapping[str, Any], *, source: str = "",
                    lane: Any = None) -> list[Check]:
    """Every verdict of one curve row: the metric bounds from thresholds.yaml, then the row's own
    validity (seats, KV fit, open-loop sends, token counts, failed requests), which fail the gate
    even when the numbers look fine, because then the numbers are not the server's at that many
    users. A number the client did not measure (row["unmeasured"]) fails only a bound set on it,
    and only when its error interval does not decide that bound: where both ends of the interval
    the true value lies in give the same verdict, that verdict stands (`client_check`).
    `lane`: the seat hint leaves out advice its engine flags already follow (boot/hints.py), and
    the client's advice names its settings in the thresholds file under the lane's name."""
    users = row["users"]
    where = f"@ {users} users"
    name = lane_name(lane)
    hints = {"spread_pct": "noisy runs: check other load on the server, or raise runs",
             "ttft_p95_s": "queueing or prefill: compare with seats and ttft_p50_s"}
    unmeasured = row.get("unmeasured") or {}
    checks = []
    for c in checks_from_bounds("curve", row, bounds, where=where, source=source, hints=hints):
        b = (row.get("client_error") or {}).get(c.metric)
        if c.metric not in unmeasured or not b:
            checks.append(c)
            continue
        ends = [Check(c.metric, b["lo"], c.bound).ok, Check(c.metric, b["hi"], c.bound).ok]
        if ends[0] == ends[1]:      # the interval decides the bound: its verdict is the truth's
            hint = f"the client's error interval [{fmt(b['lo'])}, {fmt(b['hi'])}] is on one side of the bound"
            checks.append(dataclasses.replace(c, value=b["value"], hint="; ".join(x for x in (c.hint, hint) if x)))
        else:     # "not measured" (Check.change), the reason, what would measure it
            advice = advice_text(row.get("client_advice"), "settings", name, need_pct=b["bound_pct"])
            checks.append(dataclasses.replace(c, value=None, cause="client-bound",
                                              hint=unmeasured[c.metric] + (f"; {advice}" if advice else "")))
    allow_queueing = bool(bounds.get("allow_queueing"))
    seat = row.get("seat") or {}
    if not allow_queueing and seat.get("seats") is not None:
        checks.append(Check("seats", seat["seats"], {"min": users}, where=where,
                            source=seat.get("seats_source") or "boot log",
                            hint=seat_cap_hint(seat.get("cap_reason"), lane)))
    for i, rep in enumerate(seat.get("replicas") or []):
        if not allow_queueing and rep["users"] is not None and rep["seats"] is not None:
            checks.append(Check(f"seats of replica {i + 1}", rep["seats"], {"min": rep["users"]}, where=where,
                                source=f"boot log of {rep['name']}", hint=seat_cap_hint(rep.get("cap_reason"), lane)))
    mem = row.get("memory") or {}
    if not allow_queueing and mem.get("fits") is False:
        checks.append(Check("kv tokens per user", mem["tokens_per_user"], {"min": mem["need_per_user"]},
                            where=where, source="boot log kv_tokens",
                            hint="shorten the workload, lower users, or give the KV pool more memory"))
    bad_client = [i + 1 for i, r in enumerate(row.get("per_run", [])) if r["client"]["client_bound"]]
    if bad_client:
        notes = "; ".join(row["per_run"][bad_client[0] - 1]["client"]["notes"])
        late_advice = advice_text(row["per_run"][bad_client[0] - 1]["client"].get("advice"), "settings", name)
        checks.append(Check("client-bound runs", len(bad_client), {"max": 0}, where=where,
                            source=f"runs {bad_client}",
                            hint=f"run invalid, not the server's load: {notes}" + (f"; {late_advice}" if late_advice else ""),
                            cause="client-bound"))
    bad_count = [i + 1 for i, r in enumerate(row.get("per_run", [])) if not r["token_count"]["ok"]]
    if bad_count:
        notes = "; ".join(row["per_run"][bad_count[0] - 1]["token_count"]["problems"])
        checks.append(Check("token-count mismatches", len(bad_count), {"max": 0}, where=where,
                            source=f"runs {bad_count}", hint=notes, cause="server"))
    errors = sum(r["errors"] for r in row.get("per_run", []))
    if errors:
        examples = sorted({e for r in row["per_run"] for e in r.get("error_examples", [])})[:2]
        checks.append(Check("failed requests", errors, {"max": 0}, where=where, hint="; ".join(examples),
                            cause="server"))
    return checks
