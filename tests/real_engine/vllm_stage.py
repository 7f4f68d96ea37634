"""The vLLM stage's names, importable by its test modules (a test module must not import
`conftest`: which folder's conftest that name is depends on what pytest collected last)."""
from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SETUP = HERE / "setup"
LANES_FILE = REPO / "examples" / "real-engine-lanes.yaml"
ORACLE = "real-oracle"
DIR_VAR = "GLMF_REAL_ENGINE_DIR"


def default_dir() -> Path:
    return Path(os.environ.get(DIR_VAR) or Path.home() / ".cache" / "pytest-glmf" / "real-engine")
