"""Reliability matrix, bad input: every mistake in a lanes file, a thresholds file or an option is a
UsageError with one exact line (file, line or lane, key, what is allowed), before any server starts; the
shell checkers `glmf lanes --lanes FILE --lane NAME` and `glmf thresholds FILE` refuse the same file with
the same line."""
from __future__ import annotations

import pytest

USES_LANE = "def test_x(glmf_server): pass\n"
ALLOWED_KEYS = ("boot_log, boot_logs, boot_timeout_s, command, ctx, cuda_graph_max_bs_flag, draft, engine, env, "
                "executable, extra, gpus, image, ipc_mode, kv, launcher, maxbs, mem, model, port, preflight, shm_size, sim_args, "
                "spec, time_scale, timeouts, url, urls, volumes")

# (id, lanes file, lane to select, extra options, expected line; {lanes}/{dir} are filled in)
LANES_CASES = [
    ("malformed-yaml", "lanes:\n  a: {launcher: sim\n  b: {}\n", "a", [],
     "ERROR: {lanes}:3: invalid YAML: expected ',' or '}}', but got ':'"),
    ("unknown-lane", "lanes:\n  a: {launcher: sim}\n  b: {launcher: sim}\n", "nightly", [],
     "ERROR: unknown lane 'nightly' in {lanes}; known lanes: a, b"),
    ("unknown-key", "lanes:\n  a: {launcher: sim, enigne: vllm}\n", "a", [],
     "ERROR: {lanes}: lane 'a': unknown key 'enigne'; allowed: " + ALLOWED_KEYS),
    ("wrong-type", "lanes:\n  a: {launcher: sim, maxbs: many}\n", "a", [],
     "ERROR: {lanes}: lane 'a': maxbs: expected an integer >= 1, got 'many'"),
    ("url-and-image", "lanes:\n  a: {launcher: docker, image: 'x/y:1', url: 'http://127.0.0.1:1'}\n", "a", [],
     "ERROR: {lanes}: lane 'a': url is only for launcher attach (this lane uses launcher docker); "
     "remove url or set launcher: attach"),
    ("missing-model-dir", "lanes:\n  a: {launcher: docker, image: 'x/y:1', volumes: {/nonexistent/GLM: /models/GLM}}\n",
     "a", [], "ERROR: {lanes}: lane 'a': volumes: /nonexistent/GLM does not exist on this machine "
              "(the Docker engine is local); fix the path or mount the model there"),
    ("image-on-process-lane", "lanes:\n  a: {launcher: process, command: [x]}\n", "a",
     ["--glmf-image", "x/y:2"], "ERROR: --glmf-image needs a lane with launcher docker (the image started) or "
                                "attach (the image the server runs, recorded); lane 'a' ({lanes}) uses launcher process"),
    ("bad-timeout-key", "lanes:\n  a: {launcher: sim, timeouts: {first_token: 5}}\n", "a", [],
     "ERROR: {lanes}: lane 'a': timeouts: expected a mapping with keys connect_s, first_token_s, "
     "between_tokens_s, gate_s, got {{'first_token': 5}}"),
    ("zero-timeout", "lanes:\n  a: {launcher: sim, timeouts: {gate_s: 0}}\n", "a", [],
     "ERROR: {lanes}: lane 'a': timeouts: expected a number > 0, got {{'gate_s': 0}}"),
]

THRESHOLD_CASES = [
    ("zero-users", "lanes:\n  batch:\n    curve:\n      rows:\n        - {users: 0}\n",
     "ERROR: {th}: lanes.batch.curve.rows[0]: users must be a positive integer, got 0"),
    ("negative-users", "lanes:\n  batch:\n    curve:\n      rows:\n        - {users: 8}\n        - {users: -4}\n",
     "ERROR: {th}: lanes.batch.curve.rows[1]: users must be a positive integer, got -4"),
    ("no-such-gate", "lanes:\n  batch:\n    latency: {ttft_p95_s: {max: 1}}\n",
     "ERROR: {th}: lanes.batch: unknown gate 'latency'; allowed: acceptance, agents, boot, capacity, curve, drift, template, tools"),
    ("malformed-yaml", "lanes:\n  batch:\n    boot: {max_running_requests: {min: 1}\n  daily: {}\n",
     "ERROR: {th}:4: invalid YAML: expected ',' or '}}', but got '<scalar>'"),
    # settings and bounds, validated by the gates' declarations (gates/<gate>/spec.py)
    ("settings-typo", "lanes:\n  batch:\n    drift:\n      settings: {promts: 2}\n",
     "ERROR: {th}: lanes.batch.drift.settings: unknown key 'promts'; allowed: agreement_tokens, answer_max_tokens, "
     "answer_prompts, check_tokenizer, k, max_tokens, not_worse_than, oracle_engine, oracle_url, prompt_file, "
     "prompts, reference, regenerate, score_concurrency, self_check"),
    ("settings-type", "lanes:\n  batch:\n    acceptance:\n      settings: {prompts_per_class: two}\n",
     "ERROR: {th}: lanes.batch.acceptance.settings.prompts_per_class: expected an integer >= 1, got 'two'"),
    ("min-above-max", "lanes:\n  batch:\n    boot: {max_running_requests: {min: 5, max: 1}}\n",
     "ERROR: {th}: lanes.batch.boot: max_running_requests: min 5 > max 1: no measurement can meet both"),
    ("fraction-above-one", "lanes:\n  batch:\n    tools: {parsed_fraction: {min: 1.5}}\n",
     "ERROR: {th}: lanes.batch.tools: parsed_fraction: min 1.5 can never be met: parsed_fraction is a fraction "
     "in [0, 1]"),
    ("negative-latency", "lanes:\n  batch:\n    curve:\n      rows:\n        - {users: 8, ttft_p95_s: {max: -1}}\n",
     "ERROR: {th}: lanes.batch.curve.rows[0] (users=8): ttft_p95_s: max -1 can never be met: ttft_p95_s is a "
     "time in seconds, >= 0"),
]
# pytest prints a refused file's line after "ERROR: ", `glmf lanes` / `glmf thresholds` after "glmf <command>: "
CHECKER_PREFIX = "ERROR: "


def nothing_started(pytester: pytest.Pytester) -> None:
    assert not list(pytester.path.rglob("*-server.log")), "a server was started before the error"


@pytest.mark.parametrize("lanes_text, lane, options, line", [c[1:] for c in LANES_CASES],
                         ids=[c[0] for c in LANES_CASES])
def test_bad_lanes_input_is_a_usage_error_before_anything_starts(pytester, monkeypatch, capsys, lanes_text, lane,
                                                                  options, line) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    pytester.makepyfile(USES_LANE)
    lanes = pytester.path / "lanes.yaml"
    lanes.write_text(lanes_text)
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane", lane, *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line.format(lanes=lanes).replace("[", "[[]")])
    nothing_started(pytester)
    if not options:   # the file and the lane alone: `glmf lanes --lanes FILE --lane NAME` refuses them alike
        assert checker(capsys, "lanes", "--lanes", str(lanes), "--lane", lane) == (
            2, "glmf lanes: " + line.format(lanes=lanes).removeprefix(CHECKER_PREFIX) + "\n")


@pytest.mark.parametrize("text, line", [c[1:] for c in THRESHOLD_CASES], ids=[c[0] for c in THRESHOLD_CASES])
def test_bad_thresholds_are_a_usage_error_before_anything_starts(pytester, capsys, text, line) -> None:
    pytester.makepyfile(USES_LANE)
    th = pytester.path / "th.yaml"
    th.write_text(text)
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-thresholds", str(th), "--glmf-lane", "batch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line.format(th=th).replace("[", "[[]")])
    nothing_started(pytester)
    assert checker(capsys, "thresholds", str(th)) == (
        2, "glmf thresholds: " + line.format(th=th).removeprefix(CHECKER_PREFIX) + "\n")


def checker(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """(exit code, stderr) of `glmf ARGV`, after dropping what the in-process pytester run wrote."""
    from pytest_glmf.cli import main

    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_baseline_of_another_schema_stops_the_session(pytester) -> None:
    pytester.makepyfile(USES_LANE)
    base = pytester.makefile(".json", base='{"schema": 2, "gates": {"curve": {}}}')
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-lane", "batch", "--glmf-baseline", str(base))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --glmf-baseline: {base}: result schema 2, this plugin reads schema 1; "
                                 "use the result file of a run made with this version as --glmf-baseline"])
    nothing_started(pytester)


def test_baseline_that_is_not_a_result_file_stops_the_session(pytester) -> None:
    pytester.makepyfile(USES_LANE)
    base = pytester.makefile(".json", base="[1, 2")
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-lane", "batch", "--glmf-baseline", str(base))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --glmf-baseline: {base}: not a readable JSON result file (*)"])


@pytest.mark.parametrize("make, line", [
    ("file", "ERROR: --glmf-results: {path} is not a writable directory"),
    ("under-file", "ERROR: --glmf-results: {path} cannot be created ({parent} is not a writable directory)"),
])
def test_unusable_results_dir_stops_the_session(pytester, make, line) -> None:
    """(Running as root, a chmod 000 directory is still writable: a file in the way is the case
    that fails for everybody.)"""
    pytester.makepyfile(USES_LANE)
    blocker = pytester.path / "results"
    blocker.write_text("not a directory")
    path = blocker if make == "file" else blocker / "sub"
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-lane", "batch", "--glmf-results", str(path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line.format(path=path, parent=blocker)])
    nothing_started(pytester)


def test_bad_curve_setting_is_a_usage_error_before_any_server_starts(pytester) -> None:
    """An unknown key inside the curve's settings (the lane's or a row's) stops the session when the
    thresholds file is read, naming the file, the row and the known keys: a GPU lane is never
    booted for a typo. (Every gate's settings: tests/gates/test_gate_specs.py.)"""
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  batch: {launcher: sim, time_scale: 0.01, boot_timeout_s: 30}\n")
    for body, where in [("      settings: {max_tokenz: 8}\n      rows:\n        - {users: 1}\n",
                         "lanes.batch.curve.settings: unknown key 'max_tokenz'"),
                        ("      rows:\n        - {users: 1}\n        - {users: 2, settings: {runz: 2}}\n",
                         "lanes.batch.curve.rows[1] (users=2).settings: unknown key 'runz'")]:
        th = pytester.makefile(".yaml", th="lanes:\n  batch:\n    curve:\n" + body)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane",
                                               "batch", "--glmf-thresholds", str(th), "-k", "test_curve_row")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        pattern = f"ERROR: {th}: {where}; allowed: arrival, between_tokens_timeout_s, client_error_max_pct, client_retries, continuous_usage, *".replace("[", "[[]")
        result.stderr.fnmatch_lines([pattern])
        nothing_started(pytester)
