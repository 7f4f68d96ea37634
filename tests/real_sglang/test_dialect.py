"""The simulator against the released SGLang 0.5.23: the same requests to both, answers compared by
shape (pytest_glmf/testing/dialect.py says what "same shape" means per surface; docs/real-sglang.md
"Dialect" lists what was found and fixed).

One real server boots for this module (the oracle lane, on a port named in advance so `/health` is
polled while it starts); its shapes are written to $GLMF_REAL_SGLANG_RESULTS/dialect-real.json.
The simulator boots with the real lane's flags that matter here (dialect_capture.SIM_FLAGS). The checked-in shapes
(tests/testing/data/sglang-0.5.23-shapes.json, which the non-stage tests hold the simulator to)
must equal the real capture: a difference says how to refresh them.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sglang_stage import ORACLE

from pytest_glmf.launch.process import free_port
from pytest_glmf.testing import dialect
from pytest_glmf.testing.dialect_capture import StartupProbe, capture, capture_sim, dump

pytestmark = [pytest.mark.real_sglang]

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / "tests" / "testing" / "data" / "sglang-0.5.23-shapes.json"
@pytest.fixture(scope="module")
def real_shapes(sglang_servers: Any, sglang_results_dir: Path) -> dict[str, Any]:
    port = free_port()
    sglang_servers.lanes = {**sglang_servers.lanes, ORACLE: replace(sglang_servers.lanes[ORACLE], port=port)}
    probe = StartupProbe(f"http://127.0.0.1:{port}", interval_s=0.2).start()
    try:
        server = sglang_servers.get(ORACLE)
    finally:
        probe.stop()
    shapes = capture(server.base_url) | {"health_starting": probe.shape()}
    sglang_servers.stop(ORACLE)
    out = dump(shapes)
    (sglang_results_dir / "dialect-real.json").write_text(json.dumps(out, indent=1, sort_keys=True))
    return out


@pytest.fixture(scope="module")
def sim_shapes(sglang_results_dir: Path) -> dict[str, Any]:
    out = dump(capture_sim())
    (sglang_results_dir / "dialect-sim.json").write_text(json.dumps(out, indent=1, sort_keys=True))
    return out


def test_the_simulator_speaks_what_the_released_sglang_speaks(real_shapes: dict, sim_shapes: dict) -> None:
    real = {k: dialect.from_json(v) for k, v in real_shapes.items()}
    sim = {k: dialect.from_json(v) for k, v in sim_shapes.items()}
    lines = dialect.compare_captures(real, sim)
    assert not lines, "the simulator differs from SGLang 0.5.23:\n" + "\n".join(lines)


def test_the_checked_in_shapes_are_the_real_ones(real_shapes: dict) -> None:
    stored = json.loads(STORED.read_text())
    real = {k: dialect.from_json(v) for k, v in real_shapes.items()}
    kept = {k: dialect.from_json(v) for k, v in stored.items()}
    lines = [f"{k}: captured, not in the stored shapes" for k in sorted(set(real) - set(kept))]
    lines += [f"{k}: stored, no longer captured" for k in sorted(set(kept) - set(real))]
    for k in sorted(set(real) & set(kept)):
        if k == "metrics":
            lines += dialect.metrics_diff(real[k], kept[k], set(real[k]) | set(kept[k]))
        else:
            lines += dialect.diff(real[k], kept[k], surface=k)
    assert not lines, (f"{STORED.relative_to(REPO)} is not what SGLang 0.5.23 answers (the 'sim' side below is "
                       f"the stored file); copy $GLMF_REAL_SGLANG_RESULTS/dialect-real.json over it:\n"
                       + "\n".join(lines))
