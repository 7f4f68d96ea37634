"""Run the simulator as a child process (for tests and scripts): start, wait for ready, stop.

    with SimProcess(["--max-mamba-cache-size", "48"], time_scale=0.05) as sim:
        httpx.get(sim.url + "/health")

The boot log is collected from the child's stdout/stderr; `wait_ready` returns when the ready line
is printed, raises RuntimeError with the log tail when the child exits first or times out.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

READY = "The server is fired up and ready to roll!"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SimProcess:
    def __init__(self, args: list[str], time_scale: float | None = 0.05, port: int | None = None):
        self.port = port or free_port()
        self.argv = [sys.executable, "-m", "pytest_glmf.sim", *args, "--port", str(self.port)]
        if time_scale is not None and "--time-scale" not in args:
            self.argv += ["--time-scale", str(time_scale)]
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def start(self) -> "SimProcess":
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self, timeout_s: float = 30.0) -> "SimProcess":
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(READY in ln for ln in self.lines[-8:]) or any(READY in ln for ln in self.lines):
                return self
            if self.proc is not None and self.proc.poll() is not None:
                time.sleep(0.1)   # let the reader drain
                raise RuntimeError(f"simulator exited with {self.proc.returncode} before ready:\n" + "\n".join(self.lines[-15:]))
            time.sleep(0.02)
        raise RuntimeError(f"simulator not ready after {timeout_s} s:\n" + "\n".join(self.lines[-15:]))

    def wait_exit(self, timeout_s: float = 10.0) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout_s)
        self._close()
        return rc

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._close()

    def _close(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
        if self.proc is not None and self.proc.stdout is not None and not self.proc.stdout.closed:
            self.proc.stdout.close()

    def __enter__(self) -> "SimProcess":
        self.start()
        try:
            return self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
