"""A gate declares itself (issue 41 item 2): its `glmf` subcommand, its report columns and its place
in a report live in its own `spec.py` (`GateSpec.command`, `report_columns`, `report_rank`), and the
central places (pytest_glmf/cli.py, results/columns.py, the HTML page's gate order) loop over the
registry. A per-gate list written anywhere else fails here, naming the file and line; so does a
registered gate without its command, its docs page or a place of its own."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

from pytest_glmf.cli import GROUPS, SUBCOMMANDS
from pytest_glmf.gates.registry import GATES, gate_commands, report_order
from pytest_glmf.results.columns import gate_table

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_glmf"
# the one home of the list of gates
ALLOWED = {"gates/registry.py"}
# per-gate lists other helpers are folding into the registry now (issue 41 item 2, what remains):
# remove a file here when it loops over the registry
PENDING: set[str] = set()


def gate_words() -> set[str]:
    """What names a gate: its registry name and its command's name ("accept", "bootlog")."""
    return set(GATES) | set(gate_commands())


def central_gate_lists(package: Path, words: set[str], allowed: set[str]) -> list[str]:
    """`file:line` of each literal that lists 3 or more gates (a dict's keys, a tuple's, list's or
    set's items) in a module of `package` outside `allowed`."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Dict):
                items: list[ast.expr | None] = list(node.keys)
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                items = list(node.elts)
            else:
                continue
            named = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)} & words
            if len(named) >= 3:
                found.append(f"{rel}:{node.lineno}: {', '.join(sorted(named))}")
    return found


def test_no_per_gate_list_outside_the_registry() -> None:
    found = central_gate_lists(PACKAGE, gate_words(), ALLOWED | PENDING)
    assert not found, ("a list of gates outside gates/registry.py: declare it in each gate's spec.py "
                       "(GateSpec) and loop over the registry\n" + "\n".join(found))


def test_the_scan_finds_a_central_list(tmp_path: Path) -> None:
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "registry.py").write_text('GATES = ("curve", "drift", "boot")\n')
    (tmp_path / "report.py").write_text('ORDER = ("boot", "curve", "drift")\nTWO = {"curve": 1, "drift": 2}\n'
                                        'COLS = {\n    "curve": [], "drift": [], "accept": []}\n')
    words = {"curve", "drift", "boot", "accept"}
    assert central_gate_lists(tmp_path, words, {"gates/registry.py"}) == [
        "report.py:1: boot, curve, drift", "report.py:3: accept, curve, drift"]


def test_every_gate_declares_its_command_docs_page_and_place() -> None:
    listed = {name for _, names in GROUPS for name in names}
    for name, spec in GATES.items():
        assert spec.command is not None, f"gate {name!r}: no GateSpec.command in gates/{name}/spec.py"
        command = spec.command.name
        assert SUBCOMMANDS[command] == (spec.cli_module, spec.command.help) and command in listed, name
        assert callable(getattr(importlib.import_module(spec.cli_module), "cli", None)), spec.cli_module
        assert (ROOT / "docs" / "guide" / "gates" / f"{name}.md").is_file(), f"gate {name!r}: no docs page"
        assert len(set(spec.report_columns)) == len(spec.report_columns), f"gate {name!r}: a column twice"
    ranks = [spec.report_rank for spec in GATES.values()]
    assert len(set(ranks)) == len(ranks), "two gates at one place in a report"
    assert set(report_order()) == set(GATES) and len(set(gate_commands())) == len(GATES)


def test_a_gates_declared_columns_lead_its_table() -> None:
    """The capacity entry's `users` before its `stopped_by`, whatever order the entry was recorded in:
    the spec's report_columns, not a list in results/columns.py."""
    header, _ = gate_table("capacity", {"users=12": {"stopped_by": "slo", "wall_s": 3.0, "users": 12, "zeta": 1}})
    assert header == ["users", "stopped_by", "wall_s", "zeta"]
    assert list(GATES["capacity"].report_columns[:6]) == ["users", "rate_per_s", "boundary_users", "boundary_per_s",
                                                          "boundary_ci95", "stopped_by"]
