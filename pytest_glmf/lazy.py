"""A package's public names loaded on first use (PEP 562): the gates' packages, the comparison and
the load engine export their API this way, so importing the package (the plugin imports every
gate's spec on every pytest run) does not load the measuring code behind it."""
from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def type_checking_imports(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (module, name there) of every `from MODULE import NAME` under the module's top-level
    `if TYPE_CHECKING:`."""
    homes: dict[str, tuple[str, str]] = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                    homes.update({alias.asname or alias.name: (stmt.module, alias.name) for alias in stmt.names})
    return homes


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for a package whose public names live in its modules. The
    names are those the package imports under `if TYPE_CHECKING:` (what a type checker sees), each
    loaded from the module named there on first use: the plugin imports every gate package (through
    its spec) on every pytest run, and the measurement code (httpx, numpy, ...) must not come along."""
    namespace = sys.modules[package].__dict__
    found: dict[str, tuple[str, str]] = {}

    def homes() -> dict[str, tuple[str, str]]:
        if not found:   # read once, on first use: the package's own file, a few dozen lines
            found.update(type_checking_imports(Path(namespace["__file__"])))
        return found

    def __getattr__(name: str) -> Any:
        home = homes().get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # not cached on the package: whoever asks gets the module sys.modules holds now (a module
        # imported again, as pytester does between in-process runs, must not meet old classes)
        return getattr(importlib.import_module(home[0]), home[1])

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes()})

    return __getattr__, __dir__
