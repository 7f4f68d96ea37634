"""`glmf init [DIR]`: write the examples a README reader runs into DIR (default ./examples).

The examples ship inside the package (pytest_glmf/examples/: lanes files for the simulator, a GB300
with Docker and a real CPU engine, a user's own test file, CI workflows), together with a copy of
the thresholds file to edit. After `pip install pytest-glmf`:

    glmf init
    pytest --glmf-lanes examples/sim-lanes.yaml --glmf-lane round1 -k boot

An existing file is never overwritten unless `--force` says so.
"""
from __future__ import annotations

import argparse
import sys
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

THRESHOLDS = "thresholds.yaml"


def example_files() -> dict[str, Traversable]:
    """Relative path -> packaged file: every example, and the shipped thresholds file."""
    out: dict[str, Traversable] = {}

    def walk(folder: Traversable, prefix: str) -> None:
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if entry.name.startswith((".", "__")):
                continue
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            else:
                out[prefix + entry.name] = entry

    walk(resources.files("pytest_glmf").joinpath("examples"), "")
    out[THRESHOLDS] = resources.files("pytest_glmf.config").joinpath(THRESHOLDS)
    return out


def write_examples(target: Path, force: bool = False) -> list[Path]:
    """Write every example under `target`; FileExistsError naming the files that would be replaced."""
    files = example_files()
    existing = [target / rel for rel in files if (target / rel).exists()]
    if existing and not force:
        raise FileExistsError(", ".join(str(p) for p in existing))
    written = []
    for rel, source in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(source.read_bytes())
        written.append(path)
    return written


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="glmf init", description=(
        "Write the examples (lanes files, a test file of your own, CI workflows) and a copy of the "
        "thresholds file to edit into DIR."))
    parser.add_argument("dir", nargs="?", default="examples", metavar="DIR", help="target directory (default: examples)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")
    args = parser.parse_args(argv)
    target = Path(args.dir)
    try:
        written = write_examples(target, force=args.force)
    except FileExistsError as exc:
        print(f"glmf init: would overwrite {exc}; pass --force to replace them", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    print(f"next: pytest --glmf-lanes {target / 'sim-lanes.yaml'} --glmf-lane round1 -k boot   "
          f"(the recipe's round-1 mistake: fails on its 7 seats)")
    return 0
