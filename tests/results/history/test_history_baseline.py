"""Baselines from history: the median of the last K passing runs on the same lane, GPU, model
revision and engine, their spread as the allowed noise, and a label naming the runs."""
from __future__ import annotations

import pytest

from pytest_glmf.results.baseline import baseline_label, compare_records, median_baseline, regression_message
from pytest_glmf.results.history import open_store
from pytest_glmf.results.history.queries import history_baseline
from pytest_glmf.results.history.schema import LaneKey

KEY = LaneKey("batch", "NVIDIA GB300 x1", "rev1", "sglang")


def test_median_and_spread_of_several_runs() -> None:
    doc = median_baseline({("curve", "users=48", "per_user_tok_s"): [(50.0, 1.0), (52.0, 1.0), (49.0, 2.0)],
                           ("curve", "users=48", "ttft_p95_s"): [(0.8, 3.0)]}, "label", [])
    entry = doc["gates"]["curve"]["users=48"]
    assert entry["per_user_tok_s"] == 50.0 and entry["spread_by_metric_pct"]["per_user_tok_s"] == pytest.approx(6.0)
    assert entry["ttft_p95_s"] == 0.8 and entry["spread_by_metric_pct"]["ttft_p95_s"] == 3.0   # one run: its own
    assert baseline_label(doc) == "label" and baseline_label({"session_id": "x"}, "b.json") == "b.json"


def test_the_runs_spread_widens_the_allowed_change() -> None:
    """Runs scattered by 8 %: a 7 % drop is noise for them, though beyond the 5 % tolerance."""
    doc = median_baseline({("curve", "users=48", "per_user_tok_s"): [(48.0, 0.5), (50.0, 0.5), (52.0, 0.5)]}, "l", [])
    (c,) = compare_records([("curve", "users=48", {"per_user_tok_s": 46.5})], doc)
    assert c.allowed_pct == pytest.approx(8.0) and not c.regressed
    (c,) = compare_records([("curve", "users=48", {"per_user_tok_s": 45.0})], doc)
    assert c.regressed


def test_history_5_picks_the_last_5_passing_runs_of_the_same_lane_gpu_model_and_engine(location, make_doc) -> None:
    with open_store(location) as store:
        for i in range(8):                                    # 8 good nightly runs, tok/s 40..47
            store.add_run(make_doc(i, {"per_user_tok_s": 40.0 + i}))
        store.add_run(make_doc(8, {"per_user_tok_s": 10.0}, exitstatus=1))           # failed: not a baseline
        store.add_run(make_doc(9, {"per_user_tok_s": 11.0}, incomplete=["killed"]))  # incomplete: neither
        store.add_run(make_doc(10, {"per_user_tok_s": 99.0}, gpu_name="NVIDIA H100"))
        store.add_run(make_doc(11, {"per_user_tok_s": 98.0}, model_revision="rev2"))
        store.add_run(make_doc(12, {"per_user_tok_s": 97.0}, engine="vllm"))
        store.add_run(make_doc(13, {"per_user_tok_s": 96.0}, lane="daily"))
        store.add_run(make_doc(14, {"per_user_tok_s": 45.5}, image="sglang:newer"))   # another image: same lane key
        doc = history_baseline(store, KEY, 5)
    runs = [r["session_id"] for r in doc["made_of"]["runs"]]
    assert runs == [make_doc(i)["session_id"] for i in (4, 5, 6, 7, 14)]          # oldest first
    entry = doc["gates"]["curve"]["users=48"]
    assert entry["per_user_tok_s"] == 45.5                                        # median of 44 45 46 47 45.5
    assert entry["spread_by_metric_pct"]["per_user_tok_s"] == pytest.approx(3 / 45.5 * 100)
    assert doc["made_of"]["label"] == (
        "history: median of the last 5 passing run(s) on lane batch, gpu NVIDIA GB300 x1, model revision rev1, "
        "engine sglang: " + ", ".join(runs))
    message = regression_message(compare_records([("curve", "users=48", {"per_user_tok_s": 40.0, "ttft_p95_s": 0.76})], doc),
                                 baseline_label(doc))
    assert message.splitlines()[0] == f"1 regression(s) against the baseline ({doc['made_of']['label']})"


def test_fewer_passing_runs_than_asked_are_used_and_the_label_says_so(location, make_doc) -> None:
    with open_store(location) as store:
        store.add_run(make_doc(1))
        store.add_run(make_doc(2))
        assert history_baseline(store, LaneKey("other"), 5) is None
        doc = history_baseline(store, KEY, 5)
    assert doc["made_of"]["label"].startswith("history: median of the last 2 passing run(s) (only 2 stored, 5 asked) "
                                              "on lane batch")
