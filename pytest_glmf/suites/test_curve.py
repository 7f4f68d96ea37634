"""Concurrency-curve gate: the recipe's headline table (users, aggregate tok/s, per-user tok/s, TTFT
p50/p95) and "48 users at 50 tok/s each".

One test per row of the lane's `curve.rows` in thresholds.yaml, so each users value is its own test
id (`test_curve_row[users=48]`). Each row: one warm pass at that batch shape (discarded: the first
hit is autotune), then `runs` measured runs after a prefix-cache flush, with fresh prompts per run.
A row fails when a bound is missed, when users exceed the server's seats (the boot log's cap and
the flag that raises it are in the failure; `allow_queueing: true` on the row accepts it), when
the workload cannot fit the KV pool, when the client was the bottleneck, when token counts
disagree, or when requests failed. Definitions: pytest_glmf/gates/curve/records.py.

Settings (`curve.settings`; a row's own `settings:` override them for that row): declared, with
their defaults and what each means, in pytest_glmf/gates/curve/spec.py (`CurveRowSettings`); an
unknown key or a wrong type fails when the thresholds file is read, before any server boots. On
the simulator with `time_scale` != 1 the measured numbers are converted to recipe units (tok/s x
scale, seconds / scale) before gating, and both are recorded.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.curve.checks import describe_flags, row_gate_checks
from pytest_glmf.gates.curve.endpoints import server_endpoints
from pytest_glmf.gates.curve.measure import run_settings_for, workload_for
from pytest_glmf.gates.curve.measure import summary as curve_summary
from pytest_glmf.gates.curve.records import knee
from pytest_glmf.gates.curve.runner import run_rows
from pytest_glmf.gates.curve.spec import SPEC
from pytest_glmf.gates.curve.table import curve_table, knee_sentence
from pytest_glmf.gates.curve.workers import WorkerError
from pytest_glmf.gates.curve.workload import fit_prompts, load_prompt_variants
from pytest_glmf.gates.verdict import failed_checks, failure_table
from pytest_glmf.plugin.progress import live_progress
from pytest_glmf.plugin.session import session_of

pytestmark = [pytest.mark.glmf_gate("curve"), pytest.mark.glmf_serial]


def _curve_rows(config: pytest.Config) -> list[dict[str, Any]] | None:
    """The lane's curve rows at collection time (None: no lane selected). The thresholds file,
    settings included, was validated when the session was configured."""
    session = session_of(config)
    if session is None:
        return None
    assert session.thresholds is not None   # loaded whenever a lane is selected
    return list(session.thresholds.for_gate(session.lane.name, "curve").get("rows") or [])


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
    rows: list[dict[str, Any]] = []
    yield rows
    say = live_progress(request.config)
    if rows and say is not None:
        say("")
        say(f"glmf concurrency curve ({rows[0].get('units', 'measured')}):")
        for line in curve_table(sorted(rows, key=lambda r: r["users"])).splitlines():
            say(line)
        say(knee_sentence(knee(rows)))


def to_recipe_units(row: dict[str, Any], time_scale: float) -> dict[str, Any]:
    """Simulator at time scale s runs 1/s times faster: tok/s x s and seconds / s give recipe units."""
    if time_scale == 1.0:
        return row
    out = dict(row)
    for key in SPEC.metrics:
        value = row.get(key)
        if value is None or key == "spread_pct":
            continue
        out[key] = value * time_scale if "tok_s" in key else value / time_scale
    return out


def test_curve_row(curve_row, request, glmf_server, glmf_lane, glmf_thresholds, glmf_results,
                   record_property, curve_collected):
    if curve_row is None:
        pytest.skip(f"no curve rows for lane {glmf_lane.name!r} in {glmf_thresholds.source(glmf_lane.name, 'curve')}")
    # the lane's settings with the row's own on top (both checked when the file was read)
    opts = glmf_thresholds.settings(glmf_lane.name, "curve", overrides=curve_row.get("settings"))
    users = int(curve_row["users"])
    try:
        prompts = load_prompt_variants(opts.prompt_file)
    except (OSError, UnicodeDecodeError) as exc:
        pytest.fail(f"{glmf_thresholds.source(glmf_lane.name, 'curve')}: settings.prompt_file: {exc}", pytrace=False)
    if opts.prompt_tokens:
        # "a 2,400-token briefing" in the served model's own tokens, whatever its tokenizer
        try:
            prompts, counts = fit_prompts(glmf_server.base_url, prompts, opts.prompt_tokens, opts.model)
        except ValueError as exc:
            pytest.fail(f"{glmf_thresholds.source(glmf_lane.name, 'curve')}: settings.prompt_tokens: {exc}", pytrace=False)
        record_property("curve.prompt_tokens", max(counts))
    # timeouts: the row's settings, else the lane's timeouts, else the client's defaults
    settings = run_settings_for(opts, [users], glmf_lane.timeouts)
    # several replicas: each one's boot facts, seats summed; streams dealt round-robin over their URLs
    urls, facts = server_endpoints(glmf_server)
    try:
        row = run_rows(urls, workload_for(opts, prompts), settings, facts, live_progress(request.config))[0]
    except WorkerError as exc:
        pytest.fail(f"curve of lane {glmf_lane.name!r} @ {users} users: client workers failed: {exc}", pytrace=False)

    scale = float(glmf_lane.time_scale) if glmf_lane.launcher == "sim" else 1.0
    gated = to_recipe_units(row, scale)
    gated["units"] = "recipe units" if scale != 1.0 else "measured"
    flags = describe_flags(row)
    summary = curve_summary({"rows": [gated]})["rows"][0]
    summary.update({"tokens_per_user": row["memory"]["tokens_per_user"], "flags": "; ".join(flags) or "ok",
                    "time_scale": scale, "measured": {k: row.get(k) for k in SPEC.metrics}})
    glmf_results.record("curve", f"users={users}", summary)
    for key in ("aggregate_tok_s", "per_user_tok_s", "ttft_p50_s", "ttft_p95_s", "spread_pct", "seats"):
        record_property(f"curve.users{users}.{key}", gated.get(key))
    curve_collected.append(gated)

    bounds = {k: v for k, v in curve_row.items() if k not in ("users", "settings")}
    checks = row_gate_checks(gated, bounds, source=f"{glmf_thresholds.source(glmf_lane.name, 'curve')}[{users}]")
    table = curve_table([gated])
    unit_note = f" (simulator time scale {scale:g}: numbers in recipe units)" if scale != 1.0 else ""
    title = f"curve of lane {glmf_lane.name!r} @ {users} users{unit_note}"
    failed = failed_checks(checks)
    if failed:
        pytest.fail(f"{title}: {len(failed)} threshold(s) missed\n{failure_table(failed)}\n\nthe row:\n{table}",
                    pytrace=False)
