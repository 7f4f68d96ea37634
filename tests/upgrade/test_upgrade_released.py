"""`glmf upgrade --from vllm==0.33.0 --to vllm==0.34.0` on the released wheels, on four lanes like issue 39's:
one that sets every flag whose default changed (nothing to say), one that relies on the defaults (the changed
ones, the engine's own resolved defaults included), one with a speculative key, a quantization method, an
env var and a parser name 0.34 dropped (a refusal naming each), a DFlash lane that boots on both (no plugin gap on 0.34,
reported apart from the lanes).

The releases are the contract stage's overlays (tests/contract/setup-vllm: each wheel's pure-Python files
ahead of the real-engine venv), found by their `glmf-overlay.json`; where the 0.34.0 overlay is not built
yet and its wheel is on this machine, it is built once from that wheel (~190 MB, no download). One
`glmf upgrade` run for all four lanes: two parser builds, ~1-2 min on a 2-core box.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.cli import main
from pytest_glmf.upgrade.cli import overlay_dir

pytestmark = [pytest.mark.contract, pytest.mark.slow]

CACHE = Path.home() / ".cache" / "pytest-glmf"
REAL_ENGINE = Path(os.environ.get("GLMF_REAL_ENGINE_DIR") or CACHE / "real-engine") / "venv" / "bin" / "python"
CONTRACT = Path(os.environ.get("GLMF_CONTRACT_VLLM_DIR") or CACHE / "contract-vllm")
WHEELS = [CONTRACT / "wheels", CACHE / "wheels-0.34"]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(why: str) -> None:
    if in_ci():
        pytest.fail(f"CI=true and {why}", pytrace=False)
    pytest.skip(why)


def find_overlay(requirement: str) -> Path | None:
    """A built overlay venv of `requirement` over the real-engine venv, under the contract stage's folder."""
    for stamp in sorted(CONTRACT.glob("**/glmf-overlay.json")):
        meta = json.loads(stamp.read_text())
        if meta.get("requirement") == requirement and meta.get("base_python") == str(REAL_ENGINE) \
                and (stamp.parent / "bin" / "python").exists():
            return stamp.parent
    return None


def overlay(requirement: str, build_root: Path) -> Path:
    found = find_overlay(requirement)
    if found is not None:
        return found
    from pytest_glmf.upgrade.overlay import build

    version = requirement.split("==")[1]
    if not any(w.glob(f"vllm-{version}-*.whl") for w in WHEELS if w.is_dir()):
        unavailable(f"no {requirement} overlay under {CONTRACT} and no wheel to build one; run tests/contract/setup-vllm")
    dest = build_root / requirement.replace("==", "-")
    if not (dest / "bin" / "python").exists():
        wheels = build_root / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        for w in WHEELS:
            for whl in w.glob(f"vllm-{version}-*.whl") if w.is_dir() else []:
                if not (wheels / whl.name).exists():
                    (wheels / whl.name).symlink_to(whl)
        build(requirement, str(REAL_ENGINE), dest, wheels, ["orjson==3.13.0"], {"VLLM_TARGET_DEVICE": "cpu"})
    return dest


LANE = "    engine: vllm\n    launcher: process\n    executable: {python}\n    model: /models/m\n    ctx: 8192\n"
ATTENTION = {"minimax_m3_msa_decode_backend": "triton", "indexer_sparse_logits": False,
             "indexer_tp_shard_min_rows": 65536}
LANES = {
    # every flag whose default 0.34 changes, set: the lane keeps its own values
    "sets-all": ["--gpu-memory-utilization", "0.9", "--block-size", "16", "--no-enable-extensible-kv-cache",
                 "--no-numa-bind", "--eplb-config", '{"num_redundant_experts": 0}',
                 "--attention-config", json.dumps(ATTENTION)],
    "relies": ["--max-num-seqs", "64"],
    "refused": ["--gpu-memory-utilization", "0.9", "--quantization", "fp_quant", "--speculative-config",
                '{"method": "dflash", "model": "/models/d", "num_speculative_tokens": 8, '
                '"disable_padded_drafter_batch": true}', "--enable-auto-tool-choice",
                "--tool-call-parser", "musespark1x", "--reasoning-parser", "musespark1x"],   # renamed musespark
    "dflash": ["--gpu-memory-utilization", "0.9", "--speculative-config",
               '{"method": "dflash", "model": "/models/d", "num_speculative_tokens": 8}'],
}


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not REAL_ENGINE.exists():
        unavailable(f"the real-engine venv is missing at {REAL_ENGINE}; run tests/real_engine/setup")
    root = tmp_path_factory.mktemp("released")
    cache = root / "cache"
    for requirement in ("vllm==0.33.0", "vllm==0.34.0"):
        built = overlay(requirement, CACHE / "upgrade-tests")
        name, version = requirement.split("==")
        link = overlay_dir(cache, name, version, str(REAL_ENGINE))
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(built)
    lanes = root / "lanes.yaml"
    text = "lanes:\n"
    for name, flags in LANES.items():
        text += f"  {name}:\n" + LANE.format(python=REAL_ENGINE) + f"    extra: {json.dumps(flags)}\n"
        if name == "refused":
            text += "    env: {VLLM_USE_V2_MODEL_RUNNER: '1'}\n"
    lanes.write_text(text)
    out_json = root / "up.json"
    mp = pytest.MonkeyPatch()
    mp.setenv("GLMF_UPGRADE_CACHE", str(cache))
    capture = root / "stdout.txt"
    try:
        saved = sys.stdout
        with capture.open("w") as sys.stdout:
            code = main(["upgrade", "--lanes", str(lanes), "--from", "vllm==0.33.0", "--to", "vllm==0.34.0",
                         "--python", str(REAL_ENGINE), "--json", str(out_json)])
    finally:
        sys.stdout = saved
        mp.undo()
    report = json.loads(out_json.read_text())
    return {"code": code, "out": capture.read_text(), "changes": {r["lane"]: r["changes"] for r in report["lanes"]},
            "plugin": report["plugin"]}


def test_a_lane_that_sets_every_changed_flag_gets_nothing(upgraded: dict[str, Any]) -> None:
    assert upgraded["changes"]["sets-all"] == [], upgraded["changes"]["sets-all"]
    row = next(ln for ln in upgraded["out"].splitlines() if ln.startswith("sets-all "))
    assert row.split() == ["sets-all", "-", "no", "change", "0.33.0", "(vllm==0.33.0)", "->", "0.34.0", "(vllm==0.34.0)"]


def test_a_lane_relying_on_the_defaults_gets_the_changed_ones_with_the_engines_resolved_values(
        upgraded: dict[str, Any]) -> None:
    rows = {c["flag"]: c for c in upgraded["changes"]["relies"]}
    assert rows["--block-size"]["detail"].endswith("16 -> 64 (the engine's config)")
    assert rows["--gpu-memory-utilization"]["detail"].endswith("0.92 -> None (argparse); 0.92 -> 1.0 (the engine's "
                                                               "config)")
    assert rows["--enable-extensible-kv-cache"] == {
        "flag": "--enable-extensible-kv-cache", "change": "new default",
        "detail": "a new flag the lane does not pass: True (the engine's config)"}
    assert "num_redundant_experts 0 -> None" in rows["--eplb-config"]["detail"]
    assert not any(c.get("breaks") for c in rows.values())


def test_a_lane_with_what_0_34_dropped_is_refused_naming_each(upgraded: dict[str, Any]) -> None:
    breaking = {(c["flag"], c["change"]): c["detail"] for c in upgraded["changes"]["refused"] if c.get("breaks")}
    assert set(breaking) == {("--speculative-config", "unknown key"), ("--quantization", "unknown method"),
                             ("VLLM_USE_V2_MODEL_RUNNER", "env var not read"), ("--tool-call-parser", "unknown parser"),
                             ("--reasoning-parser", "unknown parser")}, breaking
    assert "'musespark1x' is not registered in this release (known: " in breaking[("--tool-call-parser",
                                                                                  "unknown parser")]
    assert breaking[("--speculative-config", "unknown key")].startswith("'disable_padded_drafter_batch': "
                                                                         "SpeculativeConfig has no such field")
    assert breaking[("--quantization", "unknown method")].startswith("'fp_quant' is not a quantization method")
    assert "--gpu-memory-utilization" not in {c["flag"] for c in upgraded["changes"]["refused"]}
    assert upgraded["code"] == 1
    assert upgraded["out"].rstrip().endswith("1 of 4 lane(s) would break: refused")   # and no plugin gap (below)


def test_pytest_glmf_reads_0_34_so_the_plugin_has_no_gap_there(upgraded: dict[str, Any]) -> None:
    """The DFlash lane boots on 0.34 (nothing of its own breaks), and this pytest-glmf reads 0.34's reworded
    override and the KV pool and context it settles after warmup (gates/boot/vllm.py): no plugin section.
    A release whose lines the gate does not read is reported apart, exit 3 (test_upgrade_cli.py,
    test_upgrade_coverage.py)."""
    assert not any(c.get("breaks") for c in upgraded["changes"]["dflash"])
    assert [g for g in upgraded["plugin"][0]["gaps"] if g["kind"] == "boot line"] == []
    out = upgraded["out"]
    assert max(len(line) for line in out.splitlines()) <= 120
    assert "the plugin, not the lanes" not in out and "VLLM_USE_V2_MODEL_RUNNER" in out


def test_a_json_flags_values_are_judged_by_the_config_class_with_its_constraints() -> None:
    """upgrade/values.py with the engine's own pydantic (the real-engine venv's): a key the class does not have,
    a value outside its Literal, one below its `Field(ge=1)`: each refused, naming the field."""
    import subprocess

    from pytest_glmf.upgrade import values

    if not REAL_ENGINE.exists():
        unavailable(f"the real-engine venv is missing at {REAL_ENGINE}; run tests/real_engine/setup")
    script = f"""
import sys, json
sys.path.insert(0, {str(Path(values.__file__).parent)!r})
import values
from typing import Literal
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

@dataclass(config=ConfigDict(extra="forbid"))
class SpeculativeConfig:
    method: Literal["ngram", "dflash"] | None = None
    prompt_lookup_min: int | None = Field(default=None, ge=1)

print(json.dumps(values._check_config("--speculative-config", SpeculativeConfig,
                                      {{"method": "custom_class", "prompt_lookup_min": 0, "gone": 1}})))
"""
    proc = subprocess.run([str(REAL_ENGINE), "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = {(f["change"], f["detail"].split(":")[0]) for f in json.loads(proc.stdout)}
    assert found == {("value refused", "method='custom_class'"), ("value refused", "prompt_lookup_min=0"),
                     ("unknown key", "'gone'")}, found
