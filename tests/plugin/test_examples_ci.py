"""The CI workflow examples use only options and commands that exist."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from pytest_glmf.plugin.options import OPTIONS

EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "ci").glob("*.yml"))
PYTEST_WORKFLOWS = [p for p in EXAMPLES if p.name != "upgrade-watch.yml"]


@pytest.mark.parametrize("path", PYTEST_WORKFLOWS, ids=lambda p: p.name)
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


def test_there_are_the_three_workflows():
    assert {p.name for p in EXAMPLES} == {"gate-image-upgrade.yml", "pr-check.yml", "upgrade-watch.yml"}


def test_the_upgrade_watch_runs_glmf_upgrade_on_a_schedule_with_its_real_options(capsys: pytest.CaptureFixture[str]):
    """The scheduled job asks `glmf upgrade` about NAME==latest; every option it passes is one the command has,
    and the exit codes its comment promises are the ones `glmf upgrade --help` documents."""
    from pytest_glmf.cli import main

    path = Path(__file__).parents[2] / "examples" / "ci" / "upgrade-watch.yml"
    text = path.read_text()
    doc = yaml.safe_load(text)
    assert doc[True]["schedule"][0]["cron"]                 # YAML 1.1 reads the key `on` as True
    run = " ".join(step.get("run", "") for step in doc["jobs"]["watch"]["steps"])
    assert 'glmf upgrade --lanes lanes.yaml --from "$FROM" --to "${engine}==latest"' in run
    with pytest.raises(SystemExit):
        main(["upgrade", "--help"])
    help_text = capsys.readouterr().out
    command = run[run.index("glmf upgrade "):run.index("| tee")]
    options = set(re.findall(r"--[a-z-]+", command))
    assert options == {"--lanes", "--from", "--to", "--json"}
    assert all(f"{option} " in help_text for option in options), help_text
    assert "  1  a lane would break" in help_text and "  3  no lane would break, but pytest-glmf" in help_text
    assert "exit 1: a lane would break" in text and "exit 3: the lanes boot, but this pytest-glmf" in text
