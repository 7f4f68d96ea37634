"""Failure ledger lines and host provenance."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from pytest_glmf.results import ledger
from pytest_glmf.results.provenance import git_commit, gpu_info, host_provenance


def test_ledger_appends_one_readable_line_per_failure(tmp_path: Path):
    ledger.append(tmp_path, lane="daily", image="lmsysorg/sglang:nightly", what="boot",
                  flags=["--max-mamba-cache-size", "38", "--mem-fraction-static", "0.85"],
                  cause="RuntimeError: Not enough memory.\nPlease try to increase --mem-fraction-static.")
    ledger.append(tmp_path, lane="batch", image=None, flags=[], cause="curve: per_user_tok_s @ 48 users 41 < 45")
    ledger.append(tmp_path, lane="batch", image=None, flags=[], what="test_curve_row[users=48]",
                  cause_class="client-bound", cause="client CPU 97 % of a core")
    lines = ledger.read(tmp_path)
    assert len(lines) == 3
    assert ("| lane daily | boot | configuration | image lmsysorg/sglang:nightly | flags `--max-mamba-cache-size 38"
            in lines[0])
    assert lines[0].endswith("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    assert "| lane batch | gate | configuration | image - |" in lines[1]
    assert "| lane batch | test_curve_row[users=48] | client-bound | image - |" in lines[2]
    assert (tmp_path / "failure-ledger.md").read_text().startswith("# pytest-glmf failure ledger")


def test_a_failure_table_is_one_ledger_line_cut_at_400_characters(tmp_path: Path):
    table = "curve: 1 threshold(s) missed\nmetric | measured | expected\n" + "ttft_p95_s | 2.4 | <= 1\n" * 40
    ledger.append(tmp_path, lane="batch", image=None, flags=["--mem-fraction-static", "0.85"], cause=table)
    (line,) = ledger.read(tmp_path)
    assert "flags `--mem-fraction-static 0.85` | curve: 1 threshold(s) missed metric | measured | expected ttft_p95_s" \
        in line
    assert line.endswith("…") and len(line.split("0.85` | ", 1)[1]) == 400


def test_ledger_cause_classes_are_a_closed_set(tmp_path: Path):
    with pytest.raises(ValueError, match="cause class 'timeout': use one of configuration, server, client-bound, "
                                         "network, interrupted"):
        ledger.append(tmp_path, lane="b", image=None, flags=[], cause="x", cause_class="timeout")
    # several classes on one report: the most telling wins (a failed request explains a missed number)
    props = [("glmf_cause", "configuration"), ("other", "network"), ("glmf_cause", "server")]
    assert ledger.cause_of(props) == "server"
    assert ledger.cause_of([]) == "configuration"


def test_gpu_info_reads_nvidia_smi(tmp_path: Path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA GB300, 580.82.07'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert gpu_info() == {"gpu_name": "NVIDIA GB300", "gpu_count": 1, "gpu_driver": "580.82.07"}
    assert gpu_info("no-such-nvidia-smi") == {}


def test_git_commit_and_dirty_flag(tmp_path: Path):
    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "f").write_text("1")
    run("add", "f")
    run("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x")
    sha = git_commit(tmp_path)
    assert sha is not None and len(sha) == 40
    (tmp_path / "f").write_text("2")
    assert git_commit(tmp_path) == sha + "+dirty"
    prov = host_provenance(tmp_path)
    assert prov["git_commit"] == sha + "+dirty" and prov["plugin_version"]
