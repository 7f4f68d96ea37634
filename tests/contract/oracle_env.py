"""Where the contract oracle's Python is, for any test that needs the released SGLang.

`oracle_python()` checks `tests/contract/setup --check`; not built: skip with the setup command
outside CI, fail in CI (`CI=true`), so a stage never goes green by skipping.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SETUP = HERE / "setup"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def oracle_python() -> Path:
    try:
        proc = subprocess.run(["bash", str(SETUP), "--check"], capture_output=True, text=True, timeout=60)
        ok, why = proc.returncode == 0, (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok, why = False, [f"{type(exc).__name__}: {exc}"]
    if not ok:
        msg = f"contract oracle not set up ({why[0]}); run `{SETUP.relative_to(REPO)}` (~90 s cold, 2.5 GB)"
        if in_ci():
            pytest.fail(f"CI=true and {msg}", pytrace=False)
        pytest.skip(msg)
    return Path(subprocess.run(["bash", str(SETUP), "--python"], capture_output=True, text=True,
                               check=True).stdout.strip())
