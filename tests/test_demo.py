"""`./run demo` prints each results table once (it printed the session's tables, then `glmf report`
printed them again) and every line of ours fits 120 columns (a boot-only demo: seconds, not 12
minutes)."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST_HEADER = ("platform ", "rootdir: ", "configfile: ", "plugins: ", "cachedir: ", "cachedir=")


def test_the_demo_prints_each_table_once_within_120_columns() -> None:
    proc = subprocess.run([str(ROOT / "run"), "demo", "-k", "test_boot_log_has_no_problems"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines.count("Boot facts") == 1, proc.stdout
    assert sum(line.startswith("pytest-glmf results: lane batch") for line in lines) == 1
    # a path is as long as the checkout's: the results folder's measured as "RESULTS"
    results = str(ROOT / "glmf-results" / "demo")
    wide = [line for line in lines if len(line.replace(results, "RESULTS")) > 120 and not line.startswith(PYTEST_HEADER)]
    assert wide == [], "\n".join(wide)
