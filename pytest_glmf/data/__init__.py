"""Reading data files: a path the user gave, or a file shipped in `pytest_glmf.data` (the
repo's `pytest_glmf/data/`, inside the wheel after `pip install`)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path


def read_text(ref: str | Path | None, default: str) -> str:
    """The text of `ref` (a path), of the packaged fixture named `ref`, or of the packaged
    `default` when `ref` is None. A name that is neither raises FileNotFoundError naming it."""
    if ref is None:
        return resources.files("pytest_glmf.data").joinpath(default).read_text(encoding="utf-8")
    path = Path(ref)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    packaged = resources.files("pytest_glmf.data").joinpath(str(ref))
    if not packaged.is_file():
        raise FileNotFoundError(f"{ref}: not a file, nor a packaged fixture")
    return packaged.read_text(encoding="utf-8")
