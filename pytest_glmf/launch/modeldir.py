"""What exactly was served: the model directory's revision, weight bytes and config hash.

Engine-agnostic (the process launcher can use `model_dir_provenance` too); the docker launcher maps
the lane's in-container model path back to the host directory through the lane's volumes first.
The recipe reports "image digest, model revision and byte count": two runs are only comparable
when these match.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf")
_SHA_RE = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def host_path_for(container_path: str, volumes: dict[str, str]) -> Path | None:
    """The host directory behind `container_path`, through the longest matching bind mount."""
    target = PurePosixPath(container_path)
    best: tuple[int, Path] | None = None
    for host, bind in volumes.items():
        bind_path = PurePosixPath(bind)
        if target == bind_path or bind_path in target.parents:
            depth = len(bind_path.parts)
            if best is None or depth > best[0]:
                best = (depth, Path(host) / target.relative_to(bind_path))
    return best[1] if best else None


def _git_revision(repo: Path) -> str | None:
    git = repo / ".git"
    head_file = git / "HEAD"
    if not head_file.is_file():
        return None
    head = head_file.read_text().strip()
    if not head.startswith("ref: "):
        return head or None                       # detached HEAD holds the sha itself
    ref = head[len("ref: "):]
    ref_file = git / ref
    if ref_file.is_file():
        return ref_file.read_text().strip() or None
    packed = git / "packed-refs"                  # refs moved here by `git gc`
    if packed.is_file():
        for line in packed.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref:
                return parts[0]
    return None


def _hub_revision(model_dir: Path) -> tuple[str, str] | None:
    # Hugging Face cache layout: models--org--name/{refs/main, snapshots/<sha>/...}
    if model_dir.parent.name == "snapshots" and _SHA_RE.match(model_dir.name):
        return model_dir.name, "hub snapshot directory name"
    for refs in (model_dir / "refs" / "main", model_dir.parent.parent / "refs" / "main"):
        if refs.is_file():
            sha = refs.read_text().strip()
            if sha:
                return sha, str(refs)
    # `hf download --local-dir` keeps one .metadata file per file; its first line is the commit.
    meta_dir = model_dir / ".cache" / "huggingface" / "download"
    if meta_dir.is_dir():
        for meta in sorted(meta_dir.rglob("*.metadata")):
            first = meta.read_text(errors="replace").splitlines()[:1]
            if first and _SHA_RE.match(first[0].strip()):
                return first[0].strip(), str(meta)
    return None


def weight_files(model_dir: Path) -> list[Path]:
    found: list[Path] = []
    for root, dirs, files in os.walk(model_dir, followlinks=True):
        dirs[:] = [d for d in dirs if d not in (".git", ".cache")]
        found.extend(Path(root) / f for f in files if f.endswith(WEIGHT_SUFFIXES))
    return sorted(found)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_dir_provenance(model_dir: Path | None, *, declared: str | None = None,
                         lane_revision: str | None = None) -> dict[str, Any]:
    """Revision (lane field > .git HEAD > hub metadata), weight bytes and config.json sha256.

    `declared` is the path or hub id as the lane wrote it. A directory that is not readable from
    here (a remote engine's host path, a hub id) gives `readable: False` rather than an error:
    provenance must never stop a run.
    """
    out: dict[str, Any] = {"declared": declared, "host_path": str(model_dir) if model_dir else None,
                           "readable": False, "revision": lane_revision,
                           "revision_source": "lane" if lane_revision else None,
                           "weight_bytes": None, "weight_files": None, "config_sha256": None}
    if model_dir is None or not model_dir.is_dir():
        return out
    out["readable"] = True
    if lane_revision is None:
        git_rev = _git_revision(model_dir)
        if git_rev:
            out["revision"], out["revision_source"] = git_rev, str(model_dir / ".git" / "HEAD")
        else:
            hub = _hub_revision(model_dir)
            if hub:
                out["revision"], out["revision_source"] = hub
    files = weight_files(model_dir)
    out["weight_files"] = len(files)
    out["weight_bytes"] = sum(f.stat().st_size for f in files)
    config = model_dir / "config.json"
    if config.is_file():
        out["config_sha256"] = _sha256(config)
    return out
