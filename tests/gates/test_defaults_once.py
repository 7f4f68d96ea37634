"""Defaults written once: a gate's settings have their defaults in its spec only. A function
parameter or a dataclass field elsewhere in the gate's package, named like one of its settings,
takes the spec's default by reference (`DEFAULTS.max_tokens`), never as a copied literal."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_glmf
from pytest_glmf.gates.agents.spec import ReplaySettings
from pytest_glmf.gates.flags import settings_of
from pytest_glmf.gates.registry import GATES

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
