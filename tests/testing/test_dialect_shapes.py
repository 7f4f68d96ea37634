"""The dialect check outside the real stage: shape/diff on known inputs, a renamed key named by the
diff, and the simulator held to the shapes captured from the released SGLang 0.5.23
(data/sglang-0.5.23-shapes.json, refreshed by tests/real_sglang/test_dialect.py)."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from pytest_glmf.testing import dialect
from pytest_glmf.testing.dialect_capture import capture_sim

STORED = Path(__file__).parent / "data" / "sglang-0.5.23-shapes.json"
REPO = Path(__file__).resolve().parents[2]


def stored() -> dict[str, dict[str, set[str]]]:
    return {k: dialect.from_json(v) for k, v in json.loads(STORED.read_text()).items()}


# ------------------------------------------------------------------------------------------------
# shape and diff on known inputs


def test_shape_paths_and_types_at_every_depth() -> None:
    obj = {"meta_info": {"cached_tokens": 0, "finish_reason": {"type": "length", "length": 2},
                         "output_token_logprobs": [[-0.5, 7, None], [-1.0, 8, None]]},
           "choices": [{"delta": {"content": "a"}}, {"delta": {"content": None}}], "ok": True}
    assert dialect.shape(obj) == {
        ".": {"object"}, "meta_info": {"object"}, "meta_info.cached_tokens": {"number"},
        "meta_info.finish_reason": {"object"}, "meta_info.finish_reason.type": {"str"},
        "meta_info.finish_reason.length": {"number"}, "meta_info.output_token_logprobs": {"array"},
        "meta_info.output_token_logprobs[]": {"array"}, "meta_info.output_token_logprobs[][]": {"number", "null"},
        "choices": {"array"}, "choices[]": {"object"}, "choices[].delta": {"object"},
        "choices[].delta.content": {"str", "null"}, "ok": {"bool"}}
    # 0 and 0.0 are one JSON type
    assert dialect.shape({"x": 0}) == dialect.shape({"x": 0.5})


def test_diff_names_missing_extra_and_retyped_paths() -> None:
    real = dialect.shape({"meta_info": {"cached_tokens": 3, "id": "a"}, "text": "t"})
    sim = dialect.shape({"meta_info": {"id": 1, "time_scale": 1}, "text": "t"})
    assert dialect.diff(real, sim, surface="generate") == [
        "generate meta_info.cached_tokens: missing in the simulator (real number)",
        "generate meta_info.id: real str, sim number",
        "generate meta_info.time_scale: the simulator sends it, the real SGLang does not (sim number)"]
    assert dialect.diff(real, real, surface="generate") == []


def test_diff_subset_mode_required_keys_and_allow() -> None:
    real = dialect.shape({"a": 1, "b": None, "c": {"d": "x"}, "v": "0.5.23"})
    sim = dialect.shape({"a": 2, "b": None})
    # subset: what the sim sends is in the real one; the real's extra keys are fine ...
    assert dialect.diff(real, sim, mode="subset") == []
    # ... except the ones the plugin reads
    assert dialect.diff(real, sim, surface="server_info", mode="subset", required=("v", "a")) == [
        "server_info v: read by the plugin, missing in the simulator"]
    # a type the real one never sends fails in subset mode too; `allow` skips a path and its subtree
    retyped = dialect.shape({"a": "2", "c": {"d": 1}})
    assert dialect.diff(real, retyped, mode="subset") == ["a: real number, sim str", "c.d: real str, sim number"]
    assert dialect.diff(real, retyped, mode="subset", allow={"c": "why", "a": "why"}) == []
    with pytest.raises(ValueError, match="'exact' or 'subset'"):
        dialect.diff(real, sim, mode="loose")


def test_metric_labels_fold_histograms_and_drop_le() -> None:
    text = ("# TYPE sglang:ttft_seconds histogram\n"
            'sglang:ttft_seconds_bucket{model_name="m",le="+Inf"} 1.0\n'
            'sglang:ttft_seconds_sum{model_name="m"} 0.2\n'
            'sglang:ttft_seconds_count{model_name="m"} 1.0\n'
            "# TYPE sglang:num_running_reqs gauge\n"
            'sglang:num_running_reqs{model_name="m",tp_rank="0"} 0.0\n'
            'sglang:generation_tokens_total{engine_type="unified",is_streaming="true",model_name="m"} 5.0\n')
    assert dialect.metric_labels(text) == {"sglang:ttft_seconds": {"model_name"},
                                           "sglang:num_running_reqs": {"model_name", "tp_rank"},
                                           "sglang:generation_tokens_total": {"engine_type", "is_streaming",
                                                                              "model_name"}}
    real = {"sglang:num_running_reqs": {"model_name", "tp_rank"}, "sglang:x": {"a"}}
    assert dialect.metrics_diff(real, {"sglang:num_running_reqs": {"model_name"}, "sglang:y": set()},
                                ("sglang:num_running_reqs", "sglang:num_queue_reqs")) == [
        "metrics sglang:num_queue_reqs: read by the plugin, missing in both",
        "metrics sglang:num_running_reqs: real labels ['model_name', 'tp_rank'], sim ['model_name']",
        "metrics sglang:y: the simulator sends it, the real SGLang does not"]


def test_plugin_metrics_are_every_sglang_name_the_plugin_reads() -> None:
    """The list the metric check holds the simulator to is every `sglang:` metric name in the
    plugin's code outside the simulator (and this module)."""
    names = set()
    for path in (REPO / "pytest_glmf").rglob("*.py"):
        rel = path.relative_to(REPO / "pytest_glmf").as_posix()
        if rel.startswith(("sim/", "testing/")):
            continue
        names |= set(re.findall(r'"(sglang:[a-z_]+)"', path.read_text()))
    assert set(dialect.plugin_metrics()) == names


# ------------------------------------------------------------------------------------------------
# the stored real shapes


def renamed(shape: dict[str, set[str]], old: str, new: str) -> dict[str, set[str]]:
    """`shape` with the key at path `old` (and its subtree) renamed to `new`."""
    def move(p: str) -> str:
        return new + p[len(old):] if p == old or p.startswith((old + ".", old + "[]")) else p
    return {move(p): t for p, t in shape.items()}


def test_a_key_renamed_in_the_simulator_fails_naming_the_key() -> None:
    """The issue's done-when: one key of a real answer renamed in the simulator's answer makes the
    dialect check fail, naming the key on both sides."""
    real = stored()
    sim = copy.deepcopy(real)
    sim["generate_greedy"] = renamed(sim["generate_greedy"], "meta_info.cached_tokens", "meta_info.cached_token_count")
    assert dialect.compare_captures(real, real) == []
    assert dialect.compare_captures(real, sim) == [
        "generate_greedy meta_info.cached_token_count: the simulator sends it, the real SGLang does not (sim number)",
        "generate_greedy meta_info.cached_tokens: missing in the simulator (real number)"]
    # a chunk key, a label name
    sim = copy.deepcopy(real)
    sim["chat_stream"] = renamed(sim["chat_stream"], "[].choices[].delta.reasoning_content",
                                 "[].choices[].delta.reasoning")
    sim["metrics"]["sglang:num_running_reqs"] = {"model_name"}
    lines = dialect.compare_captures(real, sim)
    assert "chat_stream [].choices[].delta.reasoning_content: missing in the simulator (real null)" in lines
    assert any(ln.startswith("metrics sglang:num_running_reqs: real labels") for ln in lines), lines


def test_the_stored_shapes_hold_every_surface() -> None:
    real = stored()
    assert set(real) == set(dialect.surfaces()) | {"metrics"}
    assert real["health_starting"] == {"<status>": {"503"}, "<body>": {"empty"}}
    assert real["ready"]["<status>"] == {"200"}
    assert real["tools_cut"]["choices[].message.content"] == {"str"}      # a cut call comes back as text
    for key in dialect.SERVER_INFO_READ:
        assert key in real["server_info"], key
    assert set(dialect.plugin_metrics()) <= set(real["metrics"])


def test_the_simulator_speaks_the_stored_sglang_0_5_23_dialect() -> None:
    """The simulator booted with the real stage's flags answers the same requests in the shapes the
    released SGLang answered them (one line per difference, naming the surface and key)."""
    lines = dialect.compare_captures(stored(), capture_sim())
    assert not lines, "the simulator differs from SGLang 0.5.23:\n" + "\n".join(lines)
