"""Lanes derived from lanes (config/derive.py): `base:` inherits and changes keys or flags, `matrix:`
generates lanes with readable names; `glmf lanes` lists them with their command lines."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_glmf.cli import main
from pytest_glmf.config.derive import set_flag
from pytest_glmf.config.lanes import build_server_argv, load_lanes
from pytest_glmf.config.yamlfile import ConfigError

LANES = """
lanes:
  daily:
    launcher: sim
    model: /m
    draft: /d
    spec: dflash
    extra: [--max-mamba-cache-size, "48", --speculative-dflash-block-size=7, --enable-metrics]
  daily-b8:
    base: daily
    --speculative-dflash-block-size: 8
    --enable-metrics: null
    time_scale: 0.05
  slots:
    base: daily
    matrix:
      --max-mamba-cache-size: [38, 48, 120]
  modes:
    base: daily
    matrix: {--max-mamba-cache-size: [48, 640], spec: [dflash, none]}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lanes.yaml"
    path.write_text(text)
    return path


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_set_flag_replaces_adds_and_removes() -> None:
    extra = ["--a", "1", "--b=2", "--bare", "--c", "3"]
    assert set_flag(extra, "--a", 9) == ["--b=2", "--bare", "--c", "3", "--a", "9"]
    assert set_flag(extra, "--b", "x") == ["--a", "1", "--bare", "--c", "3", "--b", "x"]
    assert set_flag(extra, "--bare", None) == ["--a", "1", "--b=2", "--c", "3"]
    assert set_flag(extra, "--new", True) == [*extra, "--new"]


def test_base_inherits_and_changes_keys_and_flags(tmp_path: Path) -> None:
    lanes = load_lanes(_write(tmp_path, LANES))
    b8 = lanes["daily-b8"]
    assert (b8.spec, b8.draft, b8.time_scale, b8.origin) == ("dflash", "/d", 0.05, "base daily")
    assert b8.extra == ["--max-mamba-cache-size", "48", "--speculative-dflash-block-size", "8"]
    assert lanes["daily"].origin is None and lanes["daily"].time_scale == 1.0


def test_matrix_generates_named_lanes_and_is_not_a_lane_itself(tmp_path: Path) -> None:
    lanes = load_lanes(_write(tmp_path, LANES))
    assert list(lanes) == ["daily", "daily-b8", "slots-38", "slots-48", "slots-120",
                           "modes-48-dflash", "modes-48-none", "modes-640-dflash", "modes-640-none"]
    assert [_flag(build_server_argv(lanes[f"slots-{n}"]), "--max-mamba-cache-size") for n in (38, 48, 120)] == \
        ["38", "48", "120"]
    ar = lanes["modes-640-none"]
    assert ar.spec is None and ar.origin == "modes: --max-mamba-cache-size=640, spec=none"
    assert "--speculative-algorithm" not in build_server_argv(ar)
    assert _flag(build_server_argv(lanes["modes-48-dflash"]), "--speculative-algorithm") == "DFLASH"


def test_a_derived_lane_is_validated_like_a_written_one(tmp_path: Path) -> None:
    # autoregressive with the parent's draft still set: the cross-field rule names the generated lane
    text = LANES.replace("  modes:\n    base: daily\n", "  modes:\n    base: daily\n    time_scale: -1\n")
    with pytest.raises(ConfigError, match=r"lane 'modes-48-dflash': time_scale: expected a number > 0, got -1"):
        load_lanes(_write(tmp_path, text))


def test_base_on_a_built_in_lane(tmp_path: Path) -> None:
    lanes = load_lanes(_write(tmp_path, "lanes:\n  big:\n    base: batch\n    --max-mamba-cache-size: 1024\n"))
    assert lanes["big"].spec is None and _flag(lanes["big"].extra, "--max-mamba-cache-size") == "1024"
    assert "--mamba-ssm-dtype" in lanes["big"].extra     # the rest of batch's flags stay


@pytest.mark.parametrize("body, message", [
    ("  a: {base: nope}\n", "lane 'a': base: unknown lane 'nope'; known lanes: a, batch, daily"),
    ("  a: {base: b}\n  b: {base: a}\n", "base: a -> b -> a is a cycle"),
    ("  m: {matrix: {spec: [dflash]}}\n  a: {base: m}\n", "lane 'a': base: 'm' is a matrix"),
    ("  m: {matrix: {spec: dflash}}\n", "lane 'm': matrix: spec: expected a non-empty list of values"),
    ("  m: {matrix: {a: [1], b: [2], c: [3]}}\n", "lane 'm': matrix: expected a mapping of one or two keys"),
    ("  m: {matrix: {spec: [x, X]}}\n", None),
    ("  m: {matrix: {--x: [1, 1]}}\n", "lane 'm': matrix: --x: values [1, 1] repeat"),
    ("  m: {matrix: {--x: [1]}}\n  m-1: {}\n", "lane 'm': matrix generates lane 'm-1', which is already a lane"),
    ("  m: {matrix: {--x: [[1]]}}\n", "lane 'm': matrix: --x: expected a non-empty list of values"),
    ("  a: {--x: [1, 2]}\n", "lane 'a': --x: a flag takes one value"),
    ("  m: {matrix: {typo: [1]}}\n", "lane 'm-1': unknown key 'typo'"),
])
def test_bad_derivations_name_file_lane_and_key(tmp_path: Path, body: str, message: str | None) -> None:
    path = _write(tmp_path, "lanes:\n" + body)
    if message is None:     # distinct values: fine
        assert set(load_lanes(path)) == {"m-x", "m-X"}
        return
    with pytest.raises(ConfigError) as exc:
        load_lanes(path)
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value)


def test_glmf_lanes_lists_generated_lanes_with_origin_and_command_line(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, LANES)
    assert main(["lanes", "--lanes", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"slots-120 (sglang, launcher sim, from {path}; slots: --max-mamba-cache-size=120):\n" in out
    line = out.split("slots-120 (")[1].splitlines()[1]
    assert "--max-mamba-cache-size 120" in line and "--speculative-algorithm DFLASH" in line
