"""The one handle every launcher returns, and the launcher interface.

A launcher turns a LaneConfig into a running server and gives back a Server. Everything that
measures only needs `base_url`; everything that reports reads `boot_log`, `boot_facts` and
`provenance`. `stop()` is idempotent and safe to call from teardown, atexit and signal handlers.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_glmf.redact import Redactor

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.engine.serverconfig import ServerConfig
    from pytest_glmf.gates.boot.parse import BootFacts


# How much of a server's log a failure shows: a boot error and a "server gone" message alike
# (enough for a Python traceback with its cause, short enough to read in a CI log).
LOG_TAIL_LINES = 40


def log_tail_lines(path: Path, n: int = LOG_TAIL_LINES) -> list[str]:
    """The last `n` lines of a log file ([] when it cannot be read)."""
    try:
        return Path(path).read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


class BootError(RuntimeError):
    """The server did not become ready. The message is the sentence a user reads: what happened,
    the last lines of the boot log and the parsed `problems`. `cause` is the failure ledger's
    class (gates/verdict.py CAUSES): a lane that does not boot is its configuration's failure
    unless the server could not be reached at all ("network") or answered wrongly ("server")."""

    def __init__(self, message: str, cause: str = "configuration") -> None:
        super().__init__(message)
        self.cause = cause


# provenance key: why the attach lane's boot_log (or a replica's) was not read (launch/attach.py)
BOOT_LOG_MISSING = "boot_log_missing"


@dataclass
class Server:
    base_url: str                      # e.g. "http://127.0.0.1:30000" (no trailing slash)
    engine: str                        # "sglang" | "vllm"
    lane: "LaneConfig"
    boot_log_path: Path | None = None  # where the launcher streamed the boot log (None: attach without log)
    provenance: dict[str, Any] = field(default_factory=dict)
    launcher: str = "attach"
    _stop: Callable[[], None] | None = field(default=None, repr=False)
    _alive: Callable[[], bool] | None = field(default=None, repr=False)
    # Several engine servers behind one lane (launch/replicas.py): replicas or DP ranks the client
    # reaches each at its own URL, or the replicas behind a router at base_url (their base_url is
    # the router's). Empty: one server. base_url, boot_log and boot_facts are then the first's.
    replicas: list["Server"] = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        # pytest prints fixture values in failures: secrets in the lane's env or argv stay masked

        argv = [str(a) for a in self.provenance.get("argv") or []]
        return Redactor.from_environment(self.lane.env, argv).text(
            f"Server(base_url={self.base_url!r}, engine={self.engine!r}, launcher={self.launcher!r}, "
            f"lane={self.lane!r}, provenance={self.provenance!r})")

    @property
    def boot_log(self) -> str:
        if self.boot_log_path is None or not self.boot_log_path.exists():
            return ""
        return self.boot_log_path.read_text(errors="replace")

    @property
    def boot_facts(self) -> "BootFacts":
        """The boot log's facts, completed by what the server said of itself where the log is
        silent or absent (gates/boot/told.py; `sources` says which)."""
        from pytest_glmf.gates.boot.parse import parse_boot_log
        from pytest_glmf.gates.boot.told import complete_facts

        return complete_facts(parse_boot_log(self.boot_log), self.config)

    @property
    def config(self) -> "ServerConfig":
        """What the server said it runs when it was launched or attached (engine/serverconfig.py)."""
        from pytest_glmf.engine.serverconfig import ServerConfig

        return ServerConfig.from_dict(self.provenance.get("server_config"))

    @property
    def stream_urls(self) -> list[str]:
        """Where the load generator sends its streams: each replica's own URL, else base_url
        (one server, or the router that assigns them)."""
        return list(dict.fromkeys(r.base_url for r in self.replicas)) or [self.base_url]

    def is_alive(self) -> bool:
        """False once the server process/container is known to be gone (attach: once its port
        refuses connections; several attached replicas: always True)."""
        return True if self._alive is None else self._alive()

    def stop(self) -> None:
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()


class Launcher(Protocol):
    """`start` blocks until the server is ready or raises BootError; it never leaves a process or
    container behind when it raises."""

    name: str

    def start(self, lane: "LaneConfig", results_dir: Path, session_id: str) -> Server: ...
