"""The curve gate's public API: measure per-user tok/s, aggregate tok/s and TTFT at N users, and
judge the rows against bounds written like the thresholds file's.

    from pytest_glmf.gates.curve import assert_curve, measure_curve

    curve = measure_curve("http://127.0.0.1:30000", [8], prompt_file="support_prompt.md", max_tokens=256)
    print(curve[8].per_user_tok_s, curve[8].ttft_p95_s)
    assert_curve(curve, per_user_tok_s={"min": 40}, ttft_p95_s={"max": 1.0})    # inside a test

`measure_curve` needs no pytest (a script or notebook calls it the same way); in a test the
`glmf_curve` fixture calls it on the session's server with the lane's boot facts, timeouts and
simulator time scale, and records the rows in the session's result file. The ready-made suite
(`pytest_glmf/suites/test_curve.py`) is a user of exactly these two names.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.bounds import caller_source, checked_bounds, lane_phrase
from pytest_glmf.gates.curve.checks import row_gate_checks
from pytest_glmf.gates.curve.measure import curve_result, load_settings
from pytest_glmf.gates.curve.spec import DEFAULTS, SPEC, CurveRowSettings
from pytest_glmf.gates.curve.table import curve_table, knee_sentence
from pytest_glmf.gates.verdict import failed_checks, failure_message
from pytest_glmf.load import Progress, describe_flags, fit_prompts, knee, load_prompt_variants, run_rows, strip_records


@dataclass
class CurveRow:
    """One users value, measured: the medians over `runs` measured runs (after a discarded warm
    pass), in recipe units when the simulator ran at a time scale (`measured` keeps the raw ones).
    Definitions: `pytest_glmf/load/records.py`. `valid` is False when a run's open-loop
    sends were late, token counts disagreed or requests failed: then the numbers are not the
    server's, and `assert_curve` fails whatever the bounds. Each number is judged by its own
    error bound: one the client did not measure within `client_error_max_pct` is None, with the
    reason in `unmeasured` (it fails only a bound set on it); the row's others stand."""

    users: int
    seats: int | None                 # the server's effective max_running_requests (boot log)
    aggregate_tok_s: float | None
    per_user_tok_s: float | None      # median over users of each request's decode rate
    per_user_tok_s_p5: float | None   # the slowest users
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p95_s: float | None
    spread_pct: float | None          # run-to-run spread, larger of aggregate and per-user
    runs: int
    errors: int                       # failed requests over the measured runs
    valid: bool
    flags: list[str]                  # seats shared, KV pool overflow, numbers not measured, ...
    tokens_per_user: int | None       # the KV pool divided among the users (boot log)
    time_scale: float = 1.0
    measured: dict[str, Any] = field(default_factory=dict)   # the metrics in measured units
    lane: str | None = None           # set by the glmf_curve fixture (named in failures)
    detail: dict[str, Any] = field(default_factory=dict, repr=False)   # the runner's row: per-run numbers,
    # seat, memory and client checks, per-request records
    unmeasured: dict[str, str] = field(default_factory=dict)   # metric -> why the client did not measure it

    def table(self) -> str:
        """The recipe's table, this row only."""
        return curve_table([self.detail], lane=self.lane)

    def to_record(self) -> dict[str, Any]:
        """What the result file keeps for this row (the per-request records left out)."""
        out = strip_records(self.detail)
        # the flags with the client's settings under this row's lane (set by the fixture after measuring)
        flags = describe_flags(self.detail, lane=self.lane) if self.lane else self.flags
        out.update({"tokens_per_user": self.tokens_per_user, "flags": "; ".join(flags) or "ok",
                    "time_scale": self.time_scale, "measured": dict(self.measured)})
        return out


@dataclass
class CurveResult:
    """Every row measured by one `measure_curve` call (or rows of several, put together for one
    table: `CurveResult(rows)`); `result[48]` is the row at 48 users."""

    rows: list[CurveRow]
    url: str = ""
    settings: CurveRowSettings = DEFAULTS
    prompt_tokens: int | None = None     # the longest prompt after fitting (settings.prompt_tokens)
    lane: str | None = None              # set by the glmf_curve fixture (named in failures)
    run: dict[str, Any] = field(default_factory=dict, repr=False)   # the runner's answer, as `glmf curve
    # --json` writes it (measure.curve_result: raw rows with their records, knee, definitions, workload)

    def __getitem__(self, users: int) -> CurveRow:
        for row in self.rows:
            if row.users == users:
                return row
        raise KeyError(f"no row at {users} users; measured: {[r.users for r in self.rows]}")

    @property
    def knee(self) -> dict[str, Any]:
        """Was aggregate tok/s still climbing at the last row? (records.knee)"""
        return knee([r.detail for r in self.rows])

    def table(self) -> str:
        return curve_table([r.detail for r in sorted(self.rows, key=lambda r: r.users)], lane=self.lane)

    def knee_sentence(self) -> str:
        return knee_sentence(self.knee)


def _settings(settings: CurveRowSettings | None, overrides: Mapping[str, Any]) -> CurveRowSettings:
    """The gate's settings with keyword overrides, checked like a thresholds file's `settings:`."""
    base = dataclasses.asdict(settings or DEFAULTS)
    given = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in overrides.items()}
    return SPEC.build(base, "settings", given or None)


def to_recipe_units(row: Mapping[str, Any], time_scale: float) -> dict[str, Any]:
    """The simulator at time scale s runs 1/s times faster: tok/s x s and seconds / s are the
    recipe's units (spread is a ratio and stays)."""
    out = dict(row)
    if time_scale == 1.0:
        return out

    def scaled(key: str, value: Any) -> Any:
        return value if value is None else value * time_scale if "tok_s" in key else value / time_scale

    for key in SPEC.metrics:
        if key != "spread_pct":
            out[key] = scaled(key, row.get(key))
    # the client's error intervals (what decides a bound on a number it did not measure), likewise
    out["client_error"] = {k: {**b, **{e: scaled(k, b.get(e)) for e in ("value", "lo", "hi", "bound")}}
                           if isinstance(b, dict) else b for k, b in (row.get("client_error") or {}).items()}
    return out


def _row(raw: dict[str, Any], time_scale: float) -> CurveRow:
    gated = to_recipe_units(raw, time_scale)
    gated["units"] = "recipe units" if time_scale != 1.0 else "measured"
    errors = sum(r.get("errors", 0) for r in raw.get("per_run", []))
    return CurveRow(
        users=int(raw["users"]), seats=raw.get("seats"),
        aggregate_tok_s=gated.get("aggregate_tok_s"), per_user_tok_s=gated.get("per_user_tok_s"),
        per_user_tok_s_p5=gated.get("per_user_tok_s_p5"), ttft_p50_s=gated.get("ttft_p50_s"),
        ttft_p95_s=gated.get("ttft_p95_s"), ttft_p99_s=gated.get("ttft_p99_s"),
        itl_p50_s=gated.get("itl_p50_s"), itl_p95_s=gated.get("itl_p95_s"), spread_pct=gated.get("spread_pct"),
        runs=int(raw.get("runs", 0)), errors=errors, valid=bool(raw.get("valid")), flags=describe_flags(raw),
        tokens_per_user=(raw.get("memory") or {}).get("tokens_per_user"), time_scale=time_scale,
        measured={k: raw.get(k) for k in SPEC.metrics}, detail=gated, unmeasured=dict(raw.get("unmeasured") or {}))


def row_record(raw: dict[str, Any], time_scale: float = 1.0) -> dict[str, Any]:
    """A runner row (`glmf curve --json`'s) as the result file keeps it (`CurveRow.to_record`)."""
    return _row(raw, time_scale).to_record()


def measure_curve(url: str | Sequence[str], users: int | Sequence[int], *, settings: CurveRowSettings | None = None,
                  boot_facts: Any = None, timeouts: Mapping[str, float] | None = None, time_scale: float = 1.0,
                  progress: Progress | None = None, on_row: Callable[[dict[str, Any]], None] | None = None,
                  **overrides: Any) -> CurveResult:
    """Measure the server at `url` at each users value (one discarded warm pass per value, then
    `runs` measured runs with distinct prompts, each after a prefix-cache flush). `url`: one
    server or router, or a list of replicas' URLs (streams dealt round-robin over them).

    Keyword arguments are the curve's settings (`gates/curve/spec.py`: `max_tokens`, `runs`,
    `prompt_file`, `prompt_tokens`, `rate_per_s`, `warmup`, `model`, `path`, ...), on top of
    `settings` (default: the gate's defaults) and checked like a thresholds file's: an unknown
    name or a value out of range raises ConfigError. `boot_facts` (a BootFacts or its dict) gives
    seats and KV pool for the row checks; `timeouts` a lane's `timeouts` (first_token_s,
    between_tokens_s) for what the settings leave unset; `time_scale` the simulator's, to report
    recipe units; `progress` is called with each progress line, `on_row` with each runner row as
    it finishes (what a Ctrl-C keeps). Raises ValueError naming the setting when the prompt file cannot be read or
    `prompt_tokens` is set and the server has no /tokenize; WorkerError when a client worker
    process failed."""
    opts = _settings(settings, overrides)
    values = [users] if isinstance(users, int) else list(users)
    if not values or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in values):
        raise ConfigError(f"measure_curve(): users must be a positive integer or a list of them, got {users!r}")
    try:
        prompts = load_prompt_variants(opts.prompt_file)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"prompt_file: {exc}") from None
    longest = None
    if opts.prompt_tokens:
        # "a 2,400-token briefing" in the served model's own tokens, whatever its tokenizer
        try:
            first = url if isinstance(url, str) else url[0]
            prompts, counts = fit_prompts(first, prompts, opts.prompt_tokens, opts.model)
        except ValueError as exc:
            raise ValueError(f"prompt_tokens: {exc}") from None
        longest = max(counts)
    # a BootFacts, or its dict (several replicas: endpoints.replica_facts, seats summed)
    facts = boot_facts.to_dict() if hasattr(boot_facts, "to_dict") else dict(boot_facts or {})
    load = load_settings(opts, values, timeouts)
    workload = load.workload(prompts, prompt_tokens=longest)
    raw_rows = run_rows(url, workload, load, facts, progress, on_row)
    return CurveResult(rows=[_row(r, float(time_scale)) for r in raw_rows],
                       url=url if isinstance(url, str) else ", ".join(url), settings=opts,
                       prompt_tokens=longest, run=curve_result(url, raw_rows, workload, load))


def assert_curve(curve: CurveResult | CurveRow, *, source: str | None = None, lane: Any = None,
                 **bounds: Any) -> None:
    """Fail the test unless every row meets `bounds` (metric={"min": x} and/or {"max": y}, the
    thresholds file's row keys; `allow_queueing=True` accepts users beyond the seats) and is a
    valid measurement of the server at that many users (seats, KV pool, client health, token
    counts, failed requests). The failure is the suites' table with the knob to turn, then the
    row. `source` names where the bounds come from (default: the calling test's file:line)."""
    __tracebackhide__ = True
    rows = curve.rows if hasattr(curve, "rows") else [curve]
    lane = lane if lane is not None else getattr(curve, "lane", None)
    if source is None:
        source = caller_source()
    bounds = checked_bounds("curve", bounds, "assert_curve", ("allow_queueing",), source)
    messages = []
    for row in rows:
        checks = row_gate_checks(row.detail, bounds, source=source, lane=lane)
        unit_note = f" (simulator time scale {row.time_scale:g}: numbers in recipe units)" if row.time_scale != 1.0 else ""
        title = f"curve{lane_phrase(lane)} @ {row.users} users{unit_note}"
        failed = failed_checks(checks)
        if failed:
            messages.append(failure_message(failed, title, f"the row:\n{row.table()}"))
    if messages:
        pytest.fail("\n\n".join(messages), pytrace=False)
