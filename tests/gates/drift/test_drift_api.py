"""The drift gate's public API against the toy engines (exact, known scores): a reference made on an
oracle, a candidate measured against it (from the dict or a stored file), typed statistics, the
pair comparison, and the assertion helpers as a user's test meets them."""
from __future__ import annotations

import json

import pytest
from test_drift_engines import ToyServer  # the toy engine servers (same directory)

from pytest_glmf.gates.drift import (
    DriftResult,
    compare_drift,
    load_drift_reference,
    make_drift_reference,
    measure_drift,
)
from pytest_glmf.gates.drift.reference import DriftFileError


@pytest.fixture(scope="module")
def toys():
    servers: dict[str, ToyServer] = {}

    def start(name: str, engine: str = "sglang", **kw) -> ToyServer:
        if name not in servers:
            servers[name] = ToyServer(engine, **kw)
        return servers[name]

    yield start
    for s in servers.values():
        s.stop()


@pytest.fixture(scope="module")
def reference(toys):
    return make_drift_reference(toys("oracle").url, prompts=4, max_tokens=6, k=4)


def test_a_candidate_is_measured_against_the_reference(toys, reference):
    same = measure_drift(toys("oracle").url, reference, label="same")
    assert isinstance(same, DriftResult) and same.label == "same"
    assert same.mean_abs_dlogp == 0.0 and same.argmax_mismatch == 0.0 and same.self_abs_dlogp == 0.0
    noisy = measure_drift(toys("noisy", noise=0.5).url, reference, label="noisy")
    assert noisy.mean_abs_dlogp > 0 and noisy.n_prompts == 4 and noisy.n_tokens == 24
    assert noisy.ci95[0] <= noisy.mean_abs_dlogp <= noisy.ci95[1]
    assert noisy.stats["mean_abs_dlogp"] == noisy.mean_abs_dlogp and noisy.reference["sha256"] == reference["sha256"]
    assert "noisy" in noisy.table() and "nothing is subtracted" in noisy.table()
    record = noisy.to_record()
    json.dumps(record)
    assert record["candidate"] == "noisy" and record["prompts"] == 4 and record["reference"]["k"] == 4


def test_a_stored_reference_is_read_and_checked(toys, reference, tmp_path):
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(reference))
    assert measure_drift(toys("oracle").url, path).mean_abs_dlogp == 0.0
    with pytest.raises(DriftFileError, match="made from another prompt set"):
        load_drift_reference(path, prompts=5, check_prompt_set=True)
    assert load_drift_reference(path, check_prompt_set=True)["prompt_set"]["n"] == 4
    edited = dict(reference, k=99)
    path.write_text(json.dumps(edited))
    with pytest.raises(DriftFileError, match="content does not match its sha256"):
        load_drift_reference(path)
    with pytest.raises(DriftFileError, match="nope.json: No such file"):
        load_drift_reference(tmp_path / "nope.json")


def test_two_candidates_are_compared_pairwise(toys, reference, tmp_path):
    good = measure_drift(toys("good", noise=0.1).url, reference, label="good")
    bad = measure_drift(toys("bad", noise=1.5).url, reference, label="bad")
    (tmp_path / "good.json").write_text(json.dumps(good.candidate))
    pair = compare_drift(bad, tmp_path / "good.json")["pair"]
    assert (pair["a"], pair["b"]) == ("good", "bad") and pair["gap"] > 0 and pair["wins"][0] >= pair["wins"][1]


def test_assertion_helpers_in_a_users_test(pytester, toys, reference, tmp_path, inline_notes):
    (tmp_path / "ref.json").write_text(json.dumps(reference))
    (tmp_path / "good.json").write_text(json.dumps(
        measure_drift(toys("good", noise=0.1).url, reference, label="good").candidate))
    jitter = toys("jitter", noise=0.3, jitter=1e-4).url
    pytester.makepyfile(test_user=f'''
from pytest_glmf.gates.drift import (assert_drift, assert_drift_not_worse_than, assert_drift_self_check,
                                     compare_drift, measure_drift)

def drift(url):
    return measure_drift(url, {str(tmp_path / "ref.json")!r}, label="mine")

def test_bounds():
    assert_drift(drift({toys("bad", noise=1.5).url!r}), mean_abs_dlogp={{"max": 0.05}}, p95_abs_dlogp={{"max": 100}})

def test_typo():
    assert_drift(drift({toys("oracle").url!r}), mean_abs_dlgop={{"max": 0.05}})

def test_self_check():
    assert_drift_self_check(drift({jitter!r}))

def test_not_worse():
    assert_drift_not_worse_than(compare_drift(drift({toys("bad", noise=1.5).url!r}), {str(tmp_path / "good.json")!r}))
''')
    result = pytester.runpytest("test_user.py")
    result.assert_outcomes(failed=4)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "drift of mine against the oracle",
        "quant (vs *) | mean |dlogp| *",
        "*",
        "mine * | *",
        "4 prompts, 24 tokens, top-4; *",
        ": 1 threshold(s) missed",
        "metric * | measured | expected | note",
        "*",
        "mean_abs_dlogp mine vs oracle (95% CI *..*) | * | <= 0.05 * | +*; the checkpoint/quantization moved the "
        "model*(test_user.py:8)",
    ], consecutive=True)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "assert_drift() at test_user.py:11: unknown key 'mean_abs_dlgop'; allowed metrics: argmax_mismatch, *",
        "instrument self-check: the same tokens scored twice differ *",
        "mine not worse than good",
        "*mean_abs_dlogp gap mine - good, lower end of the paired 95% CI*wins *| <= 0 * (test_user.py:17)",
    ])


def test_glmf_drift_launches_an_oracle_lane_of_the_lanes_file(pytester, toys):
    oracle, candidate = toys("oracle"), toys("noisy", noise=0.5)
    lanes = pytester.makefile(".yaml", lanes=(
        f"lanes:\n  mine: {{launcher: attach, url: '{candidate.url}'}}\n"
        f"  original: {{launcher: attach, url: '{oracle.url}'}}\n"))
    pytester.makepyfile(test_user="""
        from pytest_glmf.gates.drift import assert_drift

        def test_drift(glmf_drift):
            drift = glmf_drift(oracle_lane="original", prompts=3, max_tokens=4, k=3)
            assert drift is glmf_drift(oracle_lane="original", prompts=3, max_tokens=4, k=3)   # measured once
            assert drift.label == "mine" and drift.n_prompts == 3 and drift.mean_abs_dlogp > 0
            other = glmf_drift(oracle_lane="original", prompts=3, max_tokens=4, k=3, label="other")
            assert other is not drift and other.label == "other"   # judged apart, on the same reference
            assert_drift(drift, mean_abs_dlogp={"max": 10})

        def test_unknown_lane(glmf_drift):
            glmf_drift(oracle_lane="orignal")

        def test_two_oracles(glmf_drift):
            glmf_drift("ref.json", oracle_url="http://127.0.0.1:9")
    """)
    result = pytester.runpytest("test_user.py", "--glmf-lanes", str(lanes), "--glmf-lane", "mine",
                                "--glmf-results", str(pytester.path / "results"), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "glmf_drift() at test_user.py:12: *unknown lane 'orignal'*original*",
        "glmf_drift(): one oracle at a time, got reference and oracle_url",
    ])
    ref = json.loads((pytester.path / "results" / "drift" / "mine-reference.json").read_text())
    assert ref["provenance"]["oracle_lane"] == "original" and ref["prompt_set"]["n"] == 3
    # another label is judged on the reference already made: the oracle lane ran once
    assert not (pytester.path / "results" / "drift" / "other-reference.json").exists()
    doc = json.loads((pytester.path / "results" / "mine-latest.json").read_text())
    assert doc["gates"]["drift"]["mine"]["prompts"] == 3
