"""Facts about where a result came from that no launcher knows: the host's GPUs, the git commit of
the repository under test, the plugin version, the start time. Launchers add their own (image id
and digest, command line, model revision and bytes) to `Server.provenance`."""
from __future__ import annotations

import datetime as _dt
import shutil
import subprocess
from pathlib import Path
from typing import Any

from pytest_glmf import __version__
from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.engine.introspect import engine_version as ask
from pytest_glmf.launch.modeldir import model_dir_provenance


def _run(argv: list[str], cwd: Path | None = None, timeout_s: float = 10.0) -> str | None:
    try:
        out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def gpu_info(nvidia_smi: str = "nvidia-smi") -> dict[str, Any]:
    """GPU name, count and driver from nvidia-smi; {} on a host without it (e.g. CI without GPU,
    or a lane served by a remote Docker engine: then the GPU is the remote host's, not ours)."""
    if shutil.which(nvidia_smi) is None:
        return {}
    text = _run([nvidia_smi, "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if not text:
        return {}
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    names = sorted({r[0] for r in rows})
    return {"gpu_name": ", ".join(names), "gpu_count": len(rows),
            "gpu_driver": rows[0][1] if len(rows[0]) > 1 else None}


def git_commit(path: Path) -> str | None:
    """The commit of the repository under test (with '+dirty' when it has local changes)."""
    sha = _run(["git", "rev-parse", "HEAD"], cwd=path)
    if not sha:
        return None
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=path)
    return sha + ("+dirty" if dirty else "")


def host_provenance(repo_dir: Path) -> dict[str, Any]:
    return {"plugin_version": __version__,
            "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "git_commit": git_commit(repo_dir), **gpu_info()}


def engine_version(base_url: str, timeout_s: float = 3.0) -> str | None:
    """The engine's own version string (vLLM `/version`, SGLang `/server_info`; see
    pytest_glmf/engine/introspect.py). None when the server does not say (never an error:
    provenance must not stop a run)."""

    t = Timeouts(connect_s=timeout_s, first_token_s=timeout_s, between_tokens_s=timeout_s)
    with Client(base_url, t) as client:
        return ask(client)[0]


def model_provenance(model: str | None) -> dict[str, Any]:
    """Revision, weight bytes and config hash of a model directory readable from here (process
    and sim lanes; the docker launcher does the same through its volumes)."""

    if not model:
        return {}
    path = Path(model)
    facts = model_dir_provenance(path if path.is_dir() else None, declared=model)
    return {"model": model, "model_revision": facts.get("revision"), "model_bytes": facts.get("weight_bytes"),
            "model_config_sha256": facts.get("config_sha256")} if facts.get("readable") else {"model": model}
