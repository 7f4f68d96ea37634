"""An engine release's pure-Python code, importable without its CUDA dependency tree.

Standard library only: tests/contract/setup-vllm runs it with the system python before the
project's venv exists. `build(requirement, base_python, dest)`:

1. `pip download --no-deps REQUIREMENT -d WHEELS` (the wheel alone, cached: a second build does
   not download);
2. a venv at `dest` without pip, made by the base interpreter's Python; the wheel's files go into
   its site-packages except compiled extensions (`*.so`, `*.libs/`: CUDA builds that need the GPU
   toolchain), with the wheel's `.dist-info`, so `importlib.metadata` reports the new version;
3. `extra_deps` (pure-Python requirements the base lacks) installed there with `--no-deps`;
4. a `.pth` that appends the base interpreter's site-packages (torch on the CPU, the engine's
   dependencies) after the new release's own, and sets the environment variables given
   (vLLM needs `VLLM_TARGET_DEVICE=cpu` to build its parser without a GPU).

The release's modules shadow the base's (the new `vllm` package is found first); its compiled
kernels are not there, which parsing, protocol models and reading its source never need.

    python3 -m pytest_glmf.upgrade.overlay --requirement vllm==0.33.0 --base-python PY --dest DIR
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

_REQ = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!-]+)$")


class OverlayError(RuntimeError):
    """One line: what failed and where its log is."""


def parse_requirement(text: str) -> tuple[str, str]:
    """`name==version` -> (name, version); anything else is refused (the build must be one release)."""
    m = _REQ.match(text.strip())
    if not m:
        raise OverlayError(f"{text!r} is not a pinned pip requirement; write NAME==VERSION (e.g. vllm==0.33.0)")
    return m.group("name").lower().replace("_", "-"), m.group("version")


def _pip(base_python: str, args: list[str], log: Path) -> None:
    with log.open("a") as out:
        proc = subprocess.run([base_python, "-m", "pip", *args], stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log.read_text().strip().splitlines()[-1:] or ["no output"]
        raise OverlayError(f"pip {' '.join(args[:3])} ... failed (exit {proc.returncode}): {tail[0][:200]} "
                           f"(log: {log})")


def download(requirement: str, wheels: Path, base_python: str) -> Path:
    """The requirement's wheel in `wheels` (downloaded once, without dependencies)."""
    name, version = parse_requirement(requirement)
    stem = f"{name.replace('-', '_')}-{version}-"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(p for p in wheels.glob("*.whl") if p.name.lower().startswith(stem.lower()))
    if not found:
        _pip(base_python, ["download", "--no-deps", "--only-binary", ":all:", "-d", str(wheels), requirement],
             wheels / "pip.log")
        found = sorted(p for p in wheels.glob("*.whl") if p.name.lower().startswith(stem.lower()))
    if not found:
        raise OverlayError(f"pip download {requirement} gave no wheel in {wheels}")
    return found[-1]


def site_packages(python: str) -> str:
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def build(requirement: str, base_python: str, dest: Path, wheels: Path, extra_deps: Sequence[str] = (),
          env: dict[str, str] | None = None) -> Path:
    """The overlay venv's python (see the module docstring)."""
    wheel = download(requirement, wheels, base_python)
    base_site = site_packages(base_python)
    if dest.exists():
        shutil.rmtree(dest)
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(dest)], check=True)
    python = dest / "bin" / "python"
    site = Path(site_packages(str(python)))
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if name.endswith(".so") or ".libs/" in name or ".data/" in name.split("/", 1)[0] + "/":
                continue
            z.extract(info, site)
    if extra_deps:
        _pip(base_python, ["install", "--no-deps", "--target", str(site), *extra_deps], dest / "pip.log")
    lines = [f"import site; site.addsitedir({base_site!r})"]
    lines += [f"import os; os.environ.setdefault({k!r}, {v!r})" for k, v in (env or {}).items()]
    (site / "zz_glmf_overlay.pth").write_text("\n".join(lines) + "\n")
    (dest / "glmf-overlay.json").write_text(json.dumps({"requirement": requirement, "wheel": wheel.name,
                                                        "base_python": base_python, "env": env or {}}))
    return python


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_glmf.upgrade.overlay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--requirement", required=True, help="NAME==VERSION, e.g. vllm==0.33.0")
    ap.add_argument("--base-python", required=True, help="the interpreter with a CPU torch and the dependencies")
    ap.add_argument("--dest", required=True, type=Path)
    ap.add_argument("--wheels", required=True, type=Path)
    ap.add_argument("--extra-deps", default="", help="space-separated pure-Python requirements the base lacks")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args(argv)
    env = dict(kv.split("=", 1) for kv in args.env)
    try:
        python = build(args.requirement, args.base_python, args.dest, args.wheels, args.extra_deps.split(), env)
    except (OverlayError, subprocess.CalledProcessError, OSError) as exc:
        print(f"overlay: {exc}", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
