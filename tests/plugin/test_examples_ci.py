"""The CI workflow examples use only options and commands that exist."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from pytest_glmf.plugin.options import OPTIONS

EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "ci").glob("*.yml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_workflow_uses_real_options(path: Path, pytester: pytest.Pytester):
    doc = yaml.safe_load(path.read_text())
    assert doc["jobs"]
    used = set(re.findall(r"--glmf-[a-z-]+", path.read_text()))
    known = {f"--glmf-{n}" for n in OPTIONS} | {"--glmf-update-baseline"}
    assert used and used <= known, used - known
    assert "pytest --glmf-lane" in path.read_text() and "glmf report" in path.read_text()
    # every option the workflow passes is accepted by the plugin (an unknown one is a usage error)
    result = pytester.runpytest_subprocess("--help")
    for option in used:
        result.stdout.fnmatch_lines([f"*{option}*"])


def test_there_are_both_workflows():
    assert {p.name for p in EXAMPLES} == {"gate-image-upgrade.yml", "pr-check.yml"}
