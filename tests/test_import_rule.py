"""The import rule (CONTRIBUTING.md, "Imports"): imports sit at the top of a module, except in three
named places, and importing the plugin (what `pytest --help` loads) stays light.

Why: `pytest_glmf.plugin` is an entry point, so every pytest run on a machine with pytest-glmf
installed imports it, lane or no lane. It must not pay for numpy, scipy, httpx or docker, nor load a
gate's measuring code; the plugin loads those when a lane first needs them."""
from __future__ import annotations

import ast
import fnmatch
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_glmf"

# Third-party packages the plugin must not load on import.
HEAVY = ("numpy", "scipy", "httpx", "docker", "matplotlib", "psycopg", "uvicorn", "jsonschema", "prometheus_client")
# What the plugin may load from pytest_glmf.gates: the registry, each gate's spec (its settings and
# thresholds, needed to validate the files at configure), the verdict helpers and the fixture modules.
LIGHT_GATE_MODULES = {"registry", "spec", "verdict", "bounds", "fixture"}
# What the plugin may load of the load engine (pytest_glmf/load): its package (names loaded on use)
# and its settings, whose defaults the curve's and capacity's specs read.
LIGHT_LOAD_MODULES = {"settings"}

# The three places where a function-local import is allowed (paths relative to pytest_glmf/; a
# folder ends in "/", a pattern has "*"):
PLACES = {
    # 1. the plugin's lazy loading: hooks and fixtures (the plugin's, and each gate's fixture.py)
    #    import the gate, engine, launch and history code a lane needs when the lane first needs it
    #    (keeps `pytest --help` light)
    "plugin's lazy loading": ("plugin/", "gates/*/fixture.py"),
    # 2. the launch entry: the plugin imports the launch package (cleanup, health); launching a
    #    server, reading its config, parsing its boot log and naming a dead server's cause load the
    #    engine client and the parsers
    "launch entry": ("launch/__init__.py", "launch/base.py", "launch/health.py"),
    # 3. the CLI dispatch: `glmf SUBCOMMAND` loads the subcommand's module when it runs
    "CLI dispatch": ("cli.py", "*/cli.py"),
}
# Not deferral: packages that may be absent (extras, engine images, `resource` off POSIX) or, for
# scipy, would cost every pytest run (the plugin checks the history's drift window at configure) its
# import time for one function; each is imported inside the one function that uses it.
OPTIONAL = {"matplotlib", "psycopg", "transformers", "uvloop", "vllm", "sglang", "scipy", "resource",
            "pydantic"}   # pydantic: upgrade/values.py runs inside an engine's interpreter, which may lack it
# Function-local imports that would form an import cycle at the top (tests/test_import_cycles.py
# counts them already; at the top the partly initialised module would fail): (file, module).
CYCLES: set[tuple[str, str]] = set()


def _in_places(relative: str) -> bool:
    for places in PLACES.values():
        for place in places:
            if "*" in place:
                if fnmatch.fnmatch(relative, place):
                    return True
            elif relative == place or (place.endswith("/") and relative.startswith(place)):
                return True
    return False


def local_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every import inside a function body."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(path.read_text(), str(path))
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                found.extend((node.lineno, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.append((node.lineno, "." * node.level + (node.module or "")))
    return sorted(set(found))


def misplaced_imports(package: Path) -> list[str]:
    out = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if _in_places(relative):
            continue
        for line, module in local_imports(path):
            if module.split(".")[0] in OPTIONAL or (relative, module) in CYCLES:
                continue
            out.append(f"pytest_glmf/{relative}:{line}: import {module} inside a function")
    return out


def test_imports_are_at_the_top_outside_the_three_named_places() -> None:
    misplaced = misplaced_imports(PACKAGE)
    assert not misplaced, ("move these imports to the top of their module (CONTRIBUTING.md, Imports; deferral "
                           f"is allowed only in: {', '.join(PLACES)}):\n" + "\n".join(misplaced))


def test_the_rule_finds_a_deferred_import_and_allows_the_named_places(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "plugin").mkdir(parents=True)
    (pkg / "gates" / "curve").mkdir(parents=True)
    (pkg / "gates" / "curve" / "table.py").write_text("def f():\n    from pkg.gates import verdict\n")
    (pkg / "gates" / "curve" / "cli.py").write_text("def cli():\n    import json\n")
    (pkg / "plugin" / "session.py").write_text("def start():\n    from pkg.gates.curve import api\n")
    (pkg / "gates" / "curve" / "fixture.py").write_text("def glmf_curve():\n    from pkg.gates.curve import api\n")
    (pkg / "gates" / "curve" / "plot.py").write_text("def plot():\n    import matplotlib.pyplot as plt\n")
    (pkg / "compare").mkdir()
    (pkg / "compare" / "fixture.py").write_text("def glmf_lane_curve():\n    from pkg import plugin\n")
    assert misplaced_imports(pkg) == ["pytest_glmf/compare/fixture.py:2: import pkg inside a function",
                                      "pytest_glmf/gates/curve/table.py:2: import pkg.gates inside a function"]


def plugin_modules_loaded() -> list[str]:
    """sys.modules after importing the plugin and the plugin modules it names in `pytest_plugins`,
    in a fresh interpreter (what `pytest --help` imports)."""
    code = ("import importlib, json, sys\n"
            "import pytest_glmf.plugin as plugin\n"
            "for name in plugin.pytest_plugins:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def heavy_modules(modules: list[str]) -> list[str]:
    """The loaded modules the import rule forbids: HEAVY packages, and gate measuring code, the engine
    client and the simulator of pytest_glmf."""
    bad = sorted({m.split(".")[0] for m in modules if m.split(".")[0] in HEAVY})
    for name in modules:
        parts = name.split(".")
        if parts[0] != "pytest_glmf" or len(parts) < 2:
            continue
        if parts[1] in ("engine", "sim"):
            bad.append(name)
        elif parts[1] == "load" and len(parts) > 2 and parts[2] not in LIGHT_LOAD_MODULES:
            bad.append(name)
        elif parts[1] == "gates" and len(parts) > 2 and parts[-1] not in LIGHT_GATE_MODULES \
                and not (PACKAGE / Path(*parts[1:]) / "__init__.py").exists():
            bad.append(name)
    return bad


def test_importing_the_plugin_loads_no_heavy_or_measuring_module() -> None:
    import pytest_glmf.plugin as plugin

    loaded = plugin_modules_loaded()
    assert {*plugin.FIXTURE_MODULES, "pytest_glmf.plugin.measuring", "pytest_glmf.gates.curve.fixture",
            "pytest_glmf.load.settings"} <= set(loaded)
    bad = heavy_modules(loaded)
    assert not bad, ("importing pytest_glmf.plugin loaded " + ", ".join(bad) + ": import it inside the hook or "
                     "fixture that needs it (CONTRIBUTING.md, Imports)")


def test_heavy_modules_names_what_the_rule_forbids() -> None:
    assert heavy_modules(["numpy.linalg", "httpx", "pytest_glmf.gates.curve", "pytest_glmf.gates.curve.spec",
                          "pytest_glmf.gates.registry", "pytest_glmf.gates.curve.api", "pytest_glmf.engine.client",
                          "pytest_glmf.load", "pytest_glmf.load.settings", "pytest_glmf.load.run",
                          "yaml"]) == ["httpx", "numpy", "pytest_glmf.gates.curve.api", "pytest_glmf.engine.client",
                                       "pytest_glmf.load.run"]
