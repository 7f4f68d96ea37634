"""`glmf init`: the examples and a thresholds file to edit, written out; nothing overwritten unless asked."""
from __future__ import annotations

from pathlib import Path

from pytest_glmf.cli import main

REPO_EXAMPLES = Path(__file__).resolve().parents[1] / "pytest_glmf" / "examples"


def test_init_writes_every_example_and_the_thresholds(tmp_path: Path, capsys) -> None:
    target = tmp_path / "mine"
    assert main(["init", str(target)]) == 0
    written = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    shipped = sorted(str(p.relative_to(REPO_EXAMPLES)) for p in REPO_EXAMPLES.rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts)
    assert written == sorted([*shipped, "thresholds.yaml"])
    assert (target / "sim-lanes.yaml").read_text() == (REPO_EXAMPLES / "sim-lanes.yaml").read_text()
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (f"next: pytest --glmf-lanes {target / 'sim-lanes.yaml'} --glmf-lane round1 -k boot   "
                       "(the recipe's round-1 mistake: fails on its 7 seats)")


def test_init_never_overwrites_unless_forced(tmp_path: Path, capsys) -> None:
    (tmp_path / "sim-lanes.yaml").write_text("mine\n")
    assert main(["init", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"glmf init: would overwrite {tmp_path / 'sim-lanes.yaml'}; "
                                       "pass --force to replace them\n")
    assert (tmp_path / "sim-lanes.yaml").read_text() == "mine\n"
    assert not (tmp_path / "test_my_service.py").exists()       # nothing written at all
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "sim-lanes.yaml").read_text() != "mine\n"
