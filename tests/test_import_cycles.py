"""No import cycles inside pytest_glmf/: every module can be understood (and imported) before the
modules that use it. Read with `ast`, without importing anything: runtime imports count, at module
level and inside functions (a deferred import is still a dependency); imports under
`if TYPE_CHECKING:` do not (they never run)."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_glmf"

# Cycles known and owned elsewhere; the test fails on any other (none today: the simulator's
# routes no longer import the app back).
KNOWN: set[frozenset[str]] = set()


def module_files(package: Path) -> dict[str, Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


def runtime_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules `name` imports when it runs (`from pkg import mod` counts as pkg.mod)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package[:len(package) - (child.level - 1)]
                    base = ".".join(parent + ([child.module] if child.module else []))
                for alias in child.names:
                    candidate = f"{base}.{alias.name}"
                    found.add(candidate if candidate in known else base)
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def import_graph() -> dict[str, set[str]]:
    files = module_files(PACKAGE)
    return {name: runtime_imports(name, path, set(files)) for name, path in files.items()}


def test_no_import_cycles_in_the_package() -> None:
    unexpected = [sorted(c) for c in cycles(import_graph()) if c not in KNOWN]
    assert not unexpected, f"import cycles: {unexpected}"


def test_the_checker_finds_a_cycle_and_ignores_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")        # deferred: still a cycle
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    (pkg / "d.py").write_text("import pkg.c\n")
    files = module_files(pkg)
    graph = {name: runtime_imports(name, path, set(files)) for name, path in files.items()}
    assert graph["pkg.c"] == set() and graph["pkg.d"] == {"pkg.c"}
    assert cycles(graph) == [frozenset({"pkg.a", "pkg.sub.b"})]
