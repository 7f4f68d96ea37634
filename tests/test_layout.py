"""Every gate in one shape (CONTRIBUTING.md, "How to add a gate"): its package holds `api.py` (the
public measurement and assertion functions), `spec.py` (its declaration), `fixture.py` (its
fixtures, registered through the plugin's one list `FIXTURE_MODULES`), and a ready-made suite
`suites/test_<gate>.py` uses them. A gate of the registry that misses a part fails naming it. A
gate package's public names are those it imports under `if TYPE_CHECKING:`, each loaded from
there on first use (gates/__init__.py, `lazy_exports`)."""
from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable
from pathlib import Path

import pytest

import pytest_glmf.plugin as plugin
from pytest_glmf.gates.registry import GATES
from pytest_glmf.lazy import type_checking_imports
from pytest_glmf.plugin.measuring import serial_fixtures

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_glmf"
PARTS = ("api.py", "spec.py", "fixture.py")


def layout_gaps(package: Path, gates: Iterable[str], registered: Iterable[str]) -> list[str]:
    """What each gate's shape misses, one line a part: a module of its package, its suite, or its
    fixture module's registration."""
    registered = set(registered)
    gaps = []
    for gate in gates:
        home = package / "gates" / gate
        gaps += [f"gate {gate!r}: no gates/{gate}/{part}" for part in PARTS if not (home / part).is_file()]
        if not (package / "suites" / f"test_{gate}.py").is_file():
            gaps.append(f"gate {gate!r}: no suite suites/test_{gate}.py")
        if f"pytest_glmf.gates.{gate}.fixture" not in registered:
            gaps.append(f"gate {gate!r}: pytest_glmf.gates.{gate}.fixture is not in plugin.FIXTURE_MODULES")
    return gaps


def test_every_gate_has_api_spec_fixture_and_suite_and_its_fixture_is_registered() -> None:
    gaps = layout_gaps(PACKAGE, GATES, plugin.FIXTURE_MODULES)
    assert not gaps, "\n".join(gaps)
    assert set(plugin.FIXTURE_MODULES) <= set(plugin.pytest_plugins)


def test_the_layout_check_names_the_missing_part(tmp_path: Path) -> None:
    for part in ("gates/curve/api.py", "gates/curve/spec.py", "gates/curve/fixture.py", "suites/test_curve.py",
                 "gates/drift/api.py", "gates/drift/spec.py", "suites/test_drift.py"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / part).write_text("")
    assert layout_gaps(tmp_path, ["curve", "drift", "boot"], ["pytest_glmf.gates.curve.fixture"]) == [
        "gate 'drift': no gates/drift/fixture.py",
        "gate 'drift': pytest_glmf.gates.drift.fixture is not in plugin.FIXTURE_MODULES",
        "gate 'boot': no gates/boot/api.py", "gate 'boot': no gates/boot/spec.py",
        "gate 'boot': no gates/boot/fixture.py",
        "gate 'boot': no suite suites/test_boot.py",
        "gate 'boot': pytest_glmf.gates.boot.fixture is not in plugin.FIXTURE_MODULES"]


@pytest.mark.parametrize("module", plugin.FIXTURE_MODULES)
def test_each_fixture_module_names_its_serial_fixtures_among_its_own(module: str) -> None:
    mod = importlib.import_module(module)
    serial = getattr(mod, "SERIAL", None)
    assert isinstance(serial, tuple), f"{module}: no SERIAL tuple (the fixtures whose tests measure alone; () if none)"
    missing = [name for name in serial if not hasattr(mod, name)]
    assert not missing, f"{module}: SERIAL names {missing}, which it does not define"


def test_the_speed_and_numerics_fixtures_measure_alone() -> None:
    assert set(serial_fixtures(plugin.FIXTURE_MODULES)) == {
        "glmf_curve", "glmf_acceptance", "glmf_drift", "glmf_agents", "glmf_replay", "glmf_capacity"}


@pytest.mark.parametrize("package", [*(f"pytest_glmf.gates.{gate}" for gate in GATES), "pytest_glmf.compare",
                                     "pytest_glmf.load"])
def test_a_packages_public_names_are_its_type_checking_imports_each_loaded_on_use(package: str) -> None:
    mod = importlib.import_module(package)
    homes = type_checking_imports(Path(mod.__file__ or ""))
    assert sorted(mod.__all__) == sorted(homes), f"{package}: __all__ and the names imported under TYPE_CHECKING differ"
    for name, (module, attr) in homes.items():
        assert getattr(mod, name) is getattr(importlib.import_module(module), attr)
    assert set(homes) <= set(dir(mod))
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nothing_here'"):
        mod.nothing_here  # noqa: B018


def test_type_checking_imports_reads_only_the_guarded_absolute_imports(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text("from typing import TYPE_CHECKING\nfrom pkg.a import loaded_now\n\nif TYPE_CHECKING:\n"
                    "    from pkg.api import measure, Result as Answer\n    from pkg.spec import Settings\n"
                    "    from . import relative\n")
    assert type_checking_imports(init) == {"measure": ("pkg.api", "measure"), "Answer": ("pkg.api", "Result"),
                                           "Settings": ("pkg.spec", "Settings")}


# ---------------------------------------------------------------------------- rooms
# Who may import whom (issue 41, "Shared code in the wrong room"). Launchers and the config sit below
# the results: they reach redaction (pytest_glmf/redact.py) and the model directory's facts
# (launch/modeldir.py) going down, never the results package. The session object and the lane's run
# are the plugin's internals: suites, gates and the comparison ask them through the public
# accessors (plugin/accessors.py), as other plugins ask pytest-xdist's `is_xdist_worker`.
BELOW_RESULTS = ("launch", "config")
PLUGIN_INTERNALS = ("session", "run", "bookkeeping", "faults", "lanesched", "serial", "history", "options")
# The load engine (pytest_glmf/load: the streaming client, workers, records, self-check) sits below the
# gates: curve, capacity and agents measure through it as peers, by the names its package exports
# (`from pytest_glmf.load import run_rows`), never its modules; it imports no gate, nor what sits above them.
ABOVE_LOAD = ("gates", "plugin", "suites", "compare", "results", "upgrade")
# A gate's own modules are its: another gate reaches it through its package's public names, its
# declaration (spec.py, which the registry reads) or its fixtures. What one gate still imports of
# another's modules, each named with why (the boot gate's facts, hints and parser are every gate's
# reading of a server; agents' capacity is capacity's search over sessions; `glmf capacity` shares
# the curve's client flags): nothing is added to this list without a reason.
GATE_PUBLIC_MODULES = ("spec", "fixture")
SHARED_GATE_MODULES = {
    ("agents", "capacity.search"), ("agents", "capacity.slo"),
    ("capacity", "boot.hints"), ("capacity", "boot.parse"), ("capacity", "boot.told"), ("capacity", "curve.cli"),
    ("curve", "boot.hints"), ("curve", "boot.parse"), ("curve", "boot.told"),
}


def imported_modules(path: Path, package: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, function-local and TYPE_CHECKING ones included."""
    here = path.relative_to(package.parent).with_suffix("").parts
    base = here[:-1]   # the package a relative import starts from (a module's, or the __init__'s own)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join([*base[:len(base) - node.level + 1], *([module] if module else [])])
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def room_violations(package: Path) -> list[str]:
    name = package.name
    out = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        room = relative.split("/")[0]
        for line, module in imported_modules(path, package):
            parts = module.split(".")
            if parts[0] != name or len(parts) < 2:
                continue
            if room in BELOW_RESULTS and parts[1] == "results":
                out.append(f"{name}/{relative}:{line}: {room}/ imports {'.'.join(parts[:3])}: the results are above it")
            if room != "plugin" and parts[1] == "plugin" and len(parts) > 2 and parts[2] in PLUGIN_INTERNALS:
                out.append(f"{name}/{relative}:{line}: imports {name}.plugin.{parts[2]}, the plugin's internals: "
                           "use pytest_glmf.plugin.accessors")
            if room != "load" and parts[1] == "load" and len(parts) > 2 and (package / "load" / f"{parts[2]}.py").is_file():
                out.append(f"{name}/{relative}:{line}: imports {name}.load.{parts[2]}, a module of the load engine: "
                           f"import its names from {name}.load")
            if room == "load" and parts[1] in ABOVE_LOAD:
                out.append(f"{name}/{relative}:{line}: load/ imports {'.'.join(parts[:3])}: the load engine sits "
                           "below the gates")
            out += gate_private_import(package, relative, line, parts)
    return list(dict.fromkeys(out))   # one line per import, however many names it takes


def gate_private_import(package: Path, relative: str, line: int, parts: list[str]) -> list[str]:
    """A gate's module importing another gate's own module (not its package, spec or fixtures)."""
    here = relative.split("/")
    if here[0] != "gates" or len(here) < 3 or parts[1] != "gates" or len(parts) < 4:
        return []
    gate, other, module = here[1], parts[2], parts[3]
    if other == gate or module in GATE_PUBLIC_MODULES or not (package / "gates" / other / f"{module}.py").is_file() \
            or (gate, f"{other}.{module}") in SHARED_GATE_MODULES:
        return []
    return [f"{package.name}/{relative}:{line}: imports {package.name}.gates.{other}.{module}, the {other} gate's "
            f"own module: use {package.name}.gates.{other}'s public names (or, shared by both, {package.name}.load)"]


def test_launch_and_config_never_import_results_and_only_the_plugin_reaches_the_session() -> None:
    violations = room_violations(PACKAGE)
    assert not violations, "\n".join(violations)


def test_the_room_check_names_each_import_up(tmp_path: Path) -> None:
    pkg = tmp_path / "pytest_glmf"
    for part, text in {"launch/base.py": "from pytest_glmf.results.redact import Redactor\n",
                       "config/lanes.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from ..results import recorder\n",
                       "suites/test_x.py": "def f():\n    from pytest_glmf.plugin.session import session_of\n",
                       "gates/drift/fixture.py": "from pytest_glmf.plugin.accessors import lanes_file\n"
                                                 "from pytest_glmf.plugin.measuring import LaneGates\n",
                       "plugin/accessors.py": "from pytest_glmf.plugin.session import session_of\n",
                       "results/recorder.py": "from pytest_glmf.redact import Redactor\n"}.items():
        (pkg / part).parent.mkdir(parents=True, exist_ok=True)
        (pkg / part).write_text(text)
    assert room_violations(pkg) == [
        "pytest_glmf/config/lanes.py:3: config/ imports pytest_glmf.results.recorder: the results are above it",
        "pytest_glmf/launch/base.py:1: launch/ imports pytest_glmf.results.redact: the results are above it",
        "pytest_glmf/suites/test_x.py:2: imports pytest_glmf.plugin.session, the plugin's internals: "
        "use pytest_glmf.plugin.accessors"]


# ---------------------------------------------------------------------------- the bottom
# Text for people (pytest_glmf/text.py: numbers, tables that fit 120 columns, folded lines) and
# redaction (pytest_glmf/redact.py) sit at the package's bottom: every room reaches them going down,
# so they import nothing of pytest_glmf. Each text helper has one home: it is imported from
# pytest_glmf.text, never through a module that imported it for its own use (gates/verdict.py, which
# held them before issue 41, renders its failure table with them).
BOTTOM = ("text.py", "redact.py", "cpus.py")


def defined_names(path: Path) -> set[str]:
    """The names a module defines at its top (functions, classes, assignments), not those it imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _module_file(package: Path, module: str) -> Path | None:
    """The file of a module of the package (`pkg.gates.verdict` -> pkg/gates/verdict.py), if it is one."""
    parts = module.split(".")
    if parts[0] != package.name:
        return None
    path = package.joinpath(*parts[1:])
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


def bottom_violations(package: Path, *users: Path) -> list[str]:
    """The bottom modules' imports of the package, and every text helper taken from another module
    than pytest_glmf.text (`from pkg.gates.verdict import fmt`, or `verdict.fold` after
    `from pkg.gates import verdict`), in the package and in the `users` folders (tests, bench)."""
    name = package.name
    text_names = {n for n in defined_names(package / "text.py") if not n.startswith("_")}
    out = []
    for relative in BOTTOM:
        for line, module in imported_modules(package / relative, package):
            if module.split(".")[0] == name:
                out.append(f"{name}/{relative}:{line}: imports {module}: {relative} is at the bottom, "
                           f"it imports nothing of {name}")
    for path in sorted(p for folder in (package, *users) for p in folder.rglob("*.py")):
        shown = path.relative_to(package.parent).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        modules: dict[str, str] = {}          # a local name bound to a module of the package -> the module
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not (node.module or "").startswith(name):
                continue
            for alias in node.names:
                home = f"{node.module}.{alias.name}"
                if alias.name in text_names and node.module != f"{name}.text" and (
                        (file := _module_file(package, node.module or "")) is None
                        or alias.name not in defined_names(file)):
                    out.append(f"{shown}:{node.lineno}: imports {alias.name} from {node.module}: "
                               f"its home is {name}.text")
                if _module_file(package, home) is not None:
                    modules[alias.asname or alias.name] = home
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in text_names
                    and (module := modules.get(node.value.id)) and module != f"{name}.text"
                    and node.attr not in defined_names(_module_file(package, module) or path)):
                out.append(f"{shown}:{node.lineno}: uses {module}.{node.attr}: its home is {name}.text")
    return out


def test_the_bottom_imports_nothing_of_the_package_and_text_helpers_come_from_their_home() -> None:
    root = PACKAGE.parent
    violations = bottom_violations(PACKAGE, root / "tests", root / "bench")
    assert not violations, "\n".join(violations)
    # the verdict renders its failure table with the text helpers; it defines none of them
    assert not defined_names(PACKAGE / "gates" / "verdict.py") & defined_names(PACKAGE / "text.py")


def test_the_bottom_check_names_each_import_up_and_each_helper_taken_from_elsewhere(tmp_path: Path) -> None:
    pkg = tmp_path / "pytest_glmf"
    for part, text in {"text.py": "from pytest_glmf.gates.verdict import Check\n\ndef fmt(x):\n    return str(x)\n"
                                  "\n\ndef fold(line):\n    return line\n",
                       "redact.py": "import re\n\ndef f():\n    from .results import recorder\n",
                       "cpus.py": "import os\n",
                       "gates/verdict.py": "from pytest_glmf.text import fmt, fold\n\nclass Check:\n    pass\n",
                       "gates/drift/table.py": "def fmt(x):\n    return x\n",
                       "gates/drift/api.py": "from pytest_glmf.gates.drift.table import fmt\n"
                                             "from pytest_glmf.gates.verdict import Check, fmt as f\n",
                       "plugin/verified.py": "from pytest_glmf.gates import verdict\nfrom pytest_glmf import text\n"
                                             "verdict.fold('x')\ntext.fold('y')\nverdict.Check()\n"}.items():
        (pkg / part).parent.mkdir(parents=True, exist_ok=True)
        (pkg / part).write_text(text)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text("from pytest_glmf.gates.verdict import fold\n")
    assert bottom_violations(pkg, tests) == [
        "pytest_glmf/text.py:1: imports pytest_glmf.gates.verdict.Check: text.py is at the bottom, "
        "it imports nothing of pytest_glmf",
        "pytest_glmf/redact.py:4: imports pytest_glmf.results.recorder: redact.py is at the bottom, "
        "it imports nothing of pytest_glmf",
        "pytest_glmf/gates/drift/api.py:2: imports fmt from pytest_glmf.gates.verdict: its home is pytest_glmf.text",
        "pytest_glmf/plugin/verified.py:3: uses pytest_glmf.gates.verdict.fold: its home is pytest_glmf.text",
        "tests/test_x.py:1: imports fold from pytest_glmf.gates.verdict: its home is pytest_glmf.text"]


def test_the_room_check_keeps_the_load_engine_below_the_gates_and_each_gates_modules_its_own(tmp_path: Path) -> None:
    """The shapes of before issue 41 (the load engine inside the curve gate, reached by its modules
    from capacity and agents) and their twins after it are each named; the public names pass."""
    pkg = tmp_path / "pytest_glmf"
    for part, text in {
            "load/__init__.py": "",
            "load/run.py": "from pytest_glmf.load.settings import LoadSettings\n"
                           "from pytest_glmf.gates.curve.spec import DEFAULTS\n",
            "load/settings.py": "",
            "gates/curve/runner.py": "",
            "gates/curve/spec.py": "from pytest_glmf.load import LOAD_DEFAULTS\n",
            "gates/capacity/measure.py": "from pytest_glmf.gates.curve.runner import run_row\n"
                                         "from pytest_glmf.gates.curve.spec import CurveRowSettings\n"
                                         "from pytest_glmf.load import LoadSettings, run_row\n",
            "gates/agents/runner.py": "from pytest_glmf.load import run as load_run\n"
                                      "from pytest_glmf.load.run import Progress\n",
            "gates/capacity/cli.py": "def cli():\n    from pytest_glmf.gates.boot.told import shell_facts\n",
            "gates/boot/told.py": "",
            "results/gatejson.py": "from pytest_glmf.gates.curve.runner import strip_records\n"}.items():
        (pkg / part).parent.mkdir(parents=True, exist_ok=True)
        (pkg / part).write_text(text)
    assert room_violations(pkg) == [
        "pytest_glmf/gates/agents/runner.py:1: imports pytest_glmf.load.run, a module of the load engine: "
        "import its names from pytest_glmf.load",
        "pytest_glmf/gates/agents/runner.py:2: imports pytest_glmf.load.run, a module of the load engine: "
        "import its names from pytest_glmf.load",
        "pytest_glmf/gates/capacity/measure.py:1: imports pytest_glmf.gates.curve.runner, the curve gate's own "
        "module: use pytest_glmf.gates.curve's public names (or, shared by both, pytest_glmf.load)",
        "pytest_glmf/load/run.py:2: load/ imports pytest_glmf.gates.curve: the load engine sits below the gates"]
