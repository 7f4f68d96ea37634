"""The failure ledger: one line per failed boot or failed gate, appended next to the results.

The recipe keeps "what did not work" (four ways to run the box out of KV memory while sizing
slots). A line says when, which lane and image, with which flags, and why: the boot log's
problems or the gate's first failure line. Plain text, one line per event, so `grep` and a PR
diff read it; never rewritten, only appended.
"""
from __future__ import annotations

import datetime as _dt
import shlex
from pathlib import Path

LEDGER_NAME = "failure-ledger.md"


def _one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def append(results_dir: Path, *, lane: str, image: str | None, flags: list[str], cause: str,
           what: str = "gate") -> Path:
    """Append one line; returns the ledger's path. `what` is "boot" or the failed gate's name."""
    path = Path(results_dir) / LEDGER_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    line = (f"- {when} | lane {lane} | {what} | image {image or '-'} | flags `{_one_line(shlex.join(flags), 300)}`"
            f" | {_one_line(cause)}\n")
    with open(path, "a") as f:
        if new:
            f.write("# pytest-glmf failure ledger\n\nWhat did not work: one line per failed boot or gate.\n\n")
        f.write(line)
    return path


def read(results_dir: Path) -> list[str]:
    path = Path(results_dir) / LEDGER_NAME
    if not path.exists():
        return []
    return [ln for ln in path.read_text().splitlines() if ln.startswith("- ")]
