"""vLLM 0.33.0's released code as the oracle (tests/contract/setup-vllm: the wheel's pure-Python files
ahead of the real-engine venv's CPU torch). vLLM 0.32.0 stays the engine CI serves.

- its own parser (what `vllm serve` builds) on every vLLM lane the project ships, through preflight;
- the census of the boot gate's vLLM patterns: each pinned to the 0.33 file and line whose format
  string prints it (pytest_glmf/upgrade/surface.py); a moved file is tolerated (a warning naming
  both places), a vanished format fails naming it, a pattern the gate adds without a pin fails;
- every `vllm:` metric name the gates read is in 0.33's source.
"""
from __future__ import annotations

import os
import subprocess
import warnings
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from oracle_env import REPO, in_ci

from pytest_glmf.config.lanes import build_server_argv, load_lanes
from pytest_glmf.launch import preflight
from pytest_glmf.upgrade.surface import (
    VLLM_BOOT_FORMATS,
    VLLM_NOT_IN_SOURCE,
    boot_patterns,
    metric_names,
    render,
    source_has,
    source_mentions,
)

pytestmark = pytest.mark.contract
SETUP = Path(__file__).resolve().parent / "setup-vllm"


@pytest.fixture(scope="module")
def vllm033() -> Path:
    proc = subprocess.run(["bash", str(SETUP), "--check"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        msg = f"vLLM 0.33 oracle not set up ({proc.stdout.strip()}); run tests/contract/setup-vllm (~40 s + download)"
        if in_ci():
            pytest.fail(f"CI=true and {msg}", pytrace=False)
        pytest.skip(msg)
    return Path(subprocess.run(["bash", str(SETUP), "--python"], capture_output=True, text=True).stdout.strip())


@pytest.fixture(scope="module")
def package_parent(vllm033: Path) -> Path:
    out = subprocess.run([str(vllm033), "-c", "import importlib.util as u; print(u.find_spec('vllm').origin)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out).parents[1]


def vllm_lanes() -> list[tuple[str, object]]:
    dirs = {"GLMF_REAL_ENGINE_DIR": os.environ.get("GLMF_REAL_ENGINE_DIR", "/real-engine"),
            "GLMF_REAL_SGLANG_DIR": os.environ.get("GLMF_REAL_SGLANG_DIR", "/real-sglang")}
    out = []
    with mock.patch.dict(os.environ, dirs):
        for path in sorted((REPO / "examples").glob("*-lanes.yaml")):
            out += [(f"{path.relative_to(REPO)}:{n}", ln) for n, ln in load_lanes(path).items()
                    if ln.engine == "vllm" and ln.launcher != "attach" and not ln.command]
    return out


LANES = vllm_lanes()


def test_the_project_ships_vllm_lanes() -> None:
    assert len(LANES) >= 5, LANES


@pytest.mark.parametrize(("where", "lane"), LANES, ids=[w for w, _ in LANES])
def test_vllm_0_33_parses_the_lane(vllm033: Path, where: str, lane, tmp_path: Path,  # noqa: ANN001
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(Path.home() / ".cache" / "pytest-glmf" / "preflight-contract"))
    lane = replace(lane, launcher="process", executable=str(vllm033), env={})
    result = preflight.check(lane, build_server_argv(lane))
    assert (result.status, result.engine, result.version, result.problems) == ("ok", "vllm", "0.33.0", []), where
    assert not result.abbreviations, (where, result.abbreviations)


def test_every_pattern_the_boot_gate_declares_is_pinned_or_explained() -> None:
    pinned = {f.pattern for f in VLLM_BOOT_FORMATS}
    missing = [name for name in boot_patterns() if name not in pinned and name not in VLLM_NOT_IN_SOURCE]
    assert not missing, (f"boot gate patterns with no vLLM format pinned: {missing}: add each to VLLM_BOOT_FORMATS "
                         "(pytest_glmf/upgrade/surface.py) with the 0.33 file, line and format string")
    gone = sorted((pinned | set(VLLM_NOT_IN_SOURCE)) - set(boot_patterns()))
    assert not gone, f"census entries for patterns the boot gate no longer declares: {gone}"


@pytest.mark.parametrize("fmt", VLLM_BOOT_FORMATS, ids=[f.pattern for f in VLLM_BOOT_FORMATS])
def test_the_pinned_format_is_in_vllm_0_33_and_the_gate_reads_it(package_parent: Path, fmt) -> None:  # noqa: ANN001
    from pytest_glmf.upgrade.formats import logged_formats

    where = source_has(package_parent, fmt.source, fmt.skeleton)
    assert where is not None, f"{fmt.pattern}: vLLM 0.33.0 no longer prints {fmt.skeleton!r} (was {fmt.source}:{fmt.line})"
    lines = [ln for ln, sk in logged_formats(package_parent / where) if sk == fmt.skeleton]
    if (where, fmt.line) != (fmt.source, lines[0]):
        warnings.warn(f"{fmt.pattern}: {fmt.skeleton!r} moved from {fmt.source}:{fmt.line} to {where}:{lines[0]}",
                      stacklevel=1)
    assert boot_patterns()[fmt.pattern].search(render(fmt)), (fmt.pattern, render(fmt))


def test_every_vllm_metric_the_gates_read_is_in_0_33(package_parent: Path) -> None:
    names = metric_names("vllm")
    assert len(names) >= 6
    stems = {n: n.removesuffix("_total") for n in names}
    seen = source_mentions(package_parent, "vllm", sorted({*names, *stems.values()}))
    assert [n for n in names if not (seen[n] or seen[stems[n]])] == []
