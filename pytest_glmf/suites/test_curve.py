"""Concurrency-curve gate: the recipe's headline table (users, aggregate tok/s, per-user tok/s, TTFT
p50/p95) and "48 users at 50 tok/s each".

One test per row of the lane's `curve.rows` in thresholds.yaml, so each users value is its own test
id (`test_curve_row[users=48]`). Each row: one warm pass at that batch shape (discarded: the first
hit is autotune), then `runs` measured runs after a prefix-cache flush, with fresh prompts per run.
A row fails when a bound is missed, when users exceed the server's seats (the boot log's cap and
the flag that raises it are in the failure; `allow_queueing: true` on the row accepts it), when
the workload cannot fit the KV pool, when the client was the bottleneck, when token counts
disagree, or when requests failed. Definitions: pytest_glmf/load/records.py.

Settings (`curve.settings`; a row's own `settings:` override them for that row): declared, with
their defaults and what each means, in pytest_glmf/gates/curve/spec.py (`CurveRowSettings`); an
unknown key or a wrong type fails when the thresholds file is read, before any server boots. On
the simulator with `time_scale` != 1 the measured numbers are converted to recipe units (tok/s x
scale, seconds / scale) before gating, and both are recorded.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.curve import CurveResult, CurveRow, assert_curve
from pytest_glmf.plugin.accessors import selected_lanes, session_thresholds
from pytest_glmf.plugin.progress import live_progress

pytestmark = [pytest.mark.glmf_gate("curve"), pytest.mark.glmf_serial]


def _curve_rows(config: pytest.Config) -> list[dict[str, Any]] | None:
    """The lane's curve rows at collection time (None: no lane selected); with several lanes, one
    per users value any of them has (each test then takes its own lane's row). The thresholds
    file, settings included, was validated when the session was configured."""
    thresholds = session_thresholds(config)
    if thresholds is None:   # loaded whenever a lane is selected
        return None
    rows: dict[int, dict[str, Any]] = {}
    for lane in selected_lanes(config):
        for row in thresholds.for_gate(lane.name, "curve").get("rows") or []:
            rows.setdefault(int(row["users"]), row)
    return list(rows.values())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "curve_row" not in metafunc.fixturenames:
        return
    rows = _curve_rows(metafunc.config)
    if not rows:
        # no lane (the glmf_lane fixture says how to pick one) or no rows: one test that says so
        metafunc.parametrize("curve_row", [None], ids=["no-rows"])
        return
    metafunc.parametrize("curve_row", rows, ids=[f"users={r['users']}" for r in rows])


@pytest.fixture(scope="module")
def curve_collected(request: pytest.FixtureRequest):
    """Rows measured in this module; the full table is written when the module finishes."""
    rows: list[CurveRow] = []
    yield rows
    say = live_progress(request.config)
    if rows and say is not None:
        curve = CurveResult(rows)
        say("")
        say(f"glmf concurrency curve ({rows[0].detail.get('units', 'measured')}):")
        for line in curve.table().splitlines():
            say(line)
        say(curve.knee_sentence())


def test_curve_row(curve_row, glmf_curve, glmf_lane, glmf_thresholds, record_property, curve_collected):
    if curve_row is None:
        pytest.skip(f"no curve rows for lane {glmf_lane.name!r} in {glmf_thresholds.source(glmf_lane.name, 'curve')}")
    users = int(curve_row["users"])
    source = glmf_thresholds.source(glmf_lane.name, "curve")
    own = {int(r["users"]): r for r in glmf_thresholds.for_gate(glmf_lane.name, "curve").get("rows") or []}
    if users not in own:   # several lanes: another lane's row
        pytest.skip(f"lane {glmf_lane.name!r} has no curve row at {users} users in {source}")
    curve_row = own[users]
    # the lane's settings with the row's own on top (both checked when the file was read)
    settings = glmf_thresholds.settings(glmf_lane.name, "curve", overrides=curve_row.get("settings"))
    curve = glmf_curve(users, settings=settings, key=f"users={users}", source=f"{source}.settings")
    row = curve[users]
    if curve.prompt_tokens is not None:
        record_property("curve.prompt_tokens", curve.prompt_tokens)
    for key in ("aggregate_tok_s", "per_user_tok_s", "ttft_p50_s", "ttft_p95_s", "spread_pct", "seats"):
        record_property(f"curve.users{users}.{key}", getattr(row, key))
    curve_collected.append(row)
    bounds = {k: v for k, v in curve_row.items() if k not in ("users", "settings")}
    assert_curve(row, source=f"{source}[{users}]", **bounds)

