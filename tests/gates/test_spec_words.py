"""The spec is the one home of a gate's words: the curve table's column heads are its metrics'
`column_label()`, and the JSON documents carry the spec's glossary, not a wording of their own."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_glmf.gates.agents import api as agents_api
from pytest_glmf.gates.agents import table as agents_table
from pytest_glmf.gates.curve import measure
from pytest_glmf.gates.curve import table as curve_table_module
from pytest_glmf.gates.curve.runner import CurveSettings, Workload
from pytest_glmf.gates.curve.spec import SPEC as CURVE
from pytest_glmf.gates.curve.table import TABLE_METRICS, curve_table
from pytest_glmf.gates.spec import Metric


def test_the_curve_table_heads_its_columns_with_the_specs_words(monkeypatch):
    header = curve_table([]).splitlines()[0]
    assert [h.strip() for h in header.split("|")] == [
        "users", "aggregate tok/s", "per-user tok/s", "p5 tok/s", "TTFT p50 s", "TTFT p95 s", "spread", "seats",
        "flags"]
    # a new word in the spec is the table's new word
    renamed = dict(CURVE.metrics, ttft_p95_s=dataclasses.replace(CURVE.metrics["ttft_p95_s"], column="TTFT p95 (s)"))
    monkeypatch.setattr(curve_table_module, "SPEC", dataclasses.replace(CURVE, metrics=renamed))
    assert "TTFT p95 (s)" in curve_table([]).splitlines()[0]
    assert set(TABLE_METRICS) <= set(CURVE.metrics)


def test_a_metric_without_a_column_word_is_headed_by_its_axis_label():
    assert Metric("x_s", "lower", "s", label="the x").column_label() == "the x (s)"
    assert Metric("x_s", "lower", "s", column="x s").column_label() == "x s"


def test_the_json_definitions_are_the_specs_glossary():
    doc = measure.curve_result("http://x", [], Workload(prompts=["p"]), CurveSettings(users=[1]))
    assert doc["definitions"] == CURVE.glossary()
    assert doc["definitions"]["definitions"] == list(CURVE.definitions)
    assert doc["definitions"]["metrics"]["ttft_p95_s"] == {"label": "TTFT p95 (s)", "unit": "s",
                                                           "doc": "time to first token, 95th percentile"}
    # no second wording left beside the tables
    assert not hasattr(curve_table_module, "DEFINITIONS") and not hasattr(agents_table, "DEFINITIONS")
    assert "SPEC.glossary()" in Path(agents_api.__file__).read_text()
