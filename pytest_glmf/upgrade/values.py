"""What a release's own code says about a lane's values, run INSIDE that release's interpreter (an
overlay built by `glmf upgrade`, or a process lane's own interpreter).

Standard library plus the engine itself: it is passed to `python -c` as preflight's probe is, loads
the probe (launch/preflight/probe.py) from its file, and answers in one line:

    GLMF-VALUES {"probe": {<the probe's --describe answer, one per lane in "batch">},
                 "resolved": {dest: the default the engine's config settles on}, "lanes": [[finding, ...], ...]}

argparse checks names and types; these are the values it does not check, each looked up where the
engine itself looks it up when the server starts:
- JSON-valued flags (vLLM's `--speculative-config`, `--compilation-config`, `--kv-transfer-config`,
  every `--*-config`): each key against the fields of the config class the engine builds from it
  (a key the class does not have: refused where the class forbids unknown keys, ignored otherwise),
  each value against the field's type with the release's own pydantic (a removed `method`);
- names looked up in registries after parsing: vLLM's quantization methods (`QUANTIZATION_METHODS`;
  deprecated ones need --allow-deprecated-quantization), tool-call parsers and reasoning parsers
  (`ToolParserManager`, `ReasoningParserManager`, plugins aside);
- the environment: vLLM reads the `VLLM_*` variables its `vllm.envs.environment_variables` lists;
  SGLang the `SGLANG_*` ones its source names (`sglang.srt.environ.Envs` and direct reads).
`resolved`: for a flag whose default is None or a placeholder, the value the engine's config class
settles on (vLLM: the class constant `DEFAULT_<FIELD>`, e.g. `CacheConfig.DEFAULT_BLOCK_SIZE`).

    python -c SOURCE ENGINE PROBE_FILE LANES_JSON       LANES_JSON: [{"argv": [...], "env": {...}}, ...]
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import io
import json
import os
import re
import sys
import typing
from pathlib import Path
from typing import Any

MARK = "GLMF-VALUES "


def _load_probe(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("glmf_preflight_probe", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _finding(flag: str, change: str, detail: str, breaks: bool) -> dict[str, Any]:
    return {"flag": flag, "change": change, "detail": " ".join(detail.split())[:240], "breaks": breaks}


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


# --- vLLM -------------------------------------------------------------------------------------------

def _module(name: str) -> Any:
    """The release's module, or None where this release (or a stand-in) has none: that check is skipped."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _vllm_config_classes() -> dict[str, type]:
    """squashed class name -> the config dataclasses `vllm.config` exports (KVTransferConfig: kvtransferconfig)."""
    config = _module("vllm.config")
    out: dict[str, type] = {}
    if config is None:
        return out
    for name in dir(config):
        obj = getattr(config, name, None)
        if isinstance(obj, type) and dataclasses.is_dataclass(obj) and name.endswith("Config"):
            out[_squash(name)] = obj
    return out


def _forbids_unknown(cls: type) -> bool:
    config = getattr(cls, "__pydantic_config__", None) or {}
    return (config.get("extra") if isinstance(config, dict) else getattr(config, "extra", None)) == "forbid"


def _check_config(flag: str, cls: type, value: dict[str, Any]) -> list[dict[str, Any]]:
    """Each key of a JSON flag against the config class's fields, each value against its field's type."""
    out = []
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # noqa: BLE001 - a forward reference the release resolves lazily: keys only
        hints = {}
    for raw_key, item in value.items():
        key = str(raw_key).replace("-", "_")     # the engine's own spelling rule (create_speculative_config)
        if key not in fields:
            if _forbids_unknown(cls):
                out.append(_finding(flag, "unknown key", f"{raw_key!r}: {cls.__name__} has no such field and refuses "
                                    "unknown keys (the server does not start)", True))
            else:
                out.append(_finding(flag, "ignored key", f"{raw_key!r}: {cls.__name__} has no such field", False))
        elif key in hints and (refused := _refused(_constrained(cls, key, hints[key]), item)):
            out.append(_finding(flag, "value refused", f"{key}={item!r}: {refused} ({cls.__name__}.{key})", True))
    return out


def _constrained(cls: type, key: str, hint: Any) -> Any:
    """The field's type with its pydantic constraints (`Field(ge=1)`), as the config class validates it."""
    info = (getattr(cls, "__pydantic_fields__", None) or {}).get(key)
    metadata = list(getattr(info, "metadata", None) or [])
    return typing.Annotated[(hint, *metadata)] if metadata else hint


def _refused(hint: Any, item: Any) -> str | None:
    """pydantic's first complaint about `item` as `hint` (the release's own pydantic), or None."""
    try:
        from pydantic import TypeAdapter, ValidationError
    except ImportError:
        return None
    try:
        TypeAdapter(hint).validate_python(item)
    except ValidationError as exc:
        errors = exc.errors()
        return str(errors[0].get("msg")) if errors else str(exc).splitlines()[0]
    except Exception:  # noqa: BLE001 - a type pydantic cannot build an adapter for: not judged here
        return None
    return None


def _registry(paths: list[tuple[str, str]]) -> list[str] | None:
    """The names a manager class lists (`list_registered()`), from the first module that has it."""
    for module, cls in paths:
        manager = getattr(_module(module), cls, None)
        if manager is None:
            continue
        for hook in ("register_lazy_tool_parsers", "register_lazy_reasoning_parsers"):
            fn = getattr(sys.modules[module], hook, None)
            if callable(fn):
                with contextlib.suppress(Exception):
                    fn()
        if hasattr(manager, "list_registered"):
            return list(manager.list_registered())
        names = set(getattr(manager, "tool_parsers", {}) or getattr(manager, "reasoning_parsers", {}))
        return sorted(names | set(getattr(manager, "lazy_parsers", {})))
    return None


TOOL_PARSERS = [("vllm.tool_parsers", "ToolParserManager"),
                ("vllm.entrypoints.openai.tool_parsers", "ToolParserManager")]
REASONING_PARSERS = [("vllm.reasoning", "ReasoningParserManager")]


def vllm_values(ns: Any, env: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    classes = _vllm_config_classes()
    for dest, value in sorted(vars(ns).items()):
        if dest.endswith("_config") and isinstance(value, dict) and value:
            cls = classes.get(_squash(dest))
            if cls is not None:
                out += _check_config("--" + dest.replace("_", "-"), cls, value)
    method = getattr(ns, "quantization", None)
    if method:
        quant = _module("vllm.model_executor.layers.quantization")
        known = list(getattr(quant, "QUANTIZATION_METHODS", []))
        deprecated = list(getattr(quant, "DEPRECATED_QUANTIZATION_METHODS", []))
        if known and method not in known:
            out.append(_finding("--quantization", "unknown method", f"{method!r} is not a quantization method of "
                                "this release (its QUANTIZATION_METHODS)", True))
        elif method in deprecated and not getattr(ns, "allow_deprecated_quantization", False):
            out.append(_finding("--quantization", "deprecated method", f"{method!r} is deprecated: the server "
                                "refuses it without --allow-deprecated-quantization", True))
    for flag, dest, plugin, paths in (("--tool-call-parser", "tool_call_parser", "tool_parser_plugin", TOOL_PARSERS),
                                      ("--reasoning-parser", "reasoning_parser", "reasoning_parser_plugin",
                                       REASONING_PARSERS)):
        name = getattr(ns, dest, None)
        if not name or getattr(ns, plugin, None):
            continue
        names = _registry(paths)
        if names is not None and name not in names:
            out.append(_finding(flag, "unknown parser", f"{name!r} is not registered in this release "
                                f"(known: {', '.join(names)})", True))
    envs = _module("vllm.envs")
    read = set(getattr(envs, "environment_variables", {}))
    out += [_finding(name, "env var not read", "vllm.envs does not read it", True)
            for name in sorted(env) if name.startswith("VLLM_") and read and name not in read]
    return out


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _vllm_cuda_cache() -> Any:
    """`CacheConfig()` settled the way the release settles it on a CUDA GPU without a KV connector: its
    own resolver (`VllmConfig._resolve_extensible_kv_cache`, 0.34) with the platform answering as CUDA;
    the plain `CacheConfig()` where the release has no resolver; None where it cannot be built here."""
    cache, vllm_config, platforms = _module("vllm.config.cache"), _module("vllm.config.vllm"), _module("vllm.platforms")
    try:
        settled = cache.CacheConfig()
    except Exception:  # noqa: BLE001 - a release whose CacheConfig needs arguments: nothing resolved here
        return None
    resolver = getattr(getattr(vllm_config, "VllmConfig", None), "_resolve_extensible_kv_cache", None)
    if resolver is None or platforms is None:
        return settled
    cuda = type("CudaAsSeen", (), {"is_cuda_alike": lambda self: True, "is_cuda": lambda self: True,
                                   "is_rocm": lambda self: False})()
    holder = type("Settling", (), {})()
    holder.cache_config, holder.kv_transfer_config = settled, None
    holder.parallel_config = type("Parallel", (), {"enable_elastic_ep": False})()
    before = platforms.__dict__.get("current_platform")
    platforms.current_platform = cuda
    try:
        resolver(holder)
    except Exception:  # noqa: BLE001 - the resolver wants more of a config than this: say nothing
        return None
    finally:
        if before is None:
            del platforms.current_platform
        else:
            platforms.current_platform = before
    return settled


def vllm_resolved(parser: Any) -> dict[str, Any]:
    """dest -> the default the engine's config settles on behind the flag: the cache config as settled on a
    CUDA GPU (block size, the extensible KV cache, `resolved_gpu_memory_utilization`), else a config
    class's `DEFAULT_<FIELD>` constant; for a flag whose default is a config object, its fields."""
    dests = {a.dest: a for a in parser._actions}
    out: dict[str, Any] = {}
    settled = _vllm_cuda_cache()
    if settled is not None:
        for f in dataclasses.fields(settled):
            if f.name in dests and f.init:
                value = getattr(settled, f"resolved_{f.name}", getattr(settled, f.name))
                if value != dests[f.name].default:
                    out[f.name] = _plain(value)
    for cls in _vllm_config_classes().values():
        names = {f.name for f in dataclasses.fields(cls)}
        for dest in names & set(dests) - set(out):
            constant = getattr(cls, f"DEFAULT_{dest.upper()}", None)
            if constant is not None and dests[dest].default is None:
                out[dest] = _plain(constant)
    for dest, action in dests.items():
        default = action.default
        if dataclasses.is_dataclass(default) and not isinstance(default, type):
            out[dest] = {"fields": {f.name: _plain(getattr(default, f.name)) for f in dataclasses.fields(default)}}
        elif isinstance(default, dict) and default:
            out[dest] = {"fields": {str(k): _plain(v) for k, v in default.items()}}
    return out


# --- SGLang -----------------------------------------------------------------------------------------

def sglang_values(ns: Any, env: dict[str, str]) -> list[dict[str, Any]]:
    names = [n for n in sorted(env) if n.startswith("SGLANG_")]
    if not names:
        return []
    read: set[str] = set()
    environ = _module("sglang.srt.environ")
    read |= {n for n in dir(getattr(environ, "Envs", object)) if n.startswith("SGLANG_")}
    root = Path(importlib.import_module("sglang").__file__ or "").parent
    left = set(names) - read
    for path in root.rglob("*.py"):
        if not left:
            break
        with contextlib.suppress(OSError):
            body = path.read_text(errors="replace")
            left -= {n for n in left if f'"{n}"' in body or f"'{n}'" in body}
    return [_finding(n, "env var not read", "no SGLang module names it", True) for n in sorted(left)]


def answer(engine: str, probe_file: str, lanes: list[dict[str, Any]]) -> dict[str, Any]:
    probe = _load_probe(probe_file)
    argvs = [lane["argv"] for lane in lanes]
    described = probe.probe(engine, argvs, with_actions=True)
    parser, _, _ = probe.BUILDERS[engine]()
    parser.error = _raise
    checks = vllm_values if engine == "vllm" else sglang_values
    per_lane: list[list[dict[str, Any]]] = []
    for lane, batch in zip(lanes, described["batch"], strict=True):
        argv = list(lane["argv"])
        for problem in batch["problems"]:
            argv = probe._without(argv, str(problem["flag"]))
        try:
            ns = parser.parse_args(argv)
        except (Exception, SystemExit):  # noqa: BLE001 - the probe already reported what argparse refuses
            per_lane.append([])
            continue
        per_lane.append(checks(ns, lane.get("env") or {}))
    resolved = vllm_resolved(parser) if engine == "vllm" else {}
    package = Path(importlib.import_module(engine).__file__ or ".").parent
    return {"probe": described, "resolved": resolved, "lanes": per_lane, "package_dir": str(package)}


def _raise(message: str) -> typing.NoReturn:
    raise ValueError(message)


def main(args: list[str]) -> int:
    engine, probe_file, lanes = args[0], args[1], json.loads(args[2])
    with contextlib.redirect_stdout(io.StringIO()):     # engines log while importing
        result = answer(engine, probe_file, lanes)
    sys.stdout.write(MARK + json.dumps(result, default=str) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main(sys.argv[1:]))
