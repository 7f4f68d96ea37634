"""A gate declares itself (issue 41 item 2): its `glmf` subcommand, its report columns and its place
in a report live in its own `spec.py` (`GateSpec.command`, `report_columns`, `report_rank`), and the
central places (pytest_glmf/cli.py, results/columns.py, the HTML page's gate order) loop over the
registry. A per-gate list written anywhere else fails here, naming the file and line; so does a
registered gate without its command, its docs page or a place of its own. What a gate adds to the
reports (`GateSpec.report`: its `GateReport`) is declared in its folder too: a comparison against a
gate's name (`if gate == "curve"`) in the reports, the comparison or the CLI fails here, and a gate
added to the registry shows its section in every report without a line changed outside its folder."""
from __future__ import annotations

import ast
import importlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_glmf.cli import GROUPS, SUBCOMMANDS, main
from pytest_glmf.gates.registry import GATES, gate_commands, report_order
from pytest_glmf.gates.spec import GateSpec, Metric
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


# where a gate's name compared decides what a report does: the reports, the comparison, the CLI
DISPATCHERS = ("results", "compare", "cli.py")


def gate_comparisons(package: Path, words: set[str], places: tuple[str, ...] = DISPATCHERS) -> list[str]:
    """`file:line` of each comparison (==, !=, in, not in) with a gate's name written as a literal
    (`gate == "curve"`, `gate in ("curve", "capacity")`) in `places` of `package`."""
    found = []
    for place in places:
        paths = [package / place] if place.endswith(".py") else sorted((package / place).rglob("*.py"))
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not (isinstance(node, ast.Compare)
                        and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)):
                    continue
                operands = [node.left, *node.comparators]
                items = [i for o in operands for i in (o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o])]
                named = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)} & words
                if named:
                    found.append(f"{path.relative_to(package).as_posix()}:{node.lineno}: {', '.join(sorted(named))}")
    return found


def test_no_report_decides_by_a_gates_name() -> None:
    found = gate_comparisons(PACKAGE, gate_words())
    assert not found, ("a report compares a gate's name: declare what the gate adds in its folder (GateSpec.report, "
                       "a GateReport) and call it through the registry\n" + "\n".join(found))


def test_the_scan_finds_a_comparison_with_a_gates_name(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "compare").mkdir()
    (tmp_path / "results" / "report.py").write_text('if gate == "curve":\n    pass\nok = key == "rate"\n')
    (tmp_path / "compare" / "report.py").write_text('x = [g for g in gs if g not in ("boot", "x")]\n')
    (tmp_path / "cli.py").write_text('if "accept" != sub:\n    pass\n')
    (tmp_path / "other.py").write_text('if gate == "curve":\n    pass\n')
    assert gate_comparisons(tmp_path, {"curve", "boot", "accept"}) == [
        "results/report.py:1: curve", "compare/report.py:1: boot", "cli.py:1: accept"]


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


# ---------------------------------------------------------------------------- a gate joins

# what a new gate's folder declares for the reports (gates/<gate>/report.py): here a module of its own
TOY_REPORT = """
from pytest_glmf.gates.spec import CompareTable, GateReport


def notes(entries):
    return [f"toy: {len(entries)} run(s), each on one toy"]


def recorded(entries):
    return "glmf toy printed: fast enough"


def charts(entries, bounds):
    return ['<svg class="chart" id="toy-chart"></svg>']


def compare(lanes):
    return ["", *(name for name, _ in lanes)], [["speed", *(str(doc["gates"]["toy"]["run"]["speed"]) for _, doc in lanes)]]


def legacy(data):
    return {"run": {"speed": data["toy_speed"], "wall_s": 1.5}} if "toy_speed" in data else None


REPORT = GateReport(notes=notes, recorded=recorded, charts=charts, compare=CompareTable("Toy speed by lane", 99, compare),
                    legacy=legacy)
"""


@dataclass(frozen=True)
class ToySettings:
    pass


@pytest.fixture
def toy_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GateSpec:
    """A gate added to the registry, its report hooks in a module of its own."""
    (tmp_path / "toy_report.py").write_text(TOY_REPORT)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = GateSpec.declare("toy", [Metric("speed", "higher", "tok/s", doc="how fast the toy streams")], ToySettings,
                            title="Toy speed", definitions=("speed: tokens per second of one toy.",),
                            report_columns=("speed",), report_rank=5, report="toy_report")
    monkeypatch.setitem(GATES, "toy", spec)
    for lane, speed in (("a", 5), ("b", 7)):
        (tmp_path / f"{lane}.json").write_text(json.dumps({"lane": {"name": lane}, "gates": {
            "toy": {"run": {"wall_s": 1.5, "speed": speed}}}}))
    return spec


def test_a_gate_added_to_the_registry_reports_from_its_own_folder(toy_gate, tmp_path: Path, capsys) -> None:
    """Its table (its declared columns first), title, notes, recorded output, definitions and chart
    in `glmf report`'s terminal, Markdown and HTML; its table in `glmf compare`; an older output of
    its command read back by its own reader: nothing outside its spec and report module names it."""
    md, html = tmp_path / "a.md", tmp_path / "a.html"
    assert main(["report", str(tmp_path / "a.json"), "--markdown", str(md), "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert ("\n\nToy speed\nkey | speed | wall_s\n----+-------+-------\nrun | 5     | 1.5\n"
            "toy: 1 run(s), each on one toy\n\nglmf toy printed: fast enough\n") in out, out
    assert ("### Toy speed\n\n| key | speed | wall_s |\n|---|---|---|\n| run | 5 | 1.5 |\n\n"
            "toy: 1 run(s), each on one toy\n\n- speed: tokens per second of one toy.\n") in md.read_text()
    page = html.read_text()
    section = page[page.index('id="gate-toy"'):]
    assert "Toy speed" in section and 'id="toy-chart"' in section and "toy: 1 run(s), each on one toy" in section
    assert "how fast the toy streams" in section and "speed: tokens per second of one toy." in section

    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    assert "\n\nToy speed by lane\n      | a | b\n------+---+--\nspeed | 5 | 7" in capsys.readouterr().out

    old = tmp_path / "old.json"
    old.write_text(json.dumps({"toy_speed": 3}))
    assert main(["report", str(old)]) == 0
    assert "\nToy speed\nkey | speed | wall_s\n----+-------+-------\nrun | 3     | 1.5\n" in capsys.readouterr().out
