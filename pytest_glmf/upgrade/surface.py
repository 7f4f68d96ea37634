"""What the gates read from an engine, per engine: the boot-log formats, the `/metrics` names and the
endpoints. `glmf upgrade` checks each against a release's source; the contract stage
(tests/contract/test_vllm_released.py) pins the vLLM boot formats to every tracked release's files and
lines (pytest_glmf/upgrade/releases.py `VLLM_RELEASES`).

vLLM boot formats: the boot gate declares every line it reads once, in `gates/boot/vllm.py`
`VLLM_LINES` (its pattern, and for the lines a tracked release prints, the format string, the file
and the releases that print it: `since`, `until`). The census pins each declared format to its
logging call's line in each release that prints it (`VLLM_PINS[release][name]`) and gives a sample
rendering the pattern must match (`VLLM_SAMPLES`); a line the gate declares without a format is one
no tracked release prints (uvicorn's, the V0 engine's). A line the gate adds is found by enumerating
`VLLM_LINES`, and a release added to `VLLM_RELEASES` by enumerating that, so the census fails until
each is pinned (naming the lines to pin, with the line numbers found in the release's source).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_glmf.engine.logformats import FORMATS, V0_5_23
from pytest_glmf.gates.boot.vllm import VLLM_LINES
from pytest_glmf.upgrade.formats import skeletons
from pytest_glmf.upgrade.releases import VLLM_RELEASES, prints_in

REPO_PACKAGE = Path(__file__).resolve().parents[1]
_PERCENT = re.compile(r"%[-+ 0#]*\d*(?:\.\d+)?[sdifrgeEx]")


@dataclass(frozen=True)
class BootFormat:
    name: str           # the boot gate's name for the line (gates/boot/vllm.py VLLM_LINES)
    pattern: re.Pattern[str]
    source: str         # the file inside the installed package
    line: int | None    # its logging call's line there in `release` (None: not pinned yet)
    skeleton: str       # the format string, every field as {}
    sample: tuple[object, ...]
    release: str        # the vLLM release the pin is for


# release -> name -> the logging call's line in that release (the census, tests/contract/test_vllm_released.py)
VLLM_PINS: dict[str, dict[str, int]] = {
    "0.33.0": {"kv_cache_size": 1147, "max_concurrency": 1147, "kv_cache_memory": 772, "kv_cache_memory_cpu": 261,
               "context_auto_fit": 1404, "context": 2170, "non_default_args": 96, "engine_config": 139,
               "context_config": 139, "active_seqs_override": 2386},
    "0.34.0": {"kv_cache_size": 1168, "max_concurrency": 1168, "kv_cache_memory": 795, "kv_cache_memory_cpu": 255,
               "kv_after_warmup": 693, "kv_extended": 536, "kv_remapped": 525, "kv_extensible_disabled": 175,
               "kv_extensible_off": 3256, "context_auto_fit_tentative": 1478, "context_auto_reduced": 1494,
               "context_auto_reduced_short": 1506, "context_auto_fit_after_warmup": 1458, "context": 2214,
               "non_default_args": 96, "engine_config": 153, "context_config": 153, "active_seqs_override_fit": 2310},
}
# name -> sample values, one per field of its format
VLLM_SAMPLES: dict[str, tuple[object, ...]] = {
    "kv_cache_size": ("GPU", "1,048,576", "131,072", 8.0),
    "max_concurrency": ("CPU", "8,192", "2,048", 4.0),
    "kv_cache_memory": ("37.50",),
    "kv_cache_memory_cpu": ("4.00", "4.00", 0),
    "kv_after_warmup": ("60.1", "0.02", "2.9", "2.9", "0.0", 7324, "57.22", "79.1", "3.1"),
    "kv_extended": (7324, 57.22),
    "kv_remapped": (7400, 7324),
    "kv_extensible_disabled": ("another rank cannot use it",),
    "kv_extensible_off": (),
    "context_auto_fit": (1048576, 262144, "37.50 GiB"),
    "context_auto_fit_tentative": (1048576, 262144, "37.50 GiB GPU", "; the final length is set after CUDA graph "
                                                                     "capture and warmup"),
    "context_auto_reduced": (1048576, 262144, "57.22 GiB GPU available for the KV cache"),
    "context_auto_reduced_short": (1048576, 2048, "1.0 GiB GPU available for the KV cache", 2048,
                                   "Use more GPUs or set --max-model-len explicitly."),
    "context_auto_fit_after_warmup": (262144, "57.22 GiB GPU"),
    "context": (131072,),
    "non_default_args": ({"model": "/models/m", "max_num_seqs": 16},),
    "engine_config": ("0.34.0", "model='/models/m', dtype=torch.bfloat16, kv_cache_dtype=auto, device_config=cpu"),
    "context_config": ("0.34.0", "model='/models/m', max_seq_len=131072, kv_cache_dtype=auto"),
    "active_seqs_override": ("DFlash", 8, 8192, 1024, 1024),
    "active_seqs_override_fit": ("dflash", 64, 8192, 80, 64),
}


def skeleton_of(fmt: str) -> str:
    """A declared format (%-style as in the source, or already a skeleton for an f-string) as a skeleton."""
    return _PERCENT.sub("{}", fmt) if "%" in fmt else fmt


def expected_vllm_lines(release: str | None = None) -> dict[str, bool]:
    """name -> whether `release` prints the line (None: the newest tracked release, and every later one
    until a line says otherwise), for every line the gate declares with a format."""
    release = release or VLLM_RELEASES[-1]
    return {name: prints_in(release, x.since, x.until) for name, x in VLLM_LINES.items() if x.fmt and x.source}


def vllm_boot_formats(release: str | None = None) -> list[BootFormat]:
    """Every line the boot gate declares with a format that `release` prints (None: the newest tracked
    release), with its pin for that release (`line` None where it has none yet)."""
    release = release or VLLM_RELEASES[-1]
    pins = VLLM_PINS.get(release, {})
    return [BootFormat(name, x.pattern, x.source, pins.get(name), skeleton_of(x.fmt), VLLM_SAMPLES[name], release)
            for name, x in VLLM_LINES.items()
            if x.fmt and x.source and prints_in(release, x.since, x.until)]


def declared_vllm_lines() -> dict[str, bool]:
    """name -> whether the gate gives it a vLLM format (some tracked release prints it)."""
    return {name: bool(x.fmt and x.source) for name, x in VLLM_LINES.items()}


# `/metrics` names the gates read (load/endpoints.py, gates/acceptance/probe.py)
METRIC_ROOMS = ("gates", "load")       # the folders whose code reads an engine's /metrics


def metric_names(engine: str) -> list[str]:
    """Every `ENGINE:` metric name written as a string where the project reads metrics: the gates and
    the load engine they measure through (pytest_glmf/load: the running/queued gauges sampled around
    a run)."""
    prefix = f"{engine}:"
    found: set[str] = set()
    for path in sorted(p for room in METRIC_ROOMS for p in (REPO_PACKAGE / room).rglob("*.py")):
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


def boot_formats(engine: str, version: str | None = None) -> list[tuple[str, str, str]]:
    """(name, file inside the package, skeleton) of every boot line the gate reads from `engine`; for
    vLLM, the lines it expects `version` to print (None: the newest tracked release's)."""
    if engine == "vllm":
        return [(name, x.source, skeleton_of(x.fmt)) for name, x in VLLM_LINES.items()
                if x.fmt and x.source and prints_in(version or VLLM_RELEASES[-1], x.since, x.until)]
    return [(name, f.source, f.skeleton) for name, f in FORMATS[V0_5_23].items() if f.source and f.skeleton]


def render(fmt: BootFormat) -> str:
    """The line rendered with the sample values (each `{}` of the skeleton filled in turn)."""
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
