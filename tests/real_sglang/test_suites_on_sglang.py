"""The plugin as a user runs it, against the real SGLang: `pytest --glmf-lanes ... --glmf-lane
sglang-oracle` in a fresh process, the ready-made suites with the stage's thresholds file. The
plugin launches the lane itself (process launcher, preflight, readiness, identity, served
surface), every gate judges, acceptance is skipped up front with the server's own reason, the run
lands in the history store, and nothing is left running afterwards. Then two lanes with `-n 2`:
one SGLang up at a time, the workers sharing each lane's tests, a result file per lane and the comparison.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from sglang_stage import CANDIDATE, LANES_FILE, ORACLE, THRESHOLDS_FILE

from pytest_glmf.suites import __file__ as SUITES_INIT

pytestmark = [pytest.mark.real_sglang]


def _outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        kind, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind, text = child.tag, (child.get("message") or "") + (child.text or "")
        out[name] = (kind, text)
    return out


def _server_processes(model_dir: Path) -> list[str]:
    """Processes on this machine whose command line serves the model dir (SGLang's three)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(model_dir).encode() in argv and b"sglang.launch_server" in argv:
            found.append(f"{proc.name}: {b' '.join(argv)[:120]!r}")
    return found


def test_the_ready_made_suites_on_the_real_sglang(sglang_dir: Path, tmp_path: Path, sglang_report: dict) -> None:
    results = tmp_path / "glmf-results"
    junit = tmp_path / "junit.xml"
    env = {**os.environ, "GLMF_REAL_SGLANG_DIR": str(sglang_dir), "GLMF_PREFLIGHT_CACHE": str(tmp_path / "preflight")}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
            "--glmf-lanes", str(LANES_FILE), "--glmf-lane", ORACLE, "--glmf-thresholds", str(THRESHOLDS_FILE),
            "--glmf-results", str(results), f"--junitxml={junit}", "-o", "junit_family=xunit1",
            "-k", "boot or curve or tools or acceptance"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500)
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    sglang_report["suites"] = {"table": "\n".join(proc.stdout.splitlines()[-40:]), "exit": proc.returncode}
    assert proc.returncode == 0, tail
    outcomes = _outcomes(junit)
    by_gate: dict[str, list[str]] = {}
    for name, (kind, _) in outcomes.items():
        by_gate.setdefault(name.split("::")[0], []).append(kind)
    assert all(k == "passed" for k in by_gate["test_boot"]), by_gate
    assert "passed" in by_gate["test_curve"] and "failed" not in by_gate["test_curve"], by_gate
    assert "passed" in by_gate["test_tools"] and "failed" not in by_gate["test_tools"], by_gate
    # acceptance: skipped before anything was measured, in the server's own words
    acceptance = {n: o for n, o in outcomes.items() if n.startswith("test_acceptance")}
    assert acceptance and all(kind == "skipped" for kind, _ in acceptance.values()), acceptance
    reasons = {text for _, text in acceptance.values()}
    assert any("/server_info says speculative_algorithm: null" in r for r in reasons), reasons
    doc: dict[str, Any] = json.loads((results / f"{ORACLE}-latest.json").read_text())
    assert doc["exitstatus"] == 0
    assert not doc.get("acceptance"), "acceptance measured something on a server without speculation"
    prov = doc["provenance"]
    assert prov["server_config"]["speculative_algorithm"] is None
    assert prov["server_config"]["told"]["speculative_algorithm"] == "/server_info"
    assert prov["served_surface"]["version"] == "0.5.23"
    assert prov["preflight"]["status"] == "ok"
    with sqlite3.connect(results / "history.sqlite") as db:
        runs = db.execute("SELECT lane, verdict FROM glmf_runs").fetchall()
    assert runs == [(ORACLE, "passed")], runs
    assert _server_processes(sglang_dir / "models" / "oracle") == []


TWO_LANES_TEST = """\
import json, os, time
import pytest


@pytest.mark.parametrize("i", range(4))
def test_served(i, glmf_lane, glmf_server, glmf_client):
    t0 = time.time()
    assert glmf_client.get_json("/v1/models")["data"][0]["id"]
    with open("intervals.jsonl", "a") as f:
        f.write(json.dumps({"lane": glmf_lane.name, "pid": glmf_server.provenance["pid"], "t0": t0,
                            "t1": time.time(), "worker": os.environ["PYTEST_XDIST_WORKER"]}) + "\\n")
"""


def test_two_real_lanes_under_xdist_boot_one_at_a_time(sglang_dir: Path, tmp_path: Path, sglang_report: dict) -> None:
    pytest.importorskip("xdist")
    boot = yaml.safe_load(THRESHOLDS_FILE.read_text())["lanes"][ORACLE]["boot"]
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(yaml.safe_dump({"schema": 1, "lanes": {ORACLE: {"boot": boot}, CANDIDATE: {"boot": boot}}}))
    (tmp_path / "test_two.py").write_text(TWO_LANES_TEST)
    results = tmp_path / "glmf-results"
    env = {**os.environ, "GLMF_REAL_SGLANG_DIR": str(sglang_dir), "GLMF_PREFLIGHT_CACHE": str(tmp_path / "preflight")}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
            "--glmf-lanes", str(LANES_FILE), "--glmf-lane", ORACLE, "--glmf-lane", CANDIDATE,
            "--glmf-thresholds", str(thresholds), "--glmf-results", str(results),
            "test_two.py", str(Path(SUITES_INIT).parent / "test_boot.py")]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    sglang_report["two_lanes_xdist"] = {"exit": proc.returncode, "table": "\n".join(proc.stdout.splitlines()[-30:])}
    assert proc.returncode == 0, tail
    seen = [json.loads(x) for x in (tmp_path / "intervals.jsonl").read_text().splitlines()]
    pids = {lane: {x["pid"] for x in seen if x["lane"] == lane} for lane in (ORACLE, CANDIDATE)}
    assert all(len(p) == 1 for p in pids.values()) and pids[ORACLE] != pids[CANDIDATE], pids
    assert max(x["t1"] for x in seen if x["lane"] == ORACLE) < min(x["t0"] for x in seen if x["lane"] == CANDIDATE)
    # the workers share the lanes' tests (xdist deals the first lane's first units to both workers)
    assert {x["worker"] for x in seen if x["lane"] == ORACLE} == {"gw0", "gw1"}, seen
    assert sorted(x["lane"] for x in seen) == [CANDIDATE] * 4 + [ORACLE] * 4, seen
    for lane in (ORACLE, CANDIDATE):
        doc = json.loads((results / f"{lane}-latest.json").read_text())
        assert doc["exitstatus"] == 0 and doc["incomplete"] == [], (lane, doc.get("incomplete"))
        assert doc["gates"]["boot"]["facts"]["kv_tokens"] == 32768, lane
        assert doc["provenance"]["pid"] in pids[lane]
    assert f"glmf: lane {CANDIDATE}: booting (lane 2 of 2)" in proc.stdout, tail
    assert "Boot facts side by side" in proc.stdout and list(results.glob("compare-*.md")), tail
    for model in ("oracle", "nvfp4"):
        assert _server_processes(sglang_dir / "models" / model) == [], model
