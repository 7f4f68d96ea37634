"""`--to vllm==latest` / `sglang==latest`: the newest release on the package index, asked through
pip's own client (`pip index versions NAME`: pip's index and find-links settings, pre-releases left
out, the same answer `pip install NAME` would pick). Offline, or a name the index does not know, is
one line saying so and what to give instead."""
from __future__ import annotations

import re
import subprocess
import sys

from pytest_glmf.config.yamlfile import ConfigError

LATEST = "latest"
_ANSWER = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*) \((?P<version>[^)]+)\)\s*$", re.M)


def is_latest(spec: str) -> bool:
    return spec.partition("==")[2].strip().lower() == LATEST


def resolve_latest(spec: str, timeout_s: float = 120.0) -> str:
    """`NAME==latest` -> `NAME==X.Y.Z`, the newest release pip finds; ConfigError when it finds none."""
    name = spec.partition("==")[0].strip()
    command = [sys.executable, "-m", "pip", "index", "versions", name]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{spec}: `pip index versions {name}` gave no answer in {timeout_s:.0f} s (offline?); "
                          f"give a pinned version ({name}==X.Y.Z)") from None
    m = _ANSWER.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        errors = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines()
                  if ln.strip() and not ln.startswith("WARNING: Location")]
        why = errors[-1][:200] if errors else f"exit {proc.returncode}, no output"
        raise ConfigError(f"{spec}: the newest {name} could not be looked up on the package index "
                          f"(pip index versions {name}: {why}); offline? give a pinned version ({name}==X.Y.Z)")
    return f"{name}=={m.group('version')}"
