"""The gates: verdict machinery (`verdict`), bounds written in tests (`bounds`) and one subpackage
per gate. Each gate's package exports its public API (its measurement function, typed result and
assertion helpers): `from pytest_glmf.gates.curve import measure_curve, assert_curve`."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for a gate package whose public names live in its modules
    (name -> module). Loaded on first use: the plugin imports every gate package (through its
    spec) on every pytest run, and the measurement code (httpx, numpy, ...) must not come along."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # not cached on the package: whoever asks gets the module sys.modules holds now (a module
        # imported again, as pytester does between in-process runs, must not meet old classes)
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
