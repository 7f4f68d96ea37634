"""Every gate in one shape (CONTRIBUTING.md, "How to add a gate"): its package holds `api.py` (the
public measurement and assertion functions), `spec.py` (its declaration), `fixture.py` (its
fixtures, registered through the plugin's one list `FIXTURE_MODULES`), and a ready-made suite
`suites/test_<gate>.py` uses them. A gate of the registry that misses a part fails naming it. A
gate package's public names are those it imports under `if TYPE_CHECKING:`, each loaded from
there on first use (gates/__init__.py, `lazy_exports`)."""
from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path

import pytest

import pytest_glmf.plugin as plugin
from pytest_glmf.gates import type_checking_imports
from pytest_glmf.gates.registry import GATES
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


@pytest.mark.parametrize("package", [*(f"pytest_glmf.gates.{gate}" for gate in GATES), "pytest_glmf.compare"])
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
