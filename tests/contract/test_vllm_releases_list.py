"""The contract stage's vLLM releases come from one list (pytest_glmf/upgrade/releases.py
`VLLM_RELEASES`), read by the setup script and by the tests alike; no oracle is needed here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from oracle_env import REPO

from pytest_glmf.upgrade.releases import OVERLAY_DEPS, VLLM_RELEASES, prints_in, release_key
from pytest_glmf.upgrade.surface import boot_formats, expected_vllm_lines

SETUP = Path(__file__).resolve().parent / "setup-vllm"


def test_the_setup_script_reads_the_one_list(tmp_path: Path) -> None:
    listed = subprocess.run([sys.executable, "-m", "pytest_glmf.upgrade.releases", "vllm"], capture_output=True,
                            text=True, check=True, cwd=REPO).stdout.split()
    assert listed == list(VLLM_RELEASES)
    deps = subprocess.run([sys.executable, "-m", "pytest_glmf.upgrade.releases", "deps"], capture_output=True,
                          text=True, check=True, cwd=REPO).stdout.split()
    assert deps == list(OVERLAY_DEPS)
    env = {**os.environ, "GLMF_CONTRACT_VLLM_DIR": str(tmp_path / "cv"), "GLMF_REAL_ENGINE_DIR": str(tmp_path / "re")}
    (tmp_path / "re" / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "re" / "venv" / "bin" / "python").symlink_to(sys.executable)
    check = subprocess.run(["bash", str(SETUP), "--check"], capture_output=True, text=True, env=env)
    assert (check.returncode, check.stdout.strip()) == (
        3, f"vLLM contract oracle missing or stale for {' '.join(VLLM_RELEASES)} under {tmp_path / 'cv'}")
    newest = subprocess.run(["bash", str(SETUP), "--python", VLLM_RELEASES[-1]], capture_output=True, text=True,
                            env=env)
    assert newest.stdout.strip() == f"{tmp_path / 'cv'}/venv-{VLLM_RELEASES[-1]}/bin/python"
    unknown = subprocess.run(["bash", str(SETUP), "--python", "0.1.0"], capture_output=True, text=True, env=env)
    assert (unknown.returncode, unknown.stderr.strip()) == (
        1, f"contract vLLM setup FAILED: --python RELEASE: one of {' '.join(VLLM_RELEASES)}")


def test_a_line_is_expected_from_its_first_release_until_the_one_that_dropped_it() -> None:
    assert release_key("0.34.0rc1") == release_key("0.34.0") < release_key("0.34.1") < release_key("0.35.0")
    assert prints_in("0.33.0", None, "0.34.0") and not prints_in("0.34.0", None, "0.34.0")
    assert prints_in("0.35.2", "0.34.0", None) and not prints_in("0.33.0", "0.34.0", None)
    assert expected_vllm_lines("0.33.0")["active_seqs_override"]
    assert not expected_vllm_lines("0.33.0")["active_seqs_override_fit"]
    assert expected_vllm_lines("0.34.0")["active_seqs_override_fit"]


def test_glmf_upgrade_expects_the_target_releases_boot_lines() -> None:
    """The plugin's coverage of a release (glmf upgrade): the lines it expects that release to print, so
    0.33's override wording is no gap on 0.34, and 0.34's extensible-cache lines none on 0.33."""
    on_033 = {name for name, _, _ in boot_formats("vllm", "0.33.0")}
    on_034 = {name for name, _, _ in boot_formats("vllm", "0.34.0")}
    assert "active_seqs_override" in on_033 - on_034 and "kv_extended" in on_034 - on_033
    assert {name for name, _, _ in boot_formats("vllm")} == on_034   # the newest tracked release
