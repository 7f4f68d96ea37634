"""Preflight with a real interpreter and a real (small) engine package: the probe runs the parser
the way the engine's entry point builds it, unknown/ambiguous/ill-typed flags fail in seconds with
one line, verdicts are cached per environment, and the launcher never starts the server.
The released SGLang's own parser: tests/contract/test_preflight_released.py; in a real Docker container:
tests/launch/docker/test_preflight_docker.py; real vLLM: tests/real_engine/test_preflight_vllm.py."""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_glmf.config.lanes import LaneConfig, build_server_argv
from pytest_glmf.launch import preflight
from pytest_glmf.launch.preflight import Preflight, PreflightError, problem_line
from pytest_glmf.launch.preflight.sources import entry_point, flag_sources

# A package named like the engine, with the same parser entry point as SGLang 0.5.23
# (sglang/srt/server_args.py: ServerArgs.add_cli_args on an argparse parser).
FAKE_SERVER_ARGS = '''
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", required=True)
        parser.add_argument("--host"); parser.add_argument("--port", type=int)
        parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8_e4m3", "bf16", "bfloat16"])
        parser.add_argument("--mem-fraction-static", type=float)
        parser.add_argument("--context-length", type=int)
        parser.add_argument("--cuda-graph-max-bs-decode", type=int)
        parser.add_argument("--cuda-graph-max-bs-prefill", type=int)
        parser.add_argument("--max-mamba-cache-size", type=int)
        parser.add_argument("--tp-size", type=int)
        print("engine chatter on stdout while building the parser")
'''


@pytest.fixture
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "site" / "sglang" / "srt"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "server_args.py").write_text(FAKE_SERVER_ARGS)
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "site"


def lane_for(site: Path, **kw: object) -> LaneConfig:
    fields = {"name": "daily", "launcher": "process", "model": "/m", "kv": "fp8_e4m3", "mem": 0.85, "ctx": 4096,
              "maxbs": 16, "executable": sys.executable, "env": {"PYTHONPATH": str(site)}, "source": "lanes.yaml"}
    return LaneConfig(**{**fields, **kw})  # type: ignore[arg-type]


def test_entry_points() -> None:
    assert entry_point("sglang", ["python3", "-m", "sglang.launch_server", "--tp", "2"]) == ("python3", ["--tp", "2"])
    assert entry_point("sglang", ["/usr/bin/sglang", "serve", "--tp", "2"]) == ("python3", ["--tp", "2"])
    assert entry_point("vllm", ["py", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]) == ("py", ["--model", "m"])
    assert entry_point("sglang", ["python3", "-m", "pytest_glmf.sim"]) is None
    assert entry_point("vllm", ["python3", "-m", "sglang.launch_server"]) is None


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_every_flag_the_lane_builds_has_a_lane_key(engine: str) -> None:
    lane = LaneConfig(name="x", engine=engine, launcher="process", model="/m", draft="/d", spec="eagle3",
                      kv="fp8_e4m3", mem=0.9, ctx=2048, maxbs=8, extra=["--tp-size", "2", "--seed=3"],
                      cuda_graph_max_bs_flag="--max-cudagraph-capture-size" if engine == "vllm" else None)
    argv = build_server_argv(lane)
    sources = flag_sources(lane, argv)
    flags = [t.split("=", 1)[0] for t in argv[3:] if t.startswith("--")]
    assert [f for f in flags if f not in sources] == []
    assert sources["--tp-size"] == sources["--seed"] == "extra"
    assert sources["--kv-cache-dtype"] == "kv"


def test_problem_line_names_flag_key_and_closest_flags() -> None:
    lane = LaneConfig(name="daily", extra=["--max-mamba-cach-size", "48"], maxbs=16, source="lanes.yaml")
    result = Preflight("rejected", engine="sglang", version="0.5.23", where="image lmsysorg/sglang:x",
                       options=["--max-mamba-cache-size", "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"],
                       problems=[{"flag": "--max-mamba-cach-size", "kind": "unknown", "message": "", "candidates": []},
                                 {"flag": "--cuda-graph-max-bs-decode", "kind": "invalid_value",
                                  "message": "argument --cuda-graph-max-bs-decode: invalid int value: 'x'",
                                  "candidates": []}])
    assert problem_line(lane, result, build_server_argv(lane)) == (
        "preflight: lane 'daily' (lanes.yaml): SGLang 0.5.23 (image lmsysorg/sglang:x) rejects the command line: "
        "--max-mamba-cach-size (lane key extra) is not a flag; closest: --max-mamba-cache-size; and 1 more: "
        "--cuda-graph-max-bs-decode (lane key maxbs) is rejected: invalid int value: 'x'")


def test_the_engines_parser_judges_and_the_verdict_is_cached(fake_sglang: Path) -> None:
    good = lane_for(fake_sglang)
    t0 = time.monotonic()
    first = preflight.check(good, build_server_argv(good))
    assert (first.status, first.engine, first.cached, first.problems) == ("ok", "sglang", False, [])
    assert "--max-mamba-cache-size" in first.options and time.monotonic() - t0 < 10
    again = preflight.check(good, build_server_argv(good))
    assert (again.status, again.cached) == ("ok", True)
    bad = replace(good, extra=["--max-mamba-cach-size", "48", "--kv-cache-dtype", "fp9"],
                  cuda_graph_max_bs_flag="--cuda-graph-max-bs")
    with pytest.raises(PreflightError) as info:
        preflight.check(bad, build_server_argv(bad))
    assert str(info.value) == (
        f"preflight: lane 'daily' (lanes.yaml): SGLang (version unknown) (executable {sys.executable}) rejects the "
        "command line: --cuda-graph-max-bs (lane key cuda_graph_max_bs_flag) is ambiguous, it could be "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill; and 2 more: --kv-cache-dtype (lane key extra) is "
        "rejected: invalid choice: 'fp9' (choose from 'auto', 'fp8_e4m3', 'bf16', 'bfloat16'); "
        "--max-mamba-cach-size (lane key extra) is not a flag; closest: --max-mamba-cache-size")


def test_a_probe_that_cannot_run_does_not_block(fake_sglang: Path) -> None:
    lane = lane_for(fake_sglang, env={})           # the engine is not importable by that interpreter
    result = preflight.check(lane, build_server_argv(lane))
    assert result.status == "not run" and "No module named 'sglang'" in (result.why or "")
    nothing = preflight.check(replace(lane, launcher="sim"), build_server_argv(lane))
    assert nothing.status == "not run"


def test_a_rejected_lane_fails_the_session_before_any_server_starts(pytester: pytest.Pytester,
                                                                    fake_sglang: Path) -> None:
    lanes = pytester.makefile(".yaml", lanes=(
        "lanes:\n  daily:\n    launcher: process\n    model: /m\n    maxbs: 16\n"
        f"    executable: {sys.executable}\n    env: {{PYTHONPATH: '{fake_sglang}'}}\n"
        "    cuda_graph_max_bs_flag: --cuda-graph-max-bs\n    boot_timeout_s: 5\n"))
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "daily", "-k", "test_boot",
                                           "-p", "no:cacheprovider")
    assert time.monotonic() - t0 < 60
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines([
        f"PreflightError: preflight: lane 'daily' ({lanes}): SGLang (version unknown) (executable {sys.executable}) "
        "rejects the command line: --cuda-graph-max-bs (lane key cuda_graph_max_bs_flag) is ambiguous, it could be "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"])
    assert not list((pytester.path / "glmf-results").glob("*-server.log"))   # no server was started


# A vLLM laid out like a release that moved `make_arg_parser` again (0.32: entrypoints/launchers/cli_args.py,
# 0.33: entrypoints/common/cli_args.py; here a third place no list of module paths would know): the probe
# follows what `vllm serve` uses (vllm/entrypoints/cli/serve.py, ServeSubcommand.subparser_init).
FAKE_VLLM = {
    "vllm/__init__.py": "",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/nowhere_known/__init__.py": "",
    "vllm/entrypoints/nowhere_known/cli_args.py": '''
def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--model"); parser.add_argument("--host"); parser.add_argument("--port", type=int)
    parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8_e4m3"])
    parser.add_argument("--gpu-memory-utilization", type=float); parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--mamba-cache-mode", choices=["align", "none"], help="deprecated. It has no effect")
    return parser
''',
    "vllm/entrypoints/cli/serve.py": '''
from vllm.entrypoints.nowhere_known.cli_args import make_arg_parser

class ServeSubcommand:
    name = "serve"
    def subparser_init(self, subparsers):
        return make_arg_parser(subparsers.add_parser(self.name, usage="vllm serve [model_tag] [options]"))

def cmd_init():
    return [ServeSubcommand()]
''',
}


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in FAKE_VLLM.items():
        (tmp_path / "site" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "site" / name).write_text(text)
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "site"


def test_vllms_parser_is_found_where_its_serve_command_takes_it(fake_vllm: Path) -> None:
    lane = lane_for(fake_vllm, engine="vllm", extra=["--max-num-seqs", "8"])
    ok = preflight.check(lane, build_server_argv(lane))
    assert (ok.status, ok.engine, ok.problems) == ("ok", "vllm", []), ok
    assert "--max-num-seqs" in ok.options
    bad = replace(lane, extra=["--max-num-seq", "8", "--mamba-cache-mode", "all"])
    with pytest.raises(PreflightError) as info:
        preflight.check(bad, build_server_argv(bad))
    assert "--mamba-cache-mode (lane key extra) is rejected: invalid choice: 'all'" in str(info.value)


def test_the_probe_names_the_parser_it_used(fake_vllm: Path) -> None:
    import json
    import subprocess

    from pytest_glmf.launch.preflight.runner import PROBE_SOURCE, parse_answer

    out = subprocess.run([sys.executable, "-c", PROBE_SOURCE, "vllm", "[]", "--describe"], capture_output=True,
                         text=True, env={"PYTHONPATH": str(fake_vllm)}, timeout=60).stdout
    answer = parse_answer(out)
    assert answer is not None, out
    assert answer["parser"] == ("vllm.entrypoints.cli.serve.ServeSubcommand.subparser_init -> "
                                "vllm.entrypoints.nowhere_known.cli_args.make_arg_parser")
    deprecated = [a["flags"] for a in answer["actions"] if a["deprecated"]]
    assert deprecated == [["--mamba-cache-mode"]], json.dumps(answer["actions"])


def test_a_vllm_without_its_serve_module_is_a_loud_not_run(fake_vllm: Path) -> None:
    (fake_vllm / "vllm/entrypoints/cli/serve.py").write_text("import vllm.entrypoints.gone_module\n")
    lane = lane_for(fake_vllm, engine="vllm")
    result = preflight.check(lane, build_server_argv(lane))
    assert result.status == "not run" and "No module named 'vllm.entrypoints.gone_module'" in (result.why or "")
    line = preflight.header_line(lane)
    assert line is not None and line.startswith("glmf: preflight NOT RUN for lane 'daily' (lanes.yaml, executable ")
    assert line.endswith("the boot goes ahead unchecked (set preflight: required to fail instead)")
    with pytest.raises(PreflightError, match=r"^preflight NOT RUN .*the lane requires it \(preflight: required\)$"):
        preflight.check(replace(lane, preflight="required"), build_server_argv(lane))
    assert preflight.header_line(replace(lane, preflight="off")) is None


def test_the_preflight_key_is_validated(tmp_path: Path) -> None:
    from pytest_glmf.config.lanes import load_lanes
    from pytest_glmf.config.yamlfile import ConfigError

    bad = tmp_path / "lanes.yaml"
    bad.write_text("lanes:\n  a:\n    launcher: process\n    model: /m\n    preflight: always\n")
    with pytest.raises(ConfigError, match=r"lane 'a': preflight: expected one of auto, required, off, got 'always'"):
        load_lanes(bad)
    bad.write_text("lanes:\n  a:\n    launcher: sim\n    preflight: required\n")
    with pytest.raises(ConfigError, match=r"preflight: required needs launcher docker or process \(this lane uses "
                                          r"launcher sim"):
        load_lanes(bad)


def test_a_required_preflight_that_cannot_run_is_in_the_header_and_fails_the_tests(pytester: pytest.Pytester,
                                                                                   fake_sglang: Path, unfold) -> None:
    lanes = pytester.makefile(".yaml", lanes=(
        "lanes:\n  daily:\n    launcher: process\n    model: /m\n    maxbs: 16\n    preflight: required\n"
        "    executable: /nonexistent/python3\n    boot_timeout_s: 5\n"))
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "daily", "-k", "test_boot",
                                           "-p", "no:cacheprovider")
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([   # the header folds at 120
        f"glmf: preflight NOT RUN for lane 'daily' ({lanes}, executable /nonexistent/python3): /nonexistent/python3 "
        "not found on this machine; the lane requires it (preflight: required)"])
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*PreflightError: preflight NOT RUN for lane 'daily'*"])
    assert not list((pytester.path / "glmf-results").glob("*-server.log"))
