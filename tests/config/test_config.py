"""Lanes and thresholds files: validation messages (exact), built-in lanes, engine command lines."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_glmf.config.lanes import LaneConfig, apply_overrides, build_server_argv, load_lanes
from pytest_glmf.config.thresholds import load_thresholds
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.launch.sim import sim_argv

LANE_KEYS = ("boot_log, boot_logs, boot_timeout_s, command, ctx, cuda_graph_max_bs_flag, draft, engine, env, executable, "
             "extra, gpus, image, ipc_mode, kv, launcher, maxbs, mem, model, port, preflight, shm_size, sim_args, spec, "
             "time_scale, timeouts, url, urls, volumes")


def write(tmp_path: Path, text: str, name: str = "lanes.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error(fn, *args) -> str:
    with pytest.raises(ConfigError) as exc:
        fn(*args)
    return str(exc.value)


# ------------------------------------------------------------------ lanes


def test_builtin_lanes_carry_the_recipe_flags() -> None:
    lanes = load_lanes(None)
    assert list(lanes) == ["daily", "batch"]
    assert build_server_argv(lanes["daily"]) == [
        "python3", "-m", "sglang.launch_server", "--model-path", "/models/GLM-5.3-Flash-NVFP4",
        "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/models/GLM-5.3-Flash-DFlash2",
        "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.85", "--context-length", "1048576",
        "--cuda-graph-max-bs-decode", "16", "--host", "127.0.0.1", "--port", "30000",
        "--max-mamba-cache-size", "48", "--speculative-dflash-block-size", "7", "--tool-call-parser", "glm47",
        "--enable-cache-report"]
    assert build_server_argv(lanes["batch"])[5:] == [
        "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.9", "--context-length", "131072",
        "--cuda-graph-max-bs-decode", "128", "--host", "127.0.0.1", "--port", "30000",
        "--max-mamba-cache-size", "640", "--mamba-ssm-dtype", "bfloat16", "--linear-attn-decode-backend", "triton",
        "--tool-call-parser", "glm47"]
    assert all(lane.launcher == "sim" for lane in lanes.values())


def test_sim_argv_is_the_engine_flags_plus_time_scale() -> None:
    lane = LaneConfig(name="b", model="/m", kv="fp8_e4m3", port=4321, time_scale=0.05, sim_args=["--fault", "oom"])
    assert sim_argv(lane) == [sys.executable, "-m", "pytest_glmf.sim", "--model-path", "/m", "--kv-cache-dtype",
                              "fp8_e4m3", "--host", "127.0.0.1", "--port", "4321", "--time-scale", "0.05",
                              "--fault", "oom"]


def test_the_simulator_lowers_its_own_priority() -> None:
    """--nice N: the running simulator is N nice levels below whoever started it."""
    import os

    from pytest_glmf.sim.process import SimProcess

    with SimProcess(["--nice", "7"]) as sim:
        assert os.getpriority(os.PRIO_PROCESS, sim.proc.pid) == os.getpriority(os.PRIO_PROCESS, 0) + 7


def test_lanes_file_round_trip_and_flag_spelling(tmp_path: Path) -> None:
    path = write(tmp_path, """
lanes:
  batch:
    engine: sglang
    launcher: docker
    image: lmsysorg/sglang:nightly-dev-cu13-20260911-00143e9c
    model: /models/GLM-5.3-Flash-NVFP4
    spec: none
    kv: fp8_e4m3
    mem: 0.90
    ctx: 131072
    maxbs: 128
    cuda_graph_max_bs_flag: --cuda-graph-max-bs-decode
    extra: '--max-mamba-cache-size 640 --mamba-ssm-dtype bfloat16'
    env: {TORCHINDUCTOR_COMPILE_THREADS: 1}
    gpus: all
    volumes: {/models: /models}
    shm_size: 32g
""")
    lane = load_lanes(path)["batch"]
    assert lane.spec is None and lane.env == {"TORCHINDUCTOR_COMPILE_THREADS": "1"} and lane.source == str(path)
    argv = build_server_argv(lane)
    assert "--cuda-graph-max-bs-decode" in argv and "--cuda-graph-max-bs" not in argv
    assert argv[-4:] == ["--max-mamba-cache-size", "640", "--mamba-ssm-dtype", "bfloat16"]


def test_vllm_lane_builds_the_api_server_command(tmp_path: Path) -> None:
    path = write(tmp_path, """
lanes:
  real:
    engine: vllm
    launcher: process
    executable: /venv/bin/python
    model: /models/smollm2
    spec: ngram
    mem: 0.5
    ctx: 2048
    port: 8012
    extra: [--dtype, float32, --enforce-eager]
""")
    assert build_server_argv(load_lanes(path)["real"]) == [
        "/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/smollm2",
        "--host", "127.0.0.1", "--port", "8012", "--speculative-config", '{"method":"ngram"}',
        "--gpu-memory-utilization", "0.5", "--max-model-len", "2048", "--dtype", "float32", "--enforce-eager"]


def test_command_gets_the_port(tmp_path: Path) -> None:
    lane = LaneConfig(name="x", launcher="process", command=["srv", "--port={port}"], port=1234)
    assert build_server_argv(lane) == ["srv", "--port=1234"]


@pytest.mark.parametrize("body, message", [
    ("  x: {launcher: sim, modle: /m}",
     "lane 'x': unknown key 'modle'; allowed: " + LANE_KEYS),
    ("  x: {launcher: kubernetes}",
     "lane 'x': launcher: expected one of docker, process, sim, attach, got 'kubernetes'"),
    ("  x: {engine: trtllm}",
     "lane 'x': engine: expected one of sglang, vllm, got 'trtllm'"),
    ("  x: {mem: 1.5}",
     "lane 'x': mem: expected a number > 0 and <= 1, got 1.5"),
    ("  x: {ctx: '128k'}",
     "lane 'x': ctx: expected an integer >= 1, got '128k'"),
    ("  x: {port: 70000}",
     "lane 'x': port: expected an integer >= 1 and <= 65535, got 70000"),
    ("  x: {extra: {a: 1}}",
     "lane 'x': extra: expected a list of strings or one string (split like a shell command line), got {'a': 1}"),
    ("  x: {cuda_graph_max_bs_flag: cuda-graph-max-bs}",
     "lane 'x': cuda_graph_max_bs_flag: expected a command-line flag such as \"--cuda-graph-max-bs\" or "
     "\"--cuda-graph-max-bs-decode\", got 'cuda-graph-max-bs'"),
    ("  x: {launcher: sim, url: 'http://127.0.0.1:1'}",
     "lane 'x': url is only for launcher attach (this lane uses launcher sim); remove url or set launcher: attach"),
    ("  x: {launcher: process}",
     "lane 'x': launcher process needs command (an argv list) or model (to build the engine command line)"),
    ("  x: {launcher: attach, url: 'localhost:1'}",
     "lane 'x': url: expected an http:// or https:// URL, got 'localhost:1'"),
    ("  x: {launcher: sim, urls: ['http://127.0.0.1:1', 'http://127.0.0.1:2']}",
     "lane 'x': urls and boot_logs are only for launcher attach (this lane uses launcher sim); remove them or "
     "set launcher: attach"),
    ("  x: {launcher: attach, url: 'http://h:1', urls: ['http://h:2']}",
     "lane 'x': url and urls together: give url for one server or a router, urls for several replicas the "
     "client spreads its streams over"),
    ("  x: {launcher: attach, urls: ['http://h:1', 'h:2']}",
     "lane 'x': urls: expected a non-empty list of http:// or https:// URLs, got ['http://h:1', 'h:2']"),
    ("  x: {launcher: attach, urls: 'http://h:1'}",
     "lane 'x': urls: expected a non-empty list of http:// or https:// URLs, got 'http://h:1'"),
    ("  x: {launcher: attach, urls: ['http://h:1', 'http://h:2'], boot_logs: [a.log]}",
     "lane 'x': boot_logs has 1 entries for 2 urls; give one boot log per url, in the same order"),
    ("  x: {launcher: attach, url: 'http://h:1', boot_log: a.log, boot_logs: [b.log, c.log]}",
     "lane 'x': boot_log and boot_logs together: boot_logs holds one boot log per replica"),
    ("  x: {timeouts: {ttft_s: 3}}",
     "lane 'x': timeouts: expected a mapping with keys connect_s, first_token_s, between_tokens_s, gate_s, "
     "got {'ttft_s': 3}"),
    ("  x: 3", "lane 'x': must be a mapping of keys (allowed: " + LANE_KEYS + ")"),
])
def test_lane_errors_name_file_lane_key_and_allowed(tmp_path: Path, body: str, message: str) -> None:
    path = write(tmp_path, "lanes:\n" + body + "\n")
    assert error(load_lanes, path) == f"{path}: {message}"


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "lanes:\n  batch:\n    kv: fp8\n   mem: [0.9\n")
    assert error(load_lanes, path).startswith(f"{path}:4: invalid YAML: ")


def test_lanes_file_shape_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "batch: {launcher: sim}\n")
    assert error(load_lanes, path) == (f"{path}: a lanes file is a mapping with a non-empty 'lanes:' mapping "
                                       "(lanes: {batch: {engine: sglang, launcher: docker, ...}})")
    path = write(tmp_path, "schema: 2\nlanes: {a: {}}\n")
    assert error(load_lanes, path) == f"{path}: schema 2 is not supported; allowed: 1"


def test_attach_boot_log_is_relative_to_the_lanes_file(tmp_path: Path) -> None:
    path = write(tmp_path, "lanes:\n  a: {launcher: attach, url: 'http://127.0.0.1:1', boot_log: logs/boot.log}\n")
    assert load_lanes(path)["a"].boot_log == str(tmp_path / "logs" / "boot.log")


def test_replica_urls_and_their_boot_logs(tmp_path: Path) -> None:
    path = write(tmp_path, "lanes:\n  dp: {launcher: attach, urls: ['http://127.0.0.1:1/', 'http://127.0.0.1:2'], "
                           "boot_logs: [logs/r0.log, /abs/r1.log]}\n"
                           "  routed: {launcher: attach, url: 'http://127.0.0.1:3', boot_logs: [a.log, b.log]}\n")
    lanes = load_lanes(path)
    assert lanes["dp"].urls == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert lanes["dp"].boot_logs == [str(tmp_path / "logs" / "r0.log"), "/abs/r1.log"]
    assert lanes["routed"].url == "http://127.0.0.1:3" and len(lanes["routed"].boot_logs) == 2
    # --glmf-url names one server or a router: the replica urls give way, their boot logs stay
    over = apply_overrides(lanes["dp"], url="http://127.0.0.1:9")
    assert over.urls == [] and over.url == "http://127.0.0.1:9" and len(over.boot_logs) == 2


# ------------------------------------------------------------------ thresholds


def test_bundled_thresholds_load_and_cover_the_recipe_lanes() -> None:
    t = load_thresholds(None)
    assert t.for_gate("batch", "boot")["max_running_requests"] == {"min": 128}
    assert t.for_gate("nolane", "curve") == {}
    assert t.source("batch", "boot") == "thresholds.yaml: lanes.batch.boot"
    top_level = Path(__file__).parents[2] / "thresholds.yaml"
    assert top_level.resolve() == Path(t.path).resolve()  # the repo's top-level file is the shipped one


@pytest.mark.parametrize("body, message", [
    ("lanes:\n  batch:\n    latency: {ttft_s: {max: 1}}",
     "lanes.batch: unknown gate 'latency'; allowed: acceptance, agents, boot, capacity, curve, drift, template, tools"),
    ("lanes:\n  batch:\n    drift: {mean_dlogp: {max: 0.15}}",
     "lanes.batch.drift: unknown key 'mean_dlogp'; allowed metrics: argmax_mismatch, content_length_ratio, "
     "excess_abs_dlogp, excess_rms_dlogp, finish_reason_changed, floor_abs_dlogp, greedy_agreement, kl_topk, "
     "max_abs_dlogp, mean_abs_dlogp, median_abs_dlogp, output_length_ratio, p90_abs_dlogp, p95_abs_dlogp, "
     "p99_abs_dlogp, reasoning_length_ratio, runaway_share, self_abs_dlogp; other keys: baseline, settings"),
    ("lanes:\n  batch:\n    tools: {leaks: {maximum: 0}}",
     "lanes.batch.tools: leaks: a bound is {min: X} and/or {max: X}, got {'maximum': 0}"),
    ("lanes:\n  batch:\n    tools: {leaks: {max: none}}",
     "lanes.batch.tools: leaks: max must be a number, got 'none'"),
    ("lanes:\n  batch:\n    curve: {rows: [{users: 0, per_user_tok_s: {min: 45}}]}",
     "lanes.batch.curve.rows[0]: users must be a positive integer, got 0"),
    ("lanes:\n  batch:\n    curve: {rows: [{users: 48, ttft_p99_s: {max: 1}}]}",
     "lanes.batch.curve.rows[0] (users=48): unknown key 'ttft_p99_s'; allowed metrics: aggregate_tok_s, "
     "itl_p95_s, per_user_tok_s, per_user_tok_s_p5, spread_pct, ttft_p50_s, ttft_p95_s; "
     "other keys: allow_queueing, settings, users"),
    ("lanes:\n  daily:\n    acceptance: {classes: {prose: {accept: {min: 0.25}}}}",
     "lanes.daily.acceptance.classes.prose: unknown key 'accept'; allowed metrics: accept_length, "
     "accept_pos1, accept_pos2, accept_pos3, accept_pos4, accept_pos5, accept_pos6, accept_pos7, accept_pos8, "
     "accept_rate, tok_s"),
    ("lanes:\n  batch:\n    boot: {kv_pool_dtypes: fp8_e4m3}",
     "lanes.batch.boot.kv_pool_dtypes: must be a list of dtype names, e.g. [fp8_e4m3, bfloat16]"),
    ("schema: 1\nlane: {}", "unknown top-level key 'lane'; allowed: lanes, schema"),
])
def test_threshold_errors_name_file_lane_gate_key(tmp_path: Path, body: str, message: str) -> None:
    path = write(tmp_path, body + "\n", "thresholds.yaml")
    assert error(load_thresholds, path) == f"{path}: {message}"


def test_thresholds_yaml_error_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "schema: 1\nlanes:\n  batch:\n    boot: {max_running_requests: {min: 128}\n", "t.yaml")
    assert error(load_thresholds, path).startswith(f"{path}:5: invalid YAML: ")


def test_flags_in_extra_win_over_fields() -> None:
    lane = LaneConfig(name="x", engine="vllm", model="/m", spec="ngram", ctx=2048,
                      extra=["--speculative-config", '{"method":"ngram","num_speculative_tokens":4}',
                             "--max-model-len=4096"])
    argv = build_server_argv(lane)
    assert argv.count("--speculative-config") == 1 and "--max-model-len" not in argv
    assert argv[-3:] == lane.extra


def test_lane_names_must_be_usable_in_file_names(tmp_path: Path) -> None:
    path = write(tmp_path, "lanes:\n  'gb300/batch': {launcher: sim}\n")
    assert error(load_lanes, path) == (f"{path}: lane name 'gb300/batch' must be letters, digits, '.', '_' or '-' "
                                       "(it names result files and server logs)")


def test_every_mistake_of_a_thresholds_file_is_reported_each_with_its_line(tmp_path: Path) -> None:
    """Not only the first: a user fixing a file one error per run learns of the next only then."""
    path = tmp_path / "th.yaml"
    path.write_text("schema: 1\nlanes:\n  a:\n    curve:\n      per_user_tok_s: {min: 45}\n"
                    "      settings: {max_tokenz: 3}\n      ttft_p95_s: {maxx: 1}\n    boot: {seatz: {min: 1}}\n"
                    "  b:\n    drfit: {}\n")
    with pytest.raises(ConfigError) as err:
        load_thresholds(path)
    lines = str(err.value).splitlines()
    assert lines[0] == f"{path}: 4 problems, each on its line:"
    assert lines[1].startswith(f"  {path}:6: lanes.a.curve.settings: unknown key 'max_tokenz'; allowed: ")
    assert lines[2] == f"  {path}:7: lanes.a.curve: ttft_p95_s: a bound is {{min: X}} and/or {{max: X}}, got {{'maxx': 1}}"
    assert lines[3].startswith(f"  {path}:8: lanes.a.boot: unknown key 'seatz'; allowed metrics: ")
    assert lines[4] == (f"  {path}:10: lanes.b: unknown gate 'drfit'; allowed: acceptance, agents, boot, capacity, "
                        "curve, drift, template, tools")
    # one mistake reads as before: one line, no count
    path.write_text("lanes:\n  a:\n    boot: {seatz: {min: 1}}\n")
    with pytest.raises(ConfigError, match=r"^[^\n]*lanes\.a\.boot: unknown key 'seatz'[^\n]*$"):
        load_thresholds(path)
