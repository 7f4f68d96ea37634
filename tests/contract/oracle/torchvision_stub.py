"""A stand-in for `torchvision` inside the contract oracle's venv only (never in the project's).

Why: `sglang.srt.managers.io_struct` (the `/generate` request checks) imports, through
`sglang/srt/configs/__init__.py` -> `nano_nemotron_vl.py` -> `multimodal/internvl_utils.py`,
`torchvision.transforms` at module level. The only torchvision wheels reachable are CUDA builds,
which fail to import beside a CPU torch (`operator torchvision::nms does not exist`). Nothing the
contract stage calls (argument parser, protocol models, request checks, function-call detectors)
uses torchvision: image preprocessing does. So every torchvision name resolves to a placeholder
that raises the moment anything actually uses it, naming what was used.

Installed by tests/contract/setup as `glmf_torchvision_stub.py` plus a `.pth` line that registers
the finder before any import runs.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types


class _Unavailable(type):
    """Placeholder class: attribute chains work (`InterpolationMode.BICUBIC`, subclassing);
    calling one raises."""

    def __getattr__(cls, name: str) -> "_Unavailable":
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unavailable(f"{cls.__name__}.{name}", (), {})

    def __call__(cls, *args: object, **kwargs: object) -> object:
        raise RuntimeError(f"torchvision is stubbed in the contract oracle (CPU torch): {cls.__name__} was used")


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unavailable(f"{self.__name__}.{name}", (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0+glmf-stub"
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
