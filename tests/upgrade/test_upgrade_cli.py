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
    parser.add_argument("--max-model-len", type=int); parser.add_argument("--gpu-memory-utilization", type=float)
    parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8"], default="auto")
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--mamba-cache-mode", choices=["align", "none", "all"])
    parser.add_argument("--swap-space", type=float)
    return parser
'''
NEW = '''
def make_arg_parser(parser):
    parser.add_argument("--model"); parser.add_argument("--host"); parser.add_argument("--port", type=int)
    parser.add_argument("--max-model-len", type=int); parser.add_argument("--gpu-memory-utilization", type=float)
    parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8", "fp8_e4m3"], default="auto")
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--mamba-cache-mode", choices=["align", "none"],
                        help="--mamba-cache-mode is deprecated and will be removed. It has no effect.")
    return parser
'''


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
    return {**({"vllm/printed.py": surface()} if printed else {}), "vllm/__init__.py": "", "vllm/entrypoints/__init__.py": "", "vllm/entrypoints/cli/__init__.py": "",
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
    lanes = lanes_file(releases, "--max-num-seqs, '8'")
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable]) == 0
    assert capsys.readouterr().out.strip().endswith("0 of 1 lane(s) would break")


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
def test_boot_lines_metrics_and_routes_gone_from_the_release_break_the_lane(releases: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_glmf.upgrade.surface import vllm_boot_formats

    lanes = lanes_file(releases, "--max-num-seqs, '8'")
    out_json = releases / "up.json"
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0", "--python", sys.executable,
                 "--json", str(out_json)]) == 1
    changes = json.loads(out_json.read_text())["lanes"][0]["changes"]
    kinds = {(c["flag"], c["change"]) for c in changes}
    assert ("active_seqs_override_fit", "boot format vanished") in kinds
    assert {f.name for f in vllm_boot_formats()} == {c["flag"] for c in changes if c["change"] == "boot format vanished"}
    assert ("vllm:num_requests_running", "metric vanished") in kinds and ("/tokenize", "endpoint vanished") in kinds
    assert "1 of 1 lane(s) would break: real" in capsys.readouterr().out


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
