"""What the gates read from an engine, per engine: the boot-log formats, the `/metrics` names and the
endpoints. `glmf upgrade` checks each against a release's source; the contract stage
(tests/contract/test_vllm_released.py) pins the vLLM boot formats to vLLM 0.33.0's files and lines.

vLLM boot formats: the boot gate declares every line it reads once, in `gates/boot/vllm.py`
`VLLM_LINES` (its pattern, and for the lines 0.33 prints, the format string and the file). The
census pins each declared format to its 0.33.0 line (the logging call's) and gives a sample
rendering the pattern must match (`VLLM_PINS`); a line the gate declares without a format is one
0.33 does not print (uvicorn's, the V0 engine's). A line the gate adds is found by enumerating
`VLLM_LINES`, so the census fails until it is pinned.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_glmf.engine.logformats import FORMATS, V0_5_23
from pytest_glmf.gates.boot.vllm import VLLM_LINES
from pytest_glmf.upgrade.formats import skeletons

REPO_PACKAGE = Path(__file__).resolve().parents[1]
_PERCENT = re.compile(r"%[-+ 0#]*\d*(?:\.\d+)?[sdifrgeEx]")


@dataclass(frozen=True)
class BootFormat:
    name: str           # the boot gate's name for the line (gates/boot/vllm.py VLLM_LINES)
    pattern: re.Pattern[str]
    source: str         # the file inside the installed package (as of vLLM 0.33.0)
    line: int           # its logging call's line there (0.33.0)
    skeleton: str       # the format string, every field as {}
    sample: tuple[object, ...]


# name -> (the logging call's line in 0.33.0, sample values, one per field)
VLLM_PINS: dict[str, tuple[int, tuple[object, ...]]] = {
    "kv_cache_size": (1147, ("GPU", "1,048,576", "131,072", "8.00")),
    "max_concurrency": (1147, ("CPU", "8,192", "2,048", "4.00")),
    "kv_cache_memory": (772, ("37.50",)),
    "kv_cache_memory_cpu": (261, ("4.00", "4.00", 0)),
    "context_auto_fit": (1404, (1048576, 262144, "37.50 GiB")),
    "context": (2170, (131072,)),
    "non_default_args": (96, ({"model": "/models/m", "max_num_seqs": 16},)),
    "engine_config": (139, ("0.33.0", "model='/models/m', dtype=torch.bfloat16, kv_cache_dtype=auto, device_config=cpu")),
    "context_config": (139, ("0.33.0", "model='/models/m', max_seq_len=131072, kv_cache_dtype=auto")),
    "active_seqs_override": (2386, ("DFlash", 8, 8192, 1024, 1024)),
}


def skeleton_of(fmt: str) -> str:
    """A declared format (%-style as in the source, or already a skeleton for an f-string) as a skeleton."""
    return _PERCENT.sub("{}", fmt) if "%" in fmt else fmt


def vllm_boot_formats() -> list[BootFormat]:
    """Every line the boot gate declares with a 0.33 format, with its pin (KeyError: an unpinned line)."""
    out = []
    for name, x in VLLM_LINES.items():
        if x.fmt and x.source:
            line, sample = VLLM_PINS[name]
            out.append(BootFormat(name, x.pattern, x.source, line, skeleton_of(x.fmt), sample))
    return out


def declared_vllm_lines() -> dict[str, bool]:
    """name -> whether the gate gives it a vLLM 0.33 format."""
    return {name: bool(x.fmt and x.source) for name, x in VLLM_LINES.items()}


# `/metrics` names the gates read (gates/curve/endpoints.py, gates/acceptance/probe.py)
def metric_names(engine: str) -> list[str]:
    """Every `ENGINE:` metric name written as a string in the project's gates."""
    prefix = f"{engine}:"
    found: set[str] = set()
    for path in sorted((REPO_PACKAGE / "gates").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(prefix) \
                    and re.fullmatch(r"[a-z0-9_:]+", node.value):
                found.add(node.value)
    return sorted(found)


# endpoints the gates call (engine/client.py callers under gates/, engine/introspect.py)
ENDPOINTS = {
    "vllm": ("/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize", "/detokenize", "/metrics",
             "/health", "/version"),
    "sglang": ("/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize", "/detokenize", "/metrics",
               "/health", "/generate", "/model_info", "/server_info"),
}


def boot_formats(engine: str) -> list[tuple[str, str, str]]:
    """(name, file inside the package, skeleton) of every boot line the gate reads from `engine`."""
    if engine == "vllm":
            return [(name, x.source, skeleton_of(x.fmt)) for name, x in VLLM_LINES.items() if x.fmt and x.source]
    return [(name, f.source, f.skeleton) for name, f in FORMATS[V0_5_23].items() if f.source and f.skeleton]


def render(fmt: BootFormat) -> str:
    return fmt.skeleton.format(*fmt.sample)


def source_has(package_parent: Path, source: str, skeleton: str) -> str | None:
    """Where the skeleton is written: `source` itself, else any file of the package (a moved file);
    None when no file has it. Any string literal or f-string counts (a boot line may be a logging call's
    format or an exception's message), read the way tests/contract/test_boot_formats.py reads them."""
    def has(path: Path) -> bool:
        try:
            return any(sk == skeleton for _, sk in skeletons(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            return False

    first = package_parent / source
    if first.is_file() and has(first):
        return source
    top = source.split("/", 1)[0]
    for path in sorted((package_parent / top).rglob("*.py")):
        if path != first and has(path):
            return path.relative_to(package_parent).as_posix()
    return None


def source_mentions(package_parent: Path, top: str, texts: list[str]) -> dict[str, bool]:
    """For each text, whether any .py file of the package holds it as a string literal (fast: grep)."""
    left = set(texts)
    seen: dict[str, bool] = dict.fromkeys(texts, False)
    for path in (package_parent / top).rglob("*.py"):
        try:
            body = path.read_text(errors="replace")
        except OSError:
            continue
        for t in list(left):
            if f'"{t}"' in body or f"'{t}'" in body:
                seen[t] = True
                left.discard(t)
        if not left:
            break
    return seen
