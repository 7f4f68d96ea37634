"""The SGLang stage's names, importable by its test modules (a test module must not import
`conftest`: with tests/real_engine collected in the same session that name is the vLLM stage's)."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SETUP = HERE / "setup"
LANES_FILE = REPO / "examples" / "real-sglang-lanes.yaml"
THRESHOLDS_FILE = HERE / "thresholds.yaml"
ORACLE = "sglang-oracle"
CANDIDATE = "sglang-candidate"
DIR_VAR = "GLMF_REAL_SGLANG_DIR"
