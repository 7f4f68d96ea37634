"""Calling pytest-glmf's own hooks (plugin/hookspecs.py) so that one that raises is named: the hook,
the plugin that implements it, where, and what it raised, in one line, never a traceback through
the plugin's bookkeeping."""
from __future__ import annotations

import os
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig


class HookFailed(Exception):
    """An implementation of one of pytest-glmf's hooks raised; the message names it."""


def _implementation(caller: Any, tb: TracebackType | None) -> Any:
    """The hook implementation whose frame the traceback passes through first (None: not found)."""
    impls = {impl.function.__code__: impl for impl in caller.get_hookimpls()}
    while tb is not None:
        impl = impls.get(tb.tb_frame.f_code)
        if impl is not None:
            return impl
        tb = tb.tb_next
    return None


def _shown(path: str) -> str:
    """A path as the user's terminal names it: relative to the working directory when inside it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _where(impl: Any) -> str:
    code = impl.function.__code__
    name = impl.plugin_name   # a conftest.py is registered under its path
    name = _shown(name) if os.path.isabs(name) else name
    return f"plugin {name!r}, {impl.function.__name__} at {_shown(code.co_filename)}:{code.co_firstlineno}"


def call(config: pytest.Config, name: str, **kwargs: Any) -> None:
    """config.hook.<name>(config=config, **kwargs); HookFailed naming the implementation when one raises."""
    caller = getattr(config.hook, name)
    try:
        caller(config=config, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any error of someone else's code, said in one line
        impl = _implementation(caller, exc.__traceback__)
        who = _where(impl) if impl is not None else "a plugin"
        raise HookFailed(f"{name} ({who}) raised {type(exc).__name__}: {exc}") from exc


def update_provenance(config: pytest.Config, lane: "LaneConfig", provenance: dict[str, Any]) -> None:
    """pytest_glmf_update_provenance on the lane's server's provenance, in place."""
    call(config, "pytest_glmf_update_provenance", lane=lane, provenance=provenance)


def result_updater(config: pytest.Config, lane: "LaneConfig",
                   failed: Callable[[str], None]) -> Callable[[dict[str, Any]], None]:
    """What the result file's writer calls on the document (results/recorder.py, `update`):
    pytest_glmf_update_result; one that raises has its line in the document's `incomplete` and
    is handed to `failed` (the session fails with it), the file is written all the same."""

    def update(result: dict[str, Any]) -> None:
        try:
            call(config, "pytest_glmf_update_result", lane=lane, result=result)
        except HookFailed as exc:
            result["incomplete"] = [*(result.get("incomplete") or []), str(exc)]
            failed(str(exc))

    return update
