"""What the gates read from an engine, per engine: the boot-log formats, the `/metrics` names and the
endpoints. `glmf upgrade` checks each against a release's source; the contract stage
(tests/contract/test_vllm_released.py) pins the vLLM boot formats to vLLM 0.33.0's files and lines.

vLLM boot formats: every pattern the boot gate declares in `pytest_glmf/gates/boot/vllm.py`
(`boot_patterns()`, module-level `re.Pattern`s and lists of them, so a pattern added there is
found without this file knowing it) maps to the vLLM format string that prints the line it reads
(`VLLM_BOOT_FORMATS`: the file inside the package, the format as a skeleton, every `%s`/`{}` as `{}`,
and a sample rendering the pattern must match), or to the reason no vLLM 0.33 line carries it
(`VLLM_NOT_IN_SOURCE`: V0-engine lines, uvicorn's own lines).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

REPO_PACKAGE = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class BootFormat:
    pattern: str        # the boot gate's name for it: "_VLLM_KVTOK", "_VLLM_MEM[1]"
    source: str         # the file inside the installed package (as of vLLM 0.33.0)
    line: int           # its logging call's line there (0.33.0)
    skeleton: str       # the format string, every field as {}
    sample: tuple[object, ...]


VLLM_BOOT_FORMATS: tuple[BootFormat, ...] = (
    BootFormat("_VLLM_KVTOK", "vllm/v1/core/kv_cache_utils.py", 1147,
               "{} KV cache size: {} tokens, Maximum concurrency for {} tokens per request: {}x",
               ("GPU", "1,048,576", "131,072", "8.00")),
    BootFormat("_VLLM_CONC", "vllm/v1/core/kv_cache_utils.py", 1147,
               "{} KV cache size: {} tokens, Maximum concurrency for {} tokens per request: {}x",
               ("CPU", "8,192", "2,048", "4.00")),
    BootFormat("_VLLM_NONDEFAULT", "vllm/entrypoints/common/startup.py", 96, "non-default args: {}",
               ({"model": "/models/m", "max_num_seqs": 16},)),
    BootFormat("_VLLM_CONFIG", "vllm/v1/engine/core.py", 139, "Initializing a V1 LLM engine (v{}) with config: {}",
               ("0.33.0", "model='/models/m', dtype=torch.bfloat16, kv_cache_dtype=auto, device_config=cpu")),
    BootFormat("_VLLM_MEM[0]", "vllm/v1/worker/gpu_worker.py", 772, "Available KV cache memory: {} GiB", ("37.50",)),
    BootFormat("_VLLM_MEM[1]", "vllm/v1/worker/cpu_worker.py", 261,
               "Explicitly set ({}/{}) GiB for KV cache on node {}.", ("4.00", "4.00", 0)),
    BootFormat("_VLLM_CTX[0]", "vllm/config/model.py", 2170, "Using max model len {}", (131072,)),
)
VLLM_NOT_IN_SOURCE: dict[str, str] = {
    "_VLLM_KVTOK_V0": "the V0 engine's line (vLLM < 0.10); V1 prints `{} KV cache size: {} tokens`",
    "_VLLM_BLOCKS": "the V0 engine's `# GPU blocks` line; V1 prints no block count",
    "_VLLM_MEM[2]": "the V0 engine's memory profiling line",
    "_VLLM_MEM[3]": "the V0 engine's memory profiling line",
    "_VLLM_CTX[1]": "older builds' scheduler config dump (max_seq_len=)",
    "_VLLM_CTX[2]": "older builds' max-model-len error text",
    "_VLLM_READY": "uvicorn's `Application startup complete` and its access log, not vLLM's code",
}

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


def boot_patterns() -> dict[str, re.Pattern[str]]:
    """The vLLM boot gate's patterns by name (lists as NAME[i])."""
    from pytest_glmf.gates.boot import vllm as gate

    out: dict[str, re.Pattern[str]] = {}
    for name, value in vars(gate).items():
        if isinstance(value, re.Pattern):
            out[name] = value
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, re.Pattern) for v in value):
            out.update({f"{name}[{i}]": v for i, v in enumerate(value)})
    return out


def boot_formats(engine: str) -> list[tuple[str, str, str]]:
    """(name, file inside the package, skeleton) of every boot line the gate reads from `engine`."""
    if engine == "vllm":
        return [(f.pattern, f.source, f.skeleton) for f in VLLM_BOOT_FORMATS]
    from pytest_glmf.engine.logformats import FORMATS, V0_5_23

    return [(name, f.source, f.skeleton) for name, f in FORMATS[V0_5_23].items() if f.source and f.skeleton]


def render(fmt: BootFormat) -> str:
    return fmt.skeleton.format(*fmt.sample)


def source_has(package_parent: Path, source: str, skeleton: str) -> str | None:
    """Where the skeleton is written: `source` itself, else any file of the package (a moved file);
    None when no file has it. Any string literal or f-string counts (a boot line may be a logging call's
    format or an exception's message), read the way tests/contract/test_boot_formats.py reads them."""
    from pytest_glmf.upgrade.formats import skeletons

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
