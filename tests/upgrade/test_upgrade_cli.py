"""`glmf upgrade` through the CLI, with two small vLLM releases whose parsers are built the way
vLLM's own `vllm serve` builds them (vllm/entrypoints/cli/serve.py): the lane's interpreter has the
old one; the new one is a local wheel (no network) imported ahead of this interpreter."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pytest_glmf.cli import main

SERVE = '''
from vllm.entrypoints.{where}.cli_args import make_arg_parser

class ServeSubcommand:
    name = "serve"
    def subparser_init(self, subparsers):
        return make_arg_parser(subparsers.add_parser(self.name))

def cmd_init():
    return [ServeSubcommand()]
'''
OLD = '''
def make_arg_parser(parser):
    parser.add_argument("--model"); parser.add_argument("--host"); parser.add_argument("--port", type=int)
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8"], default="auto")
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--mamba-cache-mode", choices=["align", "none", "all"])
    parser.add_argument("--swap-space", type=float)
    return parser
'''
NEW = '''
import json

def make_arg_parser(parser):
    parser.add_argument("--model"); parser.add_argument("--host"); parser.add_argument("--port", type=int)
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--gpu-memory-utilization", type=float, default=None)
    parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8", "fp8_e4m3"], default="auto")
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--mamba-cache-mode", choices=["align", "none"],
                        help="--mamba-cache-mode is deprecated and will be removed. It has no effect.")
    parser.add_argument("--speculative-config", type=json.loads)
    parser.add_argument("--quantization")
    parser.add_argument("--tool-call-parser")
    return parser
'''
# what the new release's own code looks values up in (upgrade/values.py reads each the way vLLM's are read)
NEW_LOOKUPS = {
    "vllm/config/__init__.py": '''
import dataclasses

@dataclasses.dataclass
class SpeculativeConfig:
    __pydantic_config__ = {"extra": "forbid"}      # as vLLM's @config classes: unknown keys refused
    method: str | None = None
    num_speculative_tokens: int | None = None
''',
    "vllm/envs.py": "environment_variables = {'VLLM_KEPT': lambda: None}\n",
    "vllm/model_executor/__init__.py": "", "vllm/model_executor/layers/__init__.py": "",
    "vllm/model_executor/layers/quantization/__init__.py": "QUANTIZATION_METHODS = ['fp8', 'awq']\n",
    "vllm/tool_parsers/__init__.py": '''
class ToolParserManager:
    @classmethod
    def list_registered(cls):
        return ["hermes", "qwen3_coder"]
''',
}


def surface() -> str:
    """A module that prints every boot line the gate reads and names every metric and route the gates use
    (the real release keeps them in many files; `glmf upgrade` reports a moved one, not a vanished one)."""
    from pytest_glmf.upgrade.surface import ENDPOINTS, metric_names, vllm_boot_formats

    lines = ["import logging", "logger = logging.getLogger(__name__)", "def boot():"]
    lines += [f"    logger.info({f.skeleton.replace('{}', '%s')!r}, *args)" for f in vllm_boot_formats()]
    lines += [f"NAME_{i} = {(m[:-6] if m.endswith('_total') else m)!r}" for i, m in enumerate(metric_names("vllm"))]
    lines += [f"ROUTE_{i} = {r!r}" for i, r in enumerate(ENDPOINTS["vllm"])]
    return "\n".join(lines) + "\n"


def package(where: str, args: str, printed: bool = True) -> dict[str, str]:
    return {**({"vllm/printed.py": surface()} if printed else {}), **(NEW_LOOKUPS if args == NEW else {}), "vllm/__init__.py": "", "vllm/entrypoints/__init__.py": "", "vllm/entrypoints/cli/__init__.py": "",
            f"vllm/entrypoints/{where}/__init__.py": "", f"vllm/entrypoints/{where}/cli_args.py": args,
            "vllm/entrypoints/cli/serve.py": SERVE.format(where=where)}


@pytest.fixture
def printed() -> bool:
    return True


@pytest.fixture
def releases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, printed: bool) -> Path:
    old = tmp_path / "old"
    for name, text in package("launchers", OLD).items():
        (old / name).parent.mkdir(parents=True, exist_ok=True)
        (old / name).write_text(text)
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    with zipfile.ZipFile(cache / "wheels" / "vllm-9.9.0-py3-none-any.whl", "w") as z:
        for name, text in package("common", NEW, printed).items():
            z.writestr(name, text)
        z.writestr("vllm-9.9.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.0\n")
        z.writestr("vllm-9.9.0.dist-info/RECORD", "")
    monkeypatch.setenv("GLMF_UPGRADE_CACHE", str(cache))
    return tmp_path


def lanes_file(root: Path, extra: str) -> Path:
    path = root / "lanes.yaml"
    path.write_text("lanes:\n  real:\n    engine: vllm\n    launcher: process\n    model: /m\n    ctx: 2048\n"
                    f"    executable: {sys.executable}\n    env: {{PYTHONPATH: '{root / 'old'}'}}\n"
                    f"    extra: [{extra}]\n")
    return path


def test_a_removed_and_a_deprecated_flag_break_the_lane(releases: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lanes = lanes_file(releases, "--max-num-seqs, '8', --mamba-cache-mode, align, --swap-space, '4'")
    out_json = releases / "up.json"
    code = main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable,
                 "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 1, out
    report = json.loads(out_json.read_text())["lanes"][0]
    changes = {(c["flag"], c["change"]) for c in report["changes"]}
    assert {("--swap-space", "removed"), ("--mamba-cache-mode", "deprecated"),
            ("--mamba-cache-mode", "choices changed")} <= changes, changes
    assert report["to"] == "9.9.0 (vllm==9.9.0)" and report["parser"].endswith("common.cli_args.make_arg_parser")
    assert any(line.split()[:4] == ["real", "--swap-space", "removed", "(breaks)"] for line in out.splitlines()), out
    assert out.strip().endswith("1 of 1 lane(s) would break: real")


def test_a_lane_that_survives_exits_0(releases: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lanes = lanes_file(releases, "--max-num-seqs, '8', --gpu-memory-utilization, '0.9'")
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable]) == 0
    assert capsys.readouterr().out.strip().endswith("0 of 1 lane(s) would break")


def test_a_changed_default_is_the_lanes_that_rely_on_it_only(releases: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """--gpu-memory-utilization's default goes 0.92 -> None: news for a lane without the flag, none for a lane
    that sets it (it keeps its own value)."""
    lanes = releases / "two.yaml"
    lane = ("    engine: vllm\n    launcher: process\n    model: /m\n    ctx: 2048\n"
            f"    executable: {sys.executable}\n    env: {{PYTHONPATH: '{releases / 'old'}'}}\n")
    lanes.write_text(f"lanes:\n  sets:\n{lane}    extra: [--gpu-memory-utilization, '0.9']\n"
                     f"  relies:\n{lane}    extra: [--max-num-seqs, '8']\n")
    out_json = releases / "up.json"
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable,
                 "--json", str(out_json)]) == 0
    changes = {r["lane"]: r["changes"] for r in json.loads(out_json.read_text())["lanes"]}
    assert changes["sets"] == []
    assert changes["relies"] == [{"flag": "--gpu-memory-utilization", "change": "default changed", "detail":
                                  "the lane does not pass it: 0.92 -> None (argparse)"}]
    assert "relies  --gpu-memory-utilization  default changed  the lane does not pass it: 0.92 -> None (argparse)" \
        in capsys.readouterr().out


def test_values_argparse_does_not_check_are_judged_by_the_new_releases_own_lookups(
        releases: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A JSON flag's removed key, a quantization method and a tool parser the release does not register, an
    env var it does not read: each a break naming it; what it still knows says nothing."""
    lanes = releases / "values.yaml"
    lanes.write_text("lanes:\n  real:\n    engine: vllm\n    launcher: process\n    model: /m\n    ctx: 2048\n"
                     f"    executable: {sys.executable}\n"
                     f"    env: {{PYTHONPATH: '{releases / 'old'}', VLLM_KEPT: '1', VLLM_USE_V2_MODEL_RUNNER: '1'}}\n"
                     "    extra: [--speculative-config, '{\"method\": \"ngram\", \"disable_padded_drafter_batch\": true}',"
                     " --quantization, fp_quant, --tool-call-parser, musespark1x]\n")
    out_json = releases / "up.json"
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable,
                 "--json", str(out_json)]) == 1
    changes = json.loads(out_json.read_text())["lanes"][0]["changes"]
    breaking = {(c["flag"], c["change"]): c["detail"] for c in changes if c.get("breaks")}
    assert breaking == {
        ("--speculative-config", "unknown key"): "'disable_padded_drafter_batch': SpeculativeConfig has no such field "
                                                 "and refuses unknown keys (the server does not start)",
        ("--quantization", "unknown method"): "'fp_quant' is not a quantization method of this release (its "
                                              "QUANTIZATION_METHODS)",
        ("--tool-call-parser", "unknown parser"): "'musespark1x' is not registered in this release (known: hermes, "
                                                  "qwen3_coder)",
        ("VLLM_USE_V2_MODEL_RUNNER", "env var not read"): "vllm.envs does not read it"}
    out = capsys.readouterr().out
    assert any(line.split()[:5] == ["real", "VLLM_USE_V2_MODEL_RUNNER", "env", "var", "not"] for line in out.splitlines())
    assert out.strip().endswith("1 of 1 lane(s) would break: real")


def test_a_lane_whose_interpreter_does_not_exist_is_one_line_and_exit_2(
        releases: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lanes = releases / "gone.yaml"
    lanes.write_text("lanes:\n  gone:\n    engine: vllm\n    launcher: process\n    model: /m\n    ctx: 2048\n"
                     "    executable: /opt/nowhere/bin/python\n")
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"glmf upgrade: {lanes}: lane 'gone': its interpreter /opt/nowhere/bin/python does "
                                 "not exist; fix `executable:` or give --from vllm==VERSION / sglang==VERSION\n")


def test_latest_is_the_newest_release_pip_finds(releases: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`--to vllm==latest` asks pip's own client (here a find-links folder as the index: 9.9.0 beside an
    older 9.1.0 and a pre-release, which pip leaves out)."""
    wheels = releases / "cache" / "wheels"
    for version in ("9.1.0", "10.0.0rc1"):
        with zipfile.ZipFile(wheels / f"vllm-{version}-py3-none-any.whl", "w") as z:
            z.writestr(f"vllm-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    lanes = lanes_file(releases, "--max-num-seqs, '8', --swap-space, '4'")
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable]) == 1
    capsys.readouterr()
    monkeypatch.setenv("PIP_NO_INDEX", "1")                    # from here on only the folder answers
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    out_json = releases / "up.json"
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==latest", "--python", sys.executable,
                 "--json", str(out_json)]) == 1
    assert json.loads(out_json.read_text())["lanes"][0]["to"] == "9.9.0 (vllm==9.9.0)"
    assert "1 of 1 lane(s) would break: real" in capsys.readouterr().out


def test_latest_offline_is_one_line_and_exit_2(releases: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:9/x",
                        "PIP_FIND_LINKS": str(releases / "old"), "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)
    lanes = lanes_file(releases, "--max-num-seqs, '8'")
    assert main(["upgrade", "--lanes", str(lanes), "--to", "sglang==latest"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("glmf upgrade: sglang==latest: the newest sglang could not be looked up on the package "
                          "index (pip index versions sglang: "), err
    assert err.endswith("); offline? give a pinned version (sglang==X.Y.Z)"), err


@pytest.mark.parametrize(("args", "message"), [
    (["--to", "vllm>=0.33"], "glmf upgrade: 'vllm>=0.33' is not a pinned pip requirement; write NAME==VERSION"),
    (["--to", "sglang==0.5.23"], "glmf upgrade: sglang==0.5.23: the lanes run vllm; give vllm==VERSION"),
    (["--to", "vllm==9.9.0", "--lane", "nope"], "glmf upgrade: {lanes}: no lane 'nope'; lanes: real"),
    (["--to", "vllm==9.9.0", "--python", "/no/python"], "glmf upgrade: --python /no/python: no such interpreter"),
])
def test_bad_specs_give_one_line(releases: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                 message: str) -> None:
    lanes = lanes_file(releases, "--max-num-seqs, '8'")
    assert main(["upgrade", "--lanes", str(lanes), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(message.format(lanes=lanes)), err


def test_an_unknown_flag_of_the_command_is_argparses_error(releases: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["upgrade", "--lanes", "x.yaml", "--to", "vllm==1", "--form", "vllm==0"])
    assert info.value.code == 2 and "unrecognized arguments: --form" in capsys.readouterr().err


@pytest.mark.parametrize("printed", [False])
def test_boot_lines_metrics_and_routes_gone_from_the_release_are_the_plugins_gap_not_the_lanes(
        releases: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What pytest-glmf reads of a release is its own verdict: the lane boots (exit 3, not 1), and each gap
    says what the plugin then reads wrong."""
    from pytest_glmf import __version__
    from pytest_glmf.upgrade.coverage import READS, _fact_key
    from pytest_glmf.upgrade.surface import vllm_boot_formats

    lanes = lanes_file(releases, "--max-num-seqs, '8', --gpu-memory-utilization, '0.9'")
    out_json = releases / "up.json"
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable,
                 "--json", str(out_json)]) == 3
    report = json.loads(out_json.read_text())
    assert report["lanes"][0]["changes"] == [] and report["lanes"][0]["breaks"] is False
    gaps = report["plugin"][0]["gaps"]
    kinds = {(g["what"], g["kind"]) for g in gaps}
    assert ("active_seqs_override", "boot line") in kinds
    # one gap per fact: the lines that feed one fact (0.34's rewordings, the two engine-config lines) are one
    assert {_fact_key(f.name) for f in vllm_boot_formats("9.9.0")} == {g["what"] for g in gaps if g["kind"] == "boot line"}
    assert ("vllm:num_requests_running", "metric") in kinds and ("/tokenize", "endpoint") in kinds
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 120        # a long line wraps under its column
    words = " ".join(out.split())
    assert f" pytest-glmf {__version__} does not read vLLM 9.9.0's override line yet: seats may be wrong for " \
           "speculative lanes (vllm/config/vllm.py: " in words
    assert "real  -     no change" in out and READS["context"].consequence in words
    assert out.strip().endswith(f"0 of 1 lane(s) would break; pytest-glmf has {len(gaps)} gap(s) on vllm==9.9.0")


def test_an_image_spec_runs_where_preflight_runs_and_says_so_in_one_line(
        releases: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{releases / 'no-engine.sock'}")
    lanes = lanes_file(releases, "--max-num-seqs, '8'")
    assert main(["upgrade", "--lanes", str(lanes), "--from", "vllm/vllm-openai:v0.32.0",
                 "--to", "vllm/vllm-openai:v0.33.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("glmf upgrade: vllm/vllm-openai:v0.32.0: the probe could not run in the image: "
                          "no Docker engine answers at DOCKER_HOST="), err


def fake_image(root: Path, where: str, args: str, version: str) -> Path:
    """What an engine image holds for the probe: the release's package and its dist-info."""
    for name, text in {**package(where, args), f"vllm-{version}.dist-info/METADATA":
                       f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_an_image_spec_is_asked_in_its_container_and_read_as_its_version(
        releases: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The image path past the Docker engine: a docker lane's own image is the `--from` side, each image is
    asked once with the lane's interpreter, its parser's answer (the real probe, run on the release the
    image holds) gives the version and the flag changes, and the source is said not read. Only the
    container is stood in for (runner.probe_in_image: the probe's stdout, stderr and exit code);
    tests/launch/docker runs the container itself."""
    from pytest_glmf.launch.preflight import runner
    from pytest_glmf.launch.preflight.runner import PROBE_SOURCE

    images = {"vllm/vllm-openai:v0.32.0": fake_image(releases / "img-old", "launchers", OLD, "0.32.0"),
              "vllm/vllm-openai:v0.33.0": fake_image(releases / "img-new", "common", NEW, "0.33.0")}
    asked: list[tuple[str, str, str]] = []

    def in_container(lane, image: str, interpreter: str, probe_args: list[str]) -> tuple[str, str, int | None]:
        asked.append((lane.name, image, interpreter))
        proc = subprocess.run([sys.executable, "-W", "ignore", "-c", PROBE_SOURCE, *probe_args], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(images[image])}, timeout=120)
        return proc.stdout, proc.stderr, proc.returncode

    monkeypatch.setattr(runner, "probe_in_image", in_container)
    lanes = releases / "docker-lanes.yaml"
    lanes.write_text("lanes:\n  boxed:\n    engine: vllm\n    launcher: docker\n    image: vllm/vllm-openai:v0.32.0\n"
                     "    model: /m\n    ctx: 2048\n    extra: [--max-num-seqs, '8', --mamba-cache-mode, align, "
                     "--swap-space, '4']\n")
    out_json = releases / "up.json"
    code = main(["upgrade", "--lanes", str(lanes), "--to", "vllm/vllm-openai:v0.33.0", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert asked == [("boxed", "vllm/vllm-openai:v0.32.0", "python3"), ("boxed", "vllm/vllm-openai:v0.33.0", "python3")]
    report = json.loads(out_json.read_text())["lanes"][0]
    assert report["from"] == "0.32.0 (vllm/vllm-openai:v0.32.0)" and report["to"] == "0.33.0 (vllm/vllm-openai:v0.33.0)"
    assert report["parser"].endswith("common.cli_args.make_arg_parser")
    changes = {(c["flag"], c["change"]) for c in report["changes"]}
    assert {("--swap-space", "removed"), ("--mamba-cache-mode", "deprecated"), ("-", "source not read")} <= changes
    assert ("--max-num-seqs", "removed") not in changes
    assert out.strip().endswith("1 of 1 lane(s) would break: boxed")


def test_the_metrics_checked_on_an_upgrade_include_the_load_engines() -> None:
    """The running/queued gauges the load engine samples around every curve and capacity run
    (pytest_glmf/load/endpoints.py) are judged on an upgrade like the gates' own metrics: after
    the load engine left the gates' folder they were no longer looked for (issue 41's move)."""
    from pytest_glmf.upgrade.surface import metric_names

    assert {"vllm:num_requests_running", "vllm:num_requests_waiting",
            "vllm:spec_decode_num_drafts_total"} <= set(metric_names("vllm"))
    assert {"sglang:num_running_reqs", "sglang:num_queue_reqs"} <= set(metric_names("sglang"))
