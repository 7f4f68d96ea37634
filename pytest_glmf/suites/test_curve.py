"""Concurrency-curve gate: the recipe's headline table (users, aggregate tok/s, per-user tok/s, TTFT
p50/p95) and "48 users at 50 tok/s each".

One test per row of the lane's `curve.rows` in thresholds.yaml, so each users value is its own test
id (`test_curve_row[users=48]`). Each row: one warm pass at that batch shape (discarded: the first
hit is autotune), then `runs` measured runs after a prefix-cache flush, with fresh prompts per run.
A row fails when a bound is missed, when users exceed the server's seats (the boot log's cap and
the flag that raises it are in the failure; `allow_queueing: true` on the row accepts it), when
the workload cannot fit the KV pool, when the client was the bottleneck, when token counts
disagree, or when requests failed. Definitions: pytest_glmf/gates/curve/records.py.

Settings (`curve.settings`, each optional): max_tokens (384), runs (3), warmup (true), rate_per_s
(open loop), spread_max_pct (5), path (/v1/chat/completions), model, continuous_usage (false),
prompt_file (a briefing with '## ' sections, a path or a packaged fixture name; default
pytest_glmf/data/briefing.md), prompt_tokens (trim the prompt bodies to this many tokens of the server's own
tokenizer via /tokenize; the task paragraph is kept), lag_p99_max_s (0.002) and cpu_max_frac (0.85) for the client self-check. A row's own
`settings:` overrides them for that row. On the simulator with `time_scale` != 1 the measured
numbers are converted to recipe units (tok/s x scale, seconds / scale) before gating, and both are
recorded.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.curve.checks import CPU_MAX_FRAC, LAG_P99_MAX_S, describe_flags, row_gate_checks
from pytest_glmf.gates.curve.measure import summary as curve_summary
from pytest_glmf.gates.curve.records import knee
from pytest_glmf.gates.curve.runner import CurveSettings, Workload, run_rows
from pytest_glmf.gates.curve.table import curve_table, knee_sentence
from pytest_glmf.gates.curve.workload import fit_prompts, load_prompts
from pytest_glmf.gates.verdict import GATE_METRICS, failure_table

pytestmark = [pytest.mark.glmf_gate("curve"), pytest.mark.glmf_serial]

SETTING_KEYS = {"max_tokens", "runs", "warmup", "rate_per_s", "spread_max_pct", "path", "model",
                "continuous_usage", "prompt_file", "prompt_tokens", "first_token_timeout_s", "between_tokens_timeout_s",
                "lag_p99_max_s", "cpu_max_frac"}


def _curve_rows(config: pytest.Config) -> list[dict[str, Any]] | None:
    """The lane's curve rows at collection time (None: no lane selected). Unknown settings keys are
    a collection error here, before any server is launched (a GPU lane takes minutes to boot)."""
    from pytest_glmf.config.thresholds import load_thresholds
    from pytest_glmf.plugin.options import resolve_settings

    settings = resolve_settings(config)
    if settings.lane is None:
        return None
    thresholds = load_thresholds(settings.thresholds_file)
    section = thresholds.for_gate(settings.lane.name, "curve")
    rows = list(section.get("rows") or [])
    where = thresholds.source(settings.lane.name, "curve")
    for row in [{"users": None}] + rows:
        unknown = set(_options(section, row)) - SETTING_KEYS
        if unknown:
            at = f"{where}.settings" if row["users"] is None else f"{where} row users={row['users']}: settings"
            pytest.fail(f"{at}: unknown curve settings {sorted(unknown)}; known: {sorted(SETTING_KEYS)}", pytrace=False)
    return rows


def _options(section: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The lane's curve settings with the row's own `settings:` on top."""
    return {**(section.get("settings") or {}), **(row.get("settings") or {})}


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
    say = _progress(request.config)
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
    for key in GATE_METRICS["curve"]:
        value = row.get(key)
        if value is None or key == "spread_pct":
            continue
        out[key] = value * time_scale if "tok_s" in key else value / time_scale
    return out


def _progress(config: pytest.Config):
    """One line per run, live on the terminal (outside output capture: a curve takes minutes)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return None

    def say(line: str) -> None:
        if capman is None:
            reporter.write_line("  " + line)
            return
        with capman.global_and_fixture_disabled():
            reporter.write_line("  " + line)
    return say


def test_curve_row(curve_row, request, glmf_server, glmf_boot_facts, glmf_lane, glmf_thresholds, glmf_results,
                   record_property, curve_collected):
    if curve_row is None:
        pytest.skip(f"no curve rows for lane {glmf_lane.name!r} in {glmf_thresholds.source(glmf_lane.name, 'curve')}")
    opts = _options(glmf_thresholds.for_gate(glmf_lane.name, "curve"), curve_row)   # keys checked at collection
    users = int(curve_row["users"])
    try:
        prompts = load_prompts(opts.get("prompt_file"))
    except (OSError, UnicodeDecodeError) as exc:
        pytest.fail(f"{glmf_thresholds.source(glmf_lane.name, 'curve')}: settings.prompt_file: {exc}", pytrace=False)
    if opts.get("prompt_tokens"):
        # "a 2,400-token briefing" in the served model's own tokens, whatever its tokenizer
        try:
            prompts, counts = fit_prompts(glmf_server.base_url, prompts, int(opts["prompt_tokens"]), opts.get("model"))
        except ValueError as exc:
            pytest.fail(f"{glmf_thresholds.source(glmf_lane.name, 'curve')}: settings.prompt_tokens: {exc}", pytrace=False)
        record_property("curve.prompt_tokens", max(counts))
    workload = Workload(prompts=prompts, max_tokens=int(opts.get("max_tokens", 384)),
                        path=opts.get("path", "/v1/chat/completions"), model=opts.get("model"),
                        continuous_usage=bool(opts.get("continuous_usage", False)))
    settings = CurveSettings(users=[users], runs=int(opts.get("runs", 3)), warmup=bool(opts.get("warmup", True)),
                             rate_per_s=opts.get("rate_per_s"),
                             spread_max_pct=float(opts.get("spread_max_pct", 5.0)),
                             # the row's settings, else the lane's timeouts, else the defaults
                             first_token_timeout_s=float(opts.get("first_token_timeout_s",
                                                                  glmf_lane.timeouts.get("first_token_s", 600.0))),
                             between_tokens_timeout_s=float(opts.get("between_tokens_timeout_s",
                                                                     glmf_lane.timeouts.get("between_tokens_s", 60.0))),
                             lag_p99_max_s=float(opts.get("lag_p99_max_s", LAG_P99_MAX_S)),
                             cpu_max_frac=float(opts.get("cpu_max_frac", CPU_MAX_FRAC)))
    facts = glmf_boot_facts.to_dict()
    row = run_rows(glmf_server.base_url, workload, settings, facts, _progress(request.config))[0]

    scale = float(glmf_lane.time_scale) if glmf_lane.launcher == "sim" else 1.0
    gated = to_recipe_units(row, scale)
    gated["units"] = "recipe units" if scale != 1.0 else "measured"
    flags = describe_flags(row)
    summary = curve_summary({"rows": [gated]})["rows"][0]
    summary.update({"tokens_per_user": row["memory"]["tokens_per_user"], "flags": "; ".join(flags) or "ok",
                    "time_scale": scale, "measured": {k: row.get(k) for k in GATE_METRICS["curve"]}})
    glmf_results.record("curve", f"users={users}", summary)
    for key in ("aggregate_tok_s", "per_user_tok_s", "ttft_p50_s", "ttft_p95_s", "spread_pct", "seats"):
        record_property(f"curve.users{users}.{key}", gated.get(key))
    curve_collected.append(gated)

    bounds = {k: v for k, v in curve_row.items() if k not in ("users", "settings")}
    checks = row_gate_checks(gated, bounds, source=f"{glmf_thresholds.source(glmf_lane.name, 'curve')}[{users}]")
    table = curve_table([gated])
    unit_note = f" (simulator time scale {scale:g}: numbers in recipe units)" if scale != 1.0 else ""
    title = f"curve of lane {glmf_lane.name!r} @ {users} users{unit_note}"
    failed = [c for c in checks if not c.ok]
    if failed:
        pytest.fail(f"{title}: {len(failed)} threshold(s) missed\n{failure_table(failed)}\n\nthe row:\n{table}",
                    pytrace=False)
