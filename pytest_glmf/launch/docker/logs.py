"""A container's log, streamed to a file as it arrives.

The file is the boot log the rest of the plugin reads (`Server.boot_log`, BootFacts); it is written
by a thread so that a hung or slow server never blocks the readiness loop.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from docker.models.containers import Container

    from pytest_glmf.redact import Redactor


class LogStreamer:
    """Follows `container.logs` (stdout and stderr, in arrival order) into `path` and notes when a
    line contains `watch` (the engine's ready line)."""

    def __init__(self, container: "Container", path: Path, watch: str | None = None,
                 redactor: "Redactor | None" = None) -> None:
        self.container = container
        self.redactor = redactor     # secrets of the lane's env and flags never reach the file
        self.path = path
        self.watch = watch
        self.seen = False
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"glmf-log-{container.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _mask(self, text: str) -> str:
        return self.redactor.text(text) if self.redactor is not None else text

    def _line(self, line: str) -> None:
        if self.watch and self.watch in line:
            self.seen = True

    def _run(self) -> None:
        pending = ""
        stream = None
        try:
            with self.path.open("w", encoding="utf-8") as out:
                stream = self.container.logs(stream=True, follow=True, stdout=True, stderr=True)
                for chunk in stream:
                    text = chunk.decode("utf-8", errors="replace")
                    lines = (pending + text).split("\n")
                    pending = lines.pop()
                    # whole lines only: a secret split across two chunks is still masked
                    for line in lines:
                        out.write(self._mask(line) + "\n")
                    out.flush()              # readers (and a crash) see every line at once
                    # only then `seen`: a reader the ready line lets go finds it in the file
                    # (CI at 855fc17: readiness passed, the boot facts read `ready=False`)
                    for line in lines:
                        self._line(line.rstrip("\r"))
                if pending:
                    out.write(self._mask(pending))
                    out.flush()
                    self._line(pending)
        except Exception as exc:             # the container was removed under us, engine gone...
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if stream is not None and hasattr(stream, "close"):
                stream.close()               # the follow connection is not returned to any pool

