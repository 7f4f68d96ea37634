"""What plugin/lanesched.py takes from pytest-xdist's internals, checked against the installed xdist.

`LaneScheduling` subclasses xdist's `LoadGroupScheduling`, overrides its private `_assign_work_unit`
and reads its work queue; pyproject.toml bounds pytest-xdist to the versions checked here. When an
upgrade changes one of these, this test fails naming the internal (mend lanesched.py, then the bound).
"""
from __future__ import annotations

import inspect
import re
from collections import OrderedDict
from importlib import metadata
from pathlib import Path

import pytest
import xdist
import xdist.dsession
import xdist.newhooks
import xdist.plugin
import xdist.workermanage
from xdist.scheduler import LoadGroupScheduling, LoadScopeScheduling

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

# (internal, the parameters lanesched relies on: name -> default, or inspect.Parameter.empty)
METHODS = {
    "__init__": {"self": inspect.Parameter.empty, "config": inspect.Parameter.empty, "log": None},
    "_assign_work_unit": {"self": inspect.Parameter.empty, "node": inspect.Parameter.empty},
    "schedule": {"self": inspect.Parameter.empty},
    "mark_test_complete": {"self": inspect.Parameter.empty, "node": inspect.Parameter.empty,
                           "item_index": inspect.Parameter.empty, "duration": 0},
}


def changed_methods(cls: type) -> list[str]:
    out = []
    for name, expected in METHODS.items():
        method = getattr(cls, name, None)
        if method is None:
            out.append(f"{cls.__name__}.{name} is gone")
            continue
        params = {p.name: p.default for p in inspect.signature(method).parameters.values()}
        if params != expected:
            out.append(f"{cls.__name__}.{name}{tuple(expected)} is now {name}{tuple(params)} "
                       f"(defaults {params})")
    return out


def test_pyproject_bounds_xdist_to_the_checked_major_version() -> None:
    spec = re.search(r'"pytest-xdist([^"]*)"', PYPROJECT.read_text())
    assert spec is not None and spec.group(1) == ">=3.8,<4", spec
    installed = tuple(int(p) for p in metadata.version("pytest-xdist").split(".")[:2])
    assert (3, 8) <= installed < (4, 0), f"pytest-xdist {installed} is outside pyproject's bound"


def test_the_scheduler_methods_lanesched_overrides_or_calls_keep_their_signatures() -> None:
    assert issubclass(LoadGroupScheduling, LoadScopeScheduling)
    changed = changed_methods(LoadGroupScheduling)
    assert not changed, f"pytest-xdist {xdist.__version__} changed what plugin/lanesched.py uses: {changed}"


def test_the_scheduler_state_lanesched_reads_is_there(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure("--tx", "2*popen")
    scheduler = LoadGroupScheduling(config, None)
    missing = []
    expected = {"workqueue": OrderedDict, "assigned_work": dict, "registered_collections": dict}
    for name, kind in expected.items():
        if not isinstance(getattr(scheduler, name, None), kind):
            missing.append(f"LoadGroupScheduling.{name} ({kind.__name__})")
    if getattr(scheduler, "collection", "absent") is not None:
        missing.append("LoadGroupScheduling.collection (None before the first schedule)")
    if getattr(scheduler, "collection_is_completed", None) is not False:
        missing.append("LoadGroupScheduling.collection_is_completed (a bool property)")
    if not hasattr(scheduler.workqueue, "move_to_end"):
        missing.append("LoadGroupScheduling.workqueue.move_to_end")
    assert not missing, f"pytest-xdist {xdist.__version__} changed what plugin/lanesched.py reads: {missing}"


def test_the_controller_pieces_lanesched_reads_are_there() -> None:
    missing = []
    if "self.shouldstop" not in inspect.getsource(xdist.dsession.DSession):
        missing.append("DSession.shouldstop")
    if 'register(session, "dsession")' not in inspect.getsource(xdist.plugin):
        missing.append('the controller registered as plugin "dsession"')
    if "self.gateway" not in inspect.getsource(xdist.workermanage.WorkerController):
        missing.append("WorkerController.gateway (node.gateway.id: the worker's id)")
    hook = getattr(xdist.newhooks, "pytest_xdist_make_scheduler", None)
    if hook is None or list(inspect.signature(hook).parameters) != ["config", "log"]:
        missing.append("the pytest_xdist_make_scheduler(config, log) hook")
    assert not missing, f"pytest-xdist {xdist.__version__} changed what plugin/lanesched.py reads: {missing}"


def test_a_changed_signature_is_named() -> None:
    class Changed:
        def __init__(self, config: object) -> None: ...
        def _assign_work_unit(self, node: object, extra: int) -> None: ...
        def schedule(self) -> None: ...

    assert changed_methods(Changed) == [
        "Changed.__init__('self', 'config', 'log') is now __init__('self', 'config') "
        "(defaults {'self': <class 'inspect._empty'>, 'config': <class 'inspect._empty'>})",
        "Changed._assign_work_unit('self', 'node') is now _assign_work_unit('self', 'node', 'extra') "
        "(defaults {'self': <class 'inspect._empty'>, 'node': <class 'inspect._empty'>, "
        "'extra': <class 'inspect._empty'>})",
        "Changed.mark_test_complete is gone",
    ]
