"""Every --glmf-* option, its ini twin, and its error message (pinned: users read these)."""
from __future__ import annotations

import pytest

USES_LANE = """
def test_lane(glmf_lane):
    print("LANE", glmf_lane.name, glmf_lane.launcher, glmf_lane.url, glmf_lane.image)
"""


def test_help_lists_every_option_with_its_ini_twin(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines([
        "LLM-serving acceptance tests (pytest-glmf):",
        "*--glmf-lane=NAME*Lane to launch and test*",
        "*--glmf-lanes=FILE*Lanes file (YAML)*",
        "*--glmf-thresholds=FILE*",
        "*--glmf-url=URL*Attach to a server already running*",
        "*--glmf-image=IMAGE*",
        "*--glmf-results=DIR*",
        "*--glmf-baseline=FILE*",
    ])
    for name in ("lane", "lanes", "thresholds", "url", "image", "results", "baseline"):
        result.stdout.fnmatch_lines([f"  glmf_{name} (string):*"])


def test_header_without_lane(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["glmf: no lane selected (--glmf-lane NAME)"])
    result.assert_outcomes(passed=1)


def test_header_names_lane_launcher_thresholds_baseline(pytester: pytest.Pytester, unfold) -> None:
    pytester.makepyfile(USES_LANE)
    baseline = pytester.makefile(".json", base='{"schema": 1, "gates": {}}')  # a valid (empty) result file
    result = pytester.runpytest("--glmf-lane", "batch", "--glmf-baseline", str(baseline), "--co",
                                str(pytester.path))
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        f"glmf: lane=batch launcher=sim lanes=built-in thresholds=built-in "
        f"thresholds.yaml baseline={baseline} results={pytester.path / 'glmf-results'}",
        f"glmf: history={pytester.path / 'glmf-results' / 'history.sqlite'} slow drift=warn over 5 runs"])
    # issue 33: the header fits 120 columns, folded four spaces in; a path too long for a line
    # keeps its label ("glmf: history=/...") and is the line's only overflow (copied whole)
    lines = result.stdout.lines
    header = lines[lines.index(next(x for x in lines if x.startswith("glmf: lane="))):
                   lines.index(next(x for x in lines if x.startswith("rootdir:")))]
    assert len(header) > 2 and all(x.startswith(("glmf: ", "    ")) for x in header), header
    assert all(len(x) <= 120 or "/" in x.split()[-1] and len(x) - len(x.split()[-1]) < 20 for x in header), header


def test_unknown_lane_lists_known_lanes(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--glmf-lane", "nightly")
    result.stderr.fnmatch_lines(["ERROR: unknown lane 'nightly' in the built-in lanes; known lanes: daily, batch"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_unknown_lane_in_lanes_file(pytester: pytest.Pytester) -> None:
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  gb300: {launcher: attach, url: 'http://127.0.0.1:1'}\n")
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "batch")
    result.stderr.fnmatch_lines([f"ERROR: unknown lane 'batch' in {lanes}; known lanes: gb300"])


def test_lane_from_ini_and_cli_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nglmf_lane = daily\n")
    pytester.makepyfile(USES_LANE)
    result = pytester.runpytest("-s", "test_lane_from_ini_and_cli_wins.py")
    result.stdout.fnmatch_lines(["*LANE daily sim None None*"])
    result = pytester.runpytest("-s", "--glmf-lane", "batch", "test_lane_from_ini_and_cli_wins.py")
    result.stdout.fnmatch_lines(["*LANE batch sim None None*"])


def test_ini_paths_are_relative_to_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.mkdir("conf")
    (pytester.path / "conf" / "lanes.yaml").write_text("lanes:\n  mine: {launcher: attach, url: 'http://127.0.0.1:9'}\n")
    pytester.makeini("[pytest]\nglmf_lanes = conf/lanes.yaml\nglmf_lane = mine\n")
    pytester.makepyfile(USES_LANE)
    sub = pytester.mkdir("elsewhere")
    result = pytester.runpytest("-s", str(pytester.path / "test_ini_paths_are_relative_to_the_ini_file.py"),
                                f"--rootdir={pytester.path}", f"-c={pytester.path / 'tox.ini'}")
    assert sub.is_dir()
    result.stdout.fnmatch_lines(["*LANE mine attach http://127.0.0.1:9 None*"])


def test_missing_lanes_file(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--glmf-lanes", "nope.yaml", "--glmf-lane", "batch")
    result.stderr.fnmatch_lines(["ERROR: --glmf-lanes: nope.yaml is not a file (expected a path to an existing YAML/JSON file)"])


def test_missing_lanes_file_from_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nglmf_lanes = nope.yaml\n")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["ERROR: glmf_lanes (ini): nope.yaml is not a file (expected a path to an existing YAML/JSON file)"])


def test_missing_thresholds_file(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--glmf-thresholds", "t.yaml", "--glmf-lane", "batch")
    result.stderr.fnmatch_lines(["ERROR: --glmf-thresholds: t.yaml is not a file*"])


def test_invalid_thresholds_file_stops_before_anything_starts(pytester: pytest.Pytester) -> None:
    t = pytester.makefile(".yaml", t="schema: 1\nlanes:\n  batch:\n    curve: {per_user_toks: {min: 45}}\n")
    result = pytester.runpytest("--glmf-thresholds", str(t), "--glmf-lane", "batch")
    result.stderr.fnmatch_lines([
        f"ERROR: {t}: lanes.batch.curve: unknown key 'per_user_toks'; allowed metrics: aggregate_tok_s, "
        "itl_p95_s, per_user_tok_s, per_user_tok_s_p5, spread_pct, ttft_p50_s, ttft_p95_s; "
        "other keys: baseline, beats, rows, settings"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_url_must_be_a_url(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--glmf-url", "localhost:30000")
    result.stderr.fnmatch_lines(["ERROR: --glmf-url: 'localhost:30000' is not a URL; expected http://HOST:PORT or https://HOST:PORT"])


def test_url_turns_the_lane_into_an_attach_lane(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(USES_LANE)
    result = pytester.runpytest("-s", "--glmf-lane", "batch", "--glmf-url", "http://127.0.0.1:30000/",
                                "test_url_turns_the_lane_into_an_attach_lane.py")
    result.stdout.fnmatch_lines(["glmf: lane=batch launcher=attach url=http://127.0.0.1:30000 *",
                                 "*LANE batch attach http://127.0.0.1:30000 None*"])


def test_url_without_lane_gives_an_attach_lane(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(USES_LANE)
    result = pytester.runpytest("-s", "--glmf-url", "http://127.0.0.1:8000", "test_url_without_lane_gives_an_attach_lane.py")
    result.stdout.fnmatch_lines(["*LANE attach attach http://127.0.0.1:8000 None*"])


def test_image_needs_a_docker_lane(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--glmf-lane", "batch", "--glmf-image", "lmsysorg/sglang:new")
    result.stderr.fnmatch_lines(["ERROR: --glmf-image needs a lane with launcher docker (the image started) or "
                                 "attach (the image the server runs, recorded); lane 'batch' (<built-in>) uses launcher sim"])


def test_image_must_be_an_image_reference(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--glmf-lane", "batch", "--glmf-image", "not an image")
    result.stderr.fnmatch_lines(["ERROR: --glmf-image: 'not an image' is not an image reference; expected e.g. *"])


def test_image_overrides_a_docker_lane(pytester: pytest.Pytester) -> None:
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  gpu: {launcher: docker, image: 'sglang:old', model: /m}\n")
    pytester.makepyfile(USES_LANE)
    result = pytester.runpytest("-s", "--glmf-lanes", str(lanes), "--glmf-lane", "gpu", "--glmf-image", "sglang:new",
                                "test_image_overrides_a_docker_lane.py")
    result.stdout.fnmatch_lines(["glmf: lane=gpu launcher=docker image=sglang:new *", "*LANE gpu docker None sglang:new*"])


def test_results_must_be_a_writable_directory(pytester: pytest.Pytester) -> None:
    f = pytester.makefile(".txt", results="x")
    result = pytester.runpytest("--glmf-results", str(f))
    result.stderr.fnmatch_lines([f"ERROR: --glmf-results: {f} is not a writable directory"])


def test_missing_baseline(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--glmf-baseline", "results/batch.json")
    result.stderr.fnmatch_lines(["ERROR: --glmf-baseline: results/batch.json is not a file*"])


def test_server_fixture_without_a_lane_fails_with_the_remedy(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(glmf_server): pass")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no lane selected: pass --glmf-lane NAME (built-in lanes: daily, batch) or set "
                                 "glmf_lane in the ini file*"])


def test_the_reference_documents_every_option_and_its_ini_twin() -> None:
    from pathlib import Path

    from pytest_glmf.plugin.options import OPTIONS

    page = (Path(__file__).parents[2] / "docs" / "guide" / "options.md").read_text()
    for name, (metavar, _, _) in OPTIONS.items():
        assert f"| `--glmf-{name.replace('_', '-')} {metavar}` | `glmf_{name}` |" in page, name


def test_header_warns_when_the_thresholds_file_has_no_section_for_the_lane(pytester: pytest.Pytester, unfold) -> None:
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  bacth: {launcher: attach, url: 'http://127.0.0.1:9'}\n")
    pytester.makepyfile(USES_LANE)
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "bacth", "--co",
                                "test_header_warns_when_the_thresholds_file_has_no_section_for_the_lane.py")
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        "glmf: lane=bacth launcher=attach url=http://127.0.0.1:9 thresholds=built-in thresholds.yaml (NO SECTION for "
        "lane 'bacth': nothing is gated; the session fails unless --glmf-allow-unverified) baseline=- *"])
