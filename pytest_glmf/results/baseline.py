"""Regressions against a stored run: direction-aware, tolerance- and spread-aware comparisons.

A baseline is an earlier session's result file (results/recorder.py). Every gate records its numbers as
`gates[gate][key] = {metric: value, ..., "spread_pct": s}`; the metric names and their direction
come from each gate's declaration (`gates/<gate>/spec.py`) (throughput and acceptance: lower is worse; latency and drift:
higher is worse). A change counts as a regression only when it is worse than the allowed change:

    allowed % = max(tolerance rel_pct, baseline spread %, current spread %)   (per metric when recorded)
    allowed   = max(allowed % of |baseline|, tolerance abs)

so a difference inside the run-to-run spread recorded in either run is never called a regression
(pytest-benchmark's compare-fail knows one direction and no spread; this knows both).

Tolerances come from thresholds.yaml: `lanes.<lane>.baseline: {rel_pct: 5, abs: 0, metrics:
{ttft_p95_s: {rel_pct: 10, abs: 0.05}}}`; the defaults below apply otherwise (5 %, and for
latencies at least 5 ms).

A number the new run declares not measured (None, with the reason in the entry's `unmeasured`:
the curve's self-check could not vouch for it within its error bound) is neither a regression nor a
pass: it is shown "not measured (reason)" and not counted among the compared metrics. A number the
entry lacks without a reason is "missing", a regression.
"""
from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_glmf.gates.registry import metric_directions
from pytest_glmf.gates.verdict import note_evaluated
from pytest_glmf.text import WIDTH, fit_table, fmt, render_table

DEFAULT_REL_PCT = 5.0
# Latencies (metrics in seconds) also get an absolute floor: a few milliseconds of client/OS
# scheduling jitter is not a regression, whatever the relative change of a tiny TTFT.
DEFAULT_ABS_S = 0.005

# Provenance keys whose difference makes a comparison suspect (other GPU, other weights, ...).
MACHINE_KEYS = ("lane", "gpu_name", "gpu_count", "gpu_driver", "model_revision", "model_bytes", "engine",
                "engine_version", "launcher", "time_scale")


class BaselineError(ValueError):
    """The baseline file cannot be used (missing, not JSON, another schema version)."""


@dataclass
class Tolerance:
    rel_pct: float = DEFAULT_REL_PCT
    abs: float = 0.0

    @classmethod
    def for_metric(cls, settings: Mapping[str, Any] | None, metric: str) -> "Tolerance":
        settings = settings or {}
        per = (settings.get("metrics") or {}).get(metric) or {}
        default_abs = DEFAULT_ABS_S if metric.endswith("_s") else 0.0
        return cls(rel_pct=float(per.get("rel_pct", settings.get("rel_pct", DEFAULT_REL_PCT))),
                   abs=float(per.get("abs", settings.get("abs", default_abs))))


@dataclass
class Comparison:
    gate: str
    key: str
    metric: str
    baseline: float
    now: float | None
    allowed: float           # absolute amount the metric may worsen by
    allowed_pct: float
    direction: str           # "higher" | "lower" is better
    setup_changes: tuple[str, ...] = ()   # what the entries' recorded `setup` says changed (draft settings)
    unmeasured: str = ""     # why the new run did not measure it (its entry's `unmeasured`); then not compared

    @property
    def compared(self) -> bool:
        """A verdict was given: False where the new run declared the metric not measured."""
        return not self.unmeasured

    @property
    def change(self) -> float | None:
        return None if self.now is None else self.now - self.baseline

    @property
    def change_pct(self) -> float | None:
        if self.change is None or self.baseline == 0:
            return None
        return self.change / abs(self.baseline) * 100

    @property
    def worse_by(self) -> float | None:
        """How much worse than the baseline (positive = worse), in the metric's units."""
        if self.change is None:
            return None
        return -self.change if self.direction == "higher" else self.change

    @property
    def regressed(self) -> bool:
        if not self.compared:
            return False
        return self.now is None or (self.worse_by is not None and self.worse_by > self.allowed + 1e-12)

    def row(self) -> list[str]:
        pct = self.change_pct
        word = "drop" if self.direction == "higher" else "rise"
        changed = f"; changed: {', '.join(self.setup_changes)}" if self.setup_changes else ""
        allowed = f"{word} <= {fmt(self.allowed)} ({self.allowed_pct:.1f} %){changed}"
        if not self.compared:
            change, allowed = f"not measured ({self.unmeasured})", "not compared"
        elif self.change is None:
            change = "missing"
        else:
            change = f"{self.change:+.4g}" + (f" ({pct:+.1f} %)" if pct is not None else "")
        return [f"{self.gate}.{self.metric} [{self.key}]", fmt(self.baseline), fmt(self.now), change, allowed]


def load_baseline(path: str | Path, schema: int) -> dict[str, Any]:
    """Read a result file to compare against; refuse another schema version with a clear message."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise BaselineError(f"{p}: baseline file not found") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{p}: not a readable JSON result file ({exc})") from None
    if not isinstance(doc, dict) or "gates" not in doc:
        raise BaselineError(f"{p}: not a pytest-glmf result file (no 'gates' section)")
    if doc.get("schema") != schema:
        raise BaselineError(f"{p}: result schema {doc.get('schema')!r}, this plugin reads schema {schema}; "
                            "use the result file of a run made with this version as --glmf-baseline")
    return doc


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):
        return None
    return float(x)


def spread_of(entry: Mapping[str, Any], metric: str) -> float | None:
    """The run-to-run spread of this metric when the gate recorded one per metric
    (`spread_by_metric_pct`), else the entry's overall `spread_pct`."""
    per = entry.get("spread_by_metric_pct")
    if isinstance(per, Mapping) and _number(per.get(metric)) is not None:
        return _number(per.get(metric))
    return _number(entry.get("spread_pct"))


def compare_entry(gate: str, key: str, now: Mapping[str, Any], base: Mapping[str, Any],
                  tolerance: Mapping[str, Any] | None = None) -> list[Comparison]:
    """Compare the metrics present in the baseline entry with the current entry of (gate, key).
    An entry may record the `setup` its numbers were measured under (the acceptance gate: the
    drafter's settings, `{"draft": {...}}`); what differs is named beside each comparison."""
    out = []
    changes = tuple(setup_changes(base.get("setup"), now.get("setup")))
    said = now.get("unmeasured")
    unmeasured: Mapping[str, Any] = said if isinstance(said, Mapping) else {}
    for metric, direction in metric_directions(gate).items():
        if metric == "spread_pct":
            continue  # the spread is the noise yardstick, not a figure of merit
        b = _number(base.get(metric))
        if b is None:
            continue
        spreads = [s for s in (spread_of(base, metric), spread_of(now, metric)) if s is not None]
        tol = Tolerance.for_metric(tolerance, metric)
        allowed_pct = max([tol.rel_pct, *spreads])
        allowed = max(abs(b) * allowed_pct / 100, tol.abs)
        why = unmeasured.get(metric) if _number(now.get(metric)) is None else None
        out.append(Comparison(gate, key, metric, b, _number(now.get(metric)), allowed, allowed_pct, direction,
                              changes, str(why) if why else ""))
    return out


def setup_changes(base: Any, now: Any) -> list[str]:
    """`{"draft": {"num_speculative_tokens": 4}}` then `{... 2}` -> ["draft num_speculative_tokens 4 -> 2"]."""
    if not isinstance(base, Mapping) or not isinstance(now, Mapping):
        return []
    out = []
    for part in sorted(set(base) | set(now)):
        b, n = base.get(part) or {}, now.get(part) or {}
        if isinstance(b, Mapping) and isinstance(n, Mapping):
            out += [f"{part} {k} {b.get(k, '(unset)')} -> {n.get(k, '(unset)')}"
                    for k in sorted(set(b) | set(n)) if b.get(k) != n.get(k)]
    return out


def compare_results(now: Mapping[str, Any], base: Mapping[str, Any],
                    tolerance: Mapping[str, Any] | None = None) -> list[Comparison]:
    """Every comparable (gate, key, metric) of two result documents."""
    out = []
    for gate, entries in (base.get("gates") or {}).items():
        for key, entry in (entries or {}).items():
            cur = ((now.get("gates") or {}).get(gate) or {}).get(key)
            if isinstance(entry, dict) and isinstance(cur, dict):
                out.extend(compare_entry(gate, key, cur, entry, tolerance))
    return out


def machine_differences(now: Mapping[str, Any], base: Mapping[str, Any]) -> list[str]:
    """Provenance differences that make a comparison apples-to-oranges (shown loudly, not failed)."""
    pn, pb = now.get("provenance") or {}, base.get("provenance") or {}
    diffs = []
    for k in MACHINE_KEYS:
        if k in pn and k in pb and pn[k] != pb[k]:
            diffs.append(f"{k}: baseline {pb[k]!r}, now {pn[k]!r}")
    return diffs


def regression_table(comparisons: Iterable[Comparison]) -> str:
    """metric | baseline | now | change | allowed. With a metric not measured, made to fit 120 columns:
    a reason too long for its row goes under the table ("not measured note 1")."""
    comparisons = list(comparisons)
    header, rows = ["metric", "baseline", "now", "change", "allowed"], [c.row() for c in comparisons]
    table = render_table(rows, header)
    if all(c.compared for c in comparisons) or max(map(len, table.splitlines())) <= WIDTH:
        return table
    for c, row in zip(comparisons, rows):
        if not c.compared:
            row[3] = f"not measured [{c.unmeasured}]"    # fit_table's "value [note]": the value stays
    return fit_table(header, rows)


def comparison_summary(comparisons: Sequence[Comparison]) -> str:
    """"1 regression(s) in 4 compared metrics", and how many the new run did not measure (not
    compared, so neither a regression nor a pass): "; 1 not measured (not compared)"."""
    compared = [c for c in comparisons if c.compared]
    unmeasured = len(comparisons) - len(compared)
    return (f"{sum(c.regressed for c in compared)} regression(s) in {len(compared)} compared metrics"
            + (f"; {unmeasured} not measured (not compared)" if unmeasured else ""))


def regression_message(comparisons: Iterable[Comparison], baseline_path: str | Path = "") -> str | None:
    """The failure text for the regressed metrics (None when nothing regressed), with the metrics
    the new run did not measure after them. Each comparison made is a verdict given, counted as a
    check (plugin/verified.py); a metric not measured is not."""
    comparisons = list(comparisons)
    note_evaluated(sum(c.compared for c in comparisons))
    bad = [c for c in comparisons if c.regressed]
    if not bad:
        return None
    label = str(baseline_path)
    src = "" if not label else f" ({label})" if label.startswith("history:") else f" (baseline: {label})"
    unmeasured = [c for c in comparisons if not c.compared]
    return f"{len(bad)} regression(s) against the baseline{src}\n{regression_table(bad + unmeasured)}"


def numeric_metrics(gate: str, data: Mapping[str, Any]) -> dict[str, float]:
    """The gate's known metrics present in a recorded entry (for JUnit properties and compares)."""
    out = {}
    for metric in metric_directions(gate):
        v = _number(data.get(metric)) if isinstance(data, Mapping) else None
        if v is not None:
            out[metric] = v
    return out


def compare_records(records: Iterable[tuple[str, str, Any]], baseline: Mapping[str, Any],
                    tolerance_for: Any = lambda gate: None) -> list[Comparison]:
    """Compare what one test recorded, (gate, key, data) triples, with the baseline's entries of
    the same (gate, key). Entries the baseline does not have are new, not regressions."""
    out = []
    for gate, key, data in records:
        entry = ((baseline.get("gates") or {}).get(gate) or {}).get(key)
        if isinstance(entry, dict) and isinstance(data, Mapping):
            out.extend(compare_entry(gate, key, data, entry, tolerance_for(gate)))
    return out


def median_baseline(values: Mapping[tuple[str, str, str], Sequence[tuple[float, float | None]]],
                    label: str, runs: Sequence[Mapping[str, Any]],
                    provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A baseline document made of several earlier runs (the history store's last K passing runs):
    per (gate, key, metric) the median of their values, and as its spread the runs' range around
    that median, (max - min) / |median| in % (the gates' own definition of spread), so
    `compare_entry` allows at least the change those runs showed among themselves. A metric seen in
    one run only keeps the spread that run recorded. `values` maps (gate, key, metric) to
    (value, recorded spread %) per run; `runs` (which runs, for the report) and `label` (one line
    saying how the baseline was made) travel in the document's `made_of` section."""
    gates: dict[str, dict[str, Any]] = {}
    for (gate, key, metric), pairs in values.items():
        vals = [v for v, _ in pairs]
        if not vals:
            continue
        mid = statistics.median(vals)
        if len(vals) >= 2:
            spread = (max(vals) - min(vals)) / abs(mid) * 100 if mid else None
        else:
            spread = pairs[0][1]
        entry = gates.setdefault(gate, {}).setdefault(key, {"spread_by_metric_pct": {}})
        entry[metric] = mid
        if spread is not None:
            entry["spread_by_metric_pct"][metric] = spread
    return {"gates": gates, "provenance": dict(provenance or {}),
            "made_of": {"label": label, "runs": [dict(r) for r in runs]}}


def baseline_label(doc: Mapping[str, Any], path: str | Path | None = None) -> str:
    """How a baseline document was made, for failure messages and reports: the label of a baseline
    made from history (which runs), else the file it came from."""
    made = doc.get("made_of") if isinstance(doc.get("made_of"), Mapping) else None
    if made and made.get("label"):
        return str(made["label"])
    return str(path or doc.get("session_id") or "")
