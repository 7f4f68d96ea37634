"""The failure ledger: one line per failed boot or failed gate, appended next to the results.

The recipe keeps "what did not work" (four ways to run the box out of KV memory while sizing
slots). A line says when, which lane, what failed, the cause class, the image, the flags, and why
(the boot log's problems or the gate's first failure line). Plain text, one line per event, so
`grep` and a PR diff read it; never rewritten, only appended.

The cause class is what was measured, not a guess from the message (gates/verdict.py CAUSES):
`configuration` (the lane as configured did not boot, or missed a bound), `server` (it answered
with error statuses, broken streams, wrong token counts, or died), `client-bound` (the measuring
client was the bottleneck: the numbers are not the server's), `network` (requests never reached
it), and `interrupted` for a session killed before its end. A failed check carries its class
(`Check.cause`), a broken request or a gone server is classed by the plugin, and the test's
report brings the class here (`CAUSE_PROPERTY` in its user_properties, also from xdist workers).
"""
from __future__ import annotations

import datetime as _dt
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_glmf.gates.verdict import CAUSES
from pytest_glmf.text import one_line

LEDGER_NAME = "failure-ledger.md"
CAUSE_PROPERTY = "glmf_cause"
CLASSES = ("configuration", "server", "client-bound", "network", "interrupted")


def cause_of(properties: Iterable[tuple[str, Any]], default: str = "configuration") -> str:
    """The most telling cause class among a report's CAUSE_PROPERTY entries (CAUSES order)."""

    found = {v for k, v in properties if k == CAUSE_PROPERTY}
    return next((c for c in CAUSES if c in found), default)


def append(results_dir: Path, *, lane: str, image: str | None, flags: list[str], cause: str,
           what: str = "gate", cause_class: str = "configuration") -> Path:
    """Append one line; returns the ledger's path. `what` is "boot" or the failed gate's name,
    `cause_class` one of CLASSES."""
    if cause_class not in CLASSES:
        raise ValueError(f"cause class {cause_class!r}: use one of {', '.join(CLASSES)}")
    path = Path(results_dir) / LEDGER_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    line = (f"- {when} | lane {lane} | {what} | {cause_class} | image {image or '-'} | "
            f"flags `{one_line(shlex.join(flags), 300)}` | {one_line(cause, 400)}\n")
    with open(path, "a") as f:
        if new:
            f.write("# pytest-glmf failure ledger\n\nWhat did not work: one line per failed boot or gate "
                    "(when | lane | what | cause class | image | flags | why).\n\n")
        f.write(line)
    return path


def read(results_dir: Path) -> list[str]:
    path = Path(results_dir) / LEDGER_NAME
    if not path.exists():
        return []
    return [ln for ln in path.read_text().splitlines() if ln.startswith("- ")]
