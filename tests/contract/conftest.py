"""Fixtures of the contract stage: the released SGLang (0.5.23) as the oracle.

- `sglang_oracle`: one worker process (tests/contract/oracle/worker.py) in the venv that
  `tests/contract/setup` builds, answering JSON requests with SGLang's own code. Not built: skip
  with the setup command outside CI; in CI (`CI=true`) an error, so the stage never goes green by
  skipping (as tests/real_engine does).
- `sglang_source`: reads a file of the installed sglang package, for the format-string pins.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oracle_env import oracle_python

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WORKER = HERE / "oracle" / "worker.py"
PROBE = REPO / "pytest_glmf" / "launch" / "preflight" / "probe.py"
SGLANG_VERSION = "0.5.23"


class SGLangOracle:
    """Requests to the worker; every answer is SGLang's own code's verdict."""

    def __init__(self, python: Path):
        self.proc = subprocess.Popen([str(python), "-W", "ignore", str(WORKER), str(PROBE)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, cwd=str(HERE))
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first or not json.loads(first).get("ready"):
            self.close()
            raise RuntimeError(f"the oracle worker did not start (exit {self.proc.poll()}): {first!r}")
        self.info = self.call("info")

    def call(self, op: str, **req: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **req}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the oracle worker died (exit {self.proc.poll()})")
        answer = json.loads(line)
        if not answer["ok"]:
            raise RuntimeError(f"oracle op {op} raised:\n{answer['error']}")
        return answer["result"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]  # EOF: the worker exits
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


@pytest.fixture(scope="session")
def sglang_oracle() -> Iterator[SGLangOracle]:
    oracle = SGLangOracle(oracle_python())
    try:
        assert oracle.info["version"] == SGLANG_VERSION, oracle.info
        yield oracle
    finally:
        oracle.close()


@pytest.fixture(scope="session")
def sglang_package(sglang_oracle: SGLangOracle) -> Path:
    """The installed sglang package directory (file paths in tests are relative to its parent)."""
    return Path(sglang_oracle.info["package_dir"])
