"""The spec is the one home of a gate's words: every gate table's metric column heads are its
metrics' `column_label()`, and the JSON documents carry the spec's glossary, not a wording of their own."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_glmf.gates.acceptance import table as acceptance_table
from pytest_glmf.gates.agents import api as agents_api
from pytest_glmf.gates.agents import table as agents_table
from pytest_glmf.gates.boot import table as boot_table
from pytest_glmf.gates.boot.facts import BootFacts
from pytest_glmf.gates.curve import measure
from pytest_glmf.gates.curve import table as curve_table_module
from pytest_glmf.gates.curve.spec import SPEC as CURVE
from pytest_glmf.gates.curve.spec import CurveRowSettings
from pytest_glmf.gates.curve.table import TABLE_METRICS, curve_table
from pytest_glmf.gates.drift import table as drift_table
from pytest_glmf.gates.registry import GATES
from pytest_glmf.gates.spec import GateSpec, Metric
from pytest_glmf.gates.template import table as template_table
from pytest_glmf.gates.tools import table as tools_table
from pytest_glmf.load import LoadSettings, Workload
from pytest_glmf.text import fit_table, render_table


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
    doc = measure.curve_result("http://x", [], Workload(prompts=["p"]), LoadSettings(users=[1]))
    assert doc["definitions"] == CURVE.glossary()
    assert doc["definitions"]["definitions"] == list(CURVE.definitions)
    assert doc["definitions"]["metrics"]["ttft_p95_s"] == {"label": "TTFT p95 (s)", "unit": "s",
                                                           "doc": "time to first token, 95th percentile"}
    # no second wording left beside the tables
    assert not hasattr(curve_table_module, "DEFINITIONS") and not hasattr(agents_table, "DEFINITIONS")
    assert "SPEC.glossary()" in Path(agents_api.__file__).read_text()



def test_the_curve_definitions_say_the_self_checks_rule_and_where_seats_come_from():
    # the sentence every report prints under the curve: the verdict is the error bound against the
    # setting client_check decides by (lag and CPU decide nothing since the GPU issue), and seats
    # may be the server's word (/server_info) when the boot log has none
    text = " ".join(CURVE.definitions)
    assert "client_error_max_pct" in text and "client_error_max_pct" in {f.name for f in dataclasses.fields(CurveRowSettings)}
    assert "lagged" not in text and "% of a core" not in text
    assert "/server_info" in text

# -- every gate's table: a metric's column head is the spec's ------------------------------------------------

_DRIFT_ROW = {"mean_abs_dlogp": 0.1, "ci95": [0.09, 0.11], "median_abs_dlogp": 0.05, "p95_abs_dlogp": 0.3,
              "argmax_mismatch": 0.02, "kl_topk": 0.01, "self_check": {"exact": True}, "floor_abs_dlogp": 0.01,
              "excess_abs_dlogp": 0.09, "excess_ci95": [0.08, 0.1], "n_prompts": 40, "n_tokens": 5120,
              "answers_n": 8, "output_length_ratio": 1.1, "reasoning_length_ratio": 1.2, "content_length_ratio": 0.9,
              "runaway_share": 0.0, "greedy_agreement": 0.75, "finish_reason_changed": 0.0, "agreement_tokens": 32}

# gate -> (its table module, the tables it prints from a sample input, the heads the table itself
# writes: columns that are no metric of the gate). Capacity is left out while its probes and frontier
# tables are reshaped (the heads there are a probe's numbers and the search's, not capacity's metrics).
GATE_TABLES: dict[str, tuple[ModuleType, Callable[[], Any], set[str]]] = {
    "boot": (boot_table, lambda: boot_table.render_facts(BootFacts()), {"key", "value"}),
    "curve": (curve_table_module, lambda: curve_table_module.curve_table([]), {"users", "seats", "flags"}),
    "drift": (drift_table, lambda: drift_table.render_table({
        "reference": {"k": 20, "provenance": {"lane": "bf16"}}, "candidates": {"fp8": _DRIFT_ROW}}),
        {"quant (vs bf16)", "ci95 (prompts)", "self-check", "greedy answers", "median 1st diff"}),
    "acceptance": (acceptance_table, lambda: acceptance_table.render_result({
        "source": "metrics", "prompt_format": "chat", "classes": [
            {"class": "prose", "tok_s": 150.0, "accept_rate": 0.3, "accept_length": 2.1, "requests": 3, "errors": 0}]}),
        {"class", "per position", "recipe rate", "requests"}),   # per position: accept_pos1.. in one cell
    "tools": (tools_table, lambda: tools_table.failure_table({"results": [
        {"ok": False, "scenario": "weather", "repeat": 0, "expect": ["get_weather"],
         "answers": [{"error": "HTTP 500"}], "problems": ["request failed"]}]}),
        {"turn", "expected", "came back", "problems"}),
    "template": (template_table, lambda: template_table.difference_table(
        {"differences": {}, "errors": {"c2": "HTTP 400"}}),
        {"conversation", "first difference", "reference (⟦token⟧ differs)", "served"}),
    "agents": (agents_table, lambda: agents_table.agents_table({"turns": 8, "per_turn": []}),
               {"turn", "turns", "prompt tok p50", "cached tok p50", "cache hit", "tool calls", "errors"}),
}


def _heads(monkeypatch: pytest.MonkeyPatch, module: ModuleType, render: Callable[[], Any]) -> list[list[str]]:
    """The header of every table `render` prints, as the table module hands it to the renderer."""
    seen: list[list[str]] = []

    def spy_render(rows: list[list[str]], header: list[str] | None = None) -> str:
        seen.append(list(header or []))
        return render_table(rows, header)

    def spy_fit(header: list[str], body: list[list[str]], *args: Any, **kw: Any) -> str:
        seen.append(list(header))
        return fit_table(header, body, *args, **kw)
    for name, value in vars(module).copy().items():
        if value is render_table:
            monkeypatch.setattr(module, name, spy_render)
        elif value is fit_table:
            monkeypatch.setattr(module, name, spy_fit)
    render()
    return seen


def _marked(spec: GateSpec) -> GateSpec:
    """The spec with every metric's column word replaced by a mark naming the metric."""
    return dataclasses.replace(spec, metrics={m: dataclasses.replace(v, column=f"<{m}>") for m, v in spec.metrics.items()})


def test_every_gate_is_in_the_column_check_but_capacity():
    assert set(GATE_TABLES) == set(GATES) - {"capacity"}


@pytest.mark.parametrize("gate", GATE_TABLES)
def test_a_gate_tables_metric_column_heads_are_its_specs(gate, monkeypatch):
    """Each head that names a metric is the spec's column_label (a spec edit changes the table); every
    other head is one the test knows the table writes itself (a new metric column written by hand fails)."""
    module, render, written = GATE_TABLES[gate]
    spec = GATES[gate]
    with monkeypatch.context() as m:
        printed = _heads(m, module, render)
    assert printed, f"{gate}: no table printed"
    with monkeypatch.context() as m:
        if hasattr(module, "SPEC"):
            m.setattr(module, "SPEC", _marked(spec))
        marked = _heads(m, module, render)
    assert len(marked) == len(printed)
    for heads, marked_heads in zip(printed, marked):
        assert len(heads) == len(marked_heads), f"{gate}: {heads} vs {marked_heads}"
        for head, mark in zip(heads, marked_heads):
            names = [name for name in spec.metrics if f"<{name}>" in mark]
            if not names:
                assert head in written, (f"{gate}: column {head!r} is written by the table; a metric's column "
                                         f"takes its head from the spec (SPEC.column_label), any other is named "
                                         f"in this test")
                continue
            (name,) = names
            assert head == mark.replace(f"<{name}>", spec.column_label(name)), \
                f"{gate}: column {head!r} is not the spec's column_label of {name} ({spec.column_label(name)!r})"
            assert head not in written, f"{gate}: column {head!r} is listed as the table's own"
