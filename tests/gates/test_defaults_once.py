"""Defaults written once: a gate's settings have their defaults in its spec only. A function
parameter or a dataclass field elsewhere in the gate's package, named like one of its settings,
takes the spec's default by reference (`DEFAULTS.max_tokens`), never as a copied literal."""
from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

import pytest_glmf
from pytest_glmf.gates.agents.spec import ReplaySettings
from pytest_glmf.gates.flags import settings_of
from pytest_glmf.gates.registry import GATES
from pytest_glmf.load import LoadSettings

GATES_DIR = Path(pytest_glmf.__file__).parent / "gates"
# a name alike, a different thing
NOT_COPIES = {("agents/sessions.py", "start_s"): "a session's start offset, not the replay window's start"}


def literal_defaults(tree: ast.AST) -> list[tuple[str, object, int]]:
    """(name, literal default, line) of every parameter and annotated class field with a constant default."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            out += [(a.arg, d.value, d.lineno) for a, d in pairs if isinstance(d, ast.Constant)]
        elif isinstance(node, ast.ClassDef):
            out += [(s.target.id, s.value.value, s.lineno) for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                    and isinstance(s.value, ast.Constant)]
    return out


def gate_defaults(gate: str) -> dict[str, object]:
    classes = [GATES[gate].settings] + ([ReplaySettings] if gate == "agents" else [])
    return {s.path: s.default for cls in classes for s in settings_of(cls)
            if "." not in s.path and s.default is not None and not isinstance(s.default, (list, dict))}


@pytest.mark.parametrize("gate", [g for g in GATES if (GATES_DIR / g).is_dir()])
def test_no_gate_module_copies_a_settings_default(gate):
    defaults = gate_defaults(gate)
    copies = []
    for path in sorted((GATES_DIR / gate).glob("*.py")):
        if path.name == "spec.py":
            continue
        for name, value, line in literal_defaults(ast.parse(path.read_text())):
            if (str(path.relative_to(GATES_DIR)), name) in NOT_COPIES:
                continue
            if name in defaults and value == defaults[name] and type(value) is type(defaults[name]) \
                    and not isinstance(value, bool):
                copies.append(f"{path.relative_to(GATES_DIR)}:{line}: {name} = {value!r}")
    assert not copies, "defaults copied from the spec (read them from DEFAULTS):\n" + "\n".join(copies)


# A gate that measures through the load engine (pytest_glmf/load) names the settings it shares
# with it like the engine's and reads their defaults from the engine's one home (`LOAD_DEFAULTS`,
# load/settings.py: `setting(LOAD.runs, ...)`), never as a copied literal that would drift when the
# engine's default changes. The engine's own modules read them from there too.
MEASURES_THROUGH_LOAD = ("curve", "capacity")
LOAD_DIR = GATES_DIR.parent / "load"


def load_defaults() -> dict[str, object]:
    return {f.name: f.default for f in dataclasses.fields(LoadSettings)
            if f.default is not None and f.default is not dataclasses.MISSING}


def borrowed_copies(gate: str, spec_file: Path) -> list[str]:
    lent = load_defaults()
    return [f"{gate}/spec.py:{line}: {name} = {value!r}: read it from the load engine's (LOAD_DEFAULTS.{name})"
            for name, value, line in setting_literals(spec_file, GATES[gate].settings.__name__)
            if name in lent and value == lent[name] and type(value) is type(lent[name]) and not isinstance(value, bool)]


def setting_literals(spec_file: Path, cls_name: str) -> list[tuple[str, object, int]]:
    """(name, literal default, line) of each field of class `cls_name` written `setting(LITERAL, ...)`."""
    out = []
    for node in ast.walk(ast.parse(spec_file.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            for s in node.body:
                if (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and isinstance(s.value, ast.Call)
                        and getattr(s.value.func, "id", None) == "setting" and s.value.args
                        and isinstance(s.value.args[0], ast.Constant)):
                    out.append((s.target.id, s.value.args[0].value, s.lineno))
    return out


@pytest.mark.parametrize("gate", MEASURES_THROUGH_LOAD)
def test_a_gate_reads_the_defaults_it_shares_with_the_load_engine_from_it(gate):
    copies = borrowed_copies(gate, GATES_DIR / gate / "spec.py")
    assert not copies, "defaults copied from the load engine:\n" + "\n".join(copies)


def test_the_borrowed_check_finds_a_copied_literal(tmp_path):
    spec = tmp_path / "spec.py"
    spec.write_text("class CapacitySettings:\n"
                    "    runs: int = setting(3, min=1)\n"
                    "    max_tokens: int = setting(LOAD.max_tokens, min=1)\n"
                    "    min_users: int = setting(1, min=1)\n"
                    "    shared_prefix: bool = setting(False)\n")
    assert borrowed_copies("capacity", spec) == [
        "capacity/spec.py:2: runs = 3: read it from the load engine's (LOAD_DEFAULTS.runs)"]


def test_no_load_engine_module_copies_a_default_of_its_settings():
    defaults = load_defaults()
    copies = [f"load/{path.name}:{line}: {name} = {value!r}"
              for path in sorted(LOAD_DIR.glob("*.py")) if path.name != "settings.py"
              for name, value, line in literal_defaults(ast.parse(path.read_text()))
              if name in defaults and value == defaults[name] and type(value) is type(defaults[name])
              and not isinstance(value, bool)]
    assert not copies, "defaults copied from load/settings.py (read them from DEFAULTS):\n" + "\n".join(copies)


# The client's timeouts (engine/timeouts.py) are the only home of the 600 s and 60 s defaults.
TIMEOUTS_HOME = "engine/timeouts.py"
TIMEOUT_COPY = re.compile(r"(first_token|between_tokens)\w*.*?(?<![\w.])(600|60)(\.0)?(?![\w.])")


def timeout_copies(package: Path) -> list[str]:
    out = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative == TIMEOUTS_HOME:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if TIMEOUT_COPY.search(line):
                out.append(f"{package.name}/{relative}:{number}: {line.strip()}")
    return out


def test_the_client_timeouts_are_written_once():
    copies = timeout_copies(GATES_DIR.parent)
    assert not copies, f"the client's timeouts copied (read FIRST_TOKEN_S / BETWEEN_TOKENS_S of {TIMEOUTS_HOME}):\n" + \
        "\n".join(copies)


def test_the_timeout_check_finds_a_copy(tmp_path):
    pkg = tmp_path / "pytest_glmf"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "engine" / "timeouts.py").write_text("FIRST_TOKEN_S = 600.0\n")
    (pkg / "runner.py").write_text("    first_token_timeout_s: float = 600.0\n"
                                   "    between = opts.between_tokens_timeout_s or lane.get('between_tokens_s') or 60.0\n"
                                   "    first_token_timeout_s: float = FIRST_TOKEN_S\n"
                                   "    t = Timeouts(connect_s=3.0, first_token_s=10.0, between_tokens_s=10.0)\n"
                                   "    first_token_timeout_s: float = 600.5\n")
    assert timeout_copies(pkg) == [
        "pytest_glmf/runner.py:1: first_token_timeout_s: float = 600.0",
        "pytest_glmf/runner.py:2: between = opts.between_tokens_timeout_s or lane.get('between_tokens_s') or 60.0"]
