"""What a running server says about itself: engine, served model, version, metrics. One home.

Endpoints, per engine (sources are the engines' released code):
- `/v1/models`: both; `data[].owned_by` is "sglang" (SGLang 0.5.23 protocol.py `ModelCard`) or
  "vllm"; `data[0].id` is the served model (vLLM rejects any other name, SGLang ignores it).
- `/version`: vLLM only (`{"version": "0.32.0"}`, vllm/entrypoints/serve/instrumentator/basic.py).
- `/model_info`, `/server_info`: SGLang (sglang/srt/entrypoints/http_server.py); `/server_info`
  carries `version`. Their old names `/get_model_info`, `/get_server_info` still answer on 0.5.23
  but log a deprecation WARNING on every call, so they are tried only when the new ones do not
  exist (older SGLang). vLLM also serves `/server_info` in dev mode (VLLM_SERVER_DEV_MODE=1;
  vllm/entrypoints/serve/dev/server_info/api_router.py): its answer holds `vllm_config`, and is
  never taken for SGLang.
- `/metrics`: Prometheus text, parsed by `prometheus_client`'s own parser.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from pytest_glmf.engine.client import Client

ENGINES = ("sglang", "vllm")


class EngineUnknown(RuntimeError):
    """The server answered none of the probes that tell SGLang from vLLM."""


def _get(client: Client, path: str) -> Any:
    """JSON of a GET, or None when the endpoint is missing, fails or is not JSON."""
    try:
        return client.get_json(path)
    except (httpx.HTTPError, ValueError):
        return None


def first_model_id(models: Any) -> str | None:
    """The first model id of a `/v1/models` answer (already decoded), or None."""
    try:
        data = models.get("data") or []
        return str(data[0]["id"]) if data else None
    except (AttributeError, KeyError, IndexError, TypeError):
        return None


def served_model(client: Client) -> str | None:
    """The model name to send in OpenAI requests: the first id of /v1/models."""
    return first_model_id(_get(client, "/v1/models"))


def models_owner(client: Client) -> str | None:
    """`owned_by` of the first served model, lower-cased ("sglang", "vllm", or what a proxy says)."""
    models = _get(client, "/v1/models")
    try:
        owner = (models.get("data") or [{}])[0].get("owned_by")
    except (AttributeError, IndexError, TypeError):
        return None
    return str(owner).lower() if owner else None


def _sglang_server_info(client: Client) -> dict[str, Any] | None:
    """SGLang's /server_info (or, on builds without it, /get_server_info); never vLLM's dev-mode one."""
    for path in ("/server_info", "/get_server_info"):
        info = _get(client, path)
        if isinstance(info, dict) and "vllm_config" not in info:
            return info
    return None


def detect_engine(client: Client) -> str:
    """'sglang' or 'vllm', from what the server says about itself (see the module docstring)."""
    owner = models_owner(client)
    if owner in ENGINES:
        return owner
    version = _get(client, "/version")
    if isinstance(version, dict) and "version" in version:
        return "vllm"                       # SGLang has no /version
    if isinstance(_get(client, "/model_info"), dict):
        return "sglang"
    if _sglang_server_info(client) is not None or isinstance(_get(client, "/get_model_info"), dict):
        return "sglang"
    raise EngineUnknown(f"{client.base_url}: cannot tell whether this is SGLang or vLLM (/v1/models owned_by "
                        f"{owner!r}, no /version, /model_info or /server_info); pass the engine explicitly")


def engine_version(client: Client, engine: str | None = None) -> tuple[str | None, str | None]:
    """(version, the endpoint that said it); (None, None) when the server does not say."""
    if engine in (None, "vllm"):
        v = _get(client, "/version")
        if isinstance(v, dict) and isinstance(v.get("version"), str) and v["version"]:
            return v["version"], "/version"
    if engine in (None, "sglang"):
        for path in ("/server_info", "/get_server_info"):
            info = _get(client, path)
            if isinstance(info, dict) and "vllm_config" not in info and isinstance(info.get("version"), str):
                return info["version"], path
    return None, None


def parse_metrics(text: str, names: Iterable[str] | None = None) -> dict[str, float]:
    """Prometheus text -> {sample name: value summed over its label sets} (`engine="0"`,
    `model_name=...`, per-rank series are one quantity). `names` keeps only those samples; absent
    names are left out, so a server without speculative decoding gives {} for its counters.

    With `names`, only the lines of those samples reach the parser (a string test per line, in
    C): a GPU vLLM's /metrics is ~55 KB and ~450 samples (tests/testing/data/vllm_0.26.0_h200_metrics.txt), which the full
    parse takes ~15 ms of pure Python over, while the few lines a caller wants parse in ~0.1 ms."""
    wanted = set(names) if names is not None else None
    if wanted is not None:
        text = "\n".join(line for line in text.splitlines()
                         if line[:1] not in ("#", "") and _sample_name(line) in wanted) + "\n"
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if wanted is None or sample.name in wanted:
                out[sample.name] = out.get(sample.name, 0.0) + float(sample.value)
    return out


def _sample_name(line: str) -> str:
    """The sample name a Prometheus text line starts with (up to `{` or a space)."""
    end = len(line)
    for stop in ("{", " "):
        i = line.find(stop)
        if 0 <= i < end:
            end = i
    return line[:end]


def metrics(client: Client, names: Iterable[str] | None = None) -> dict[str, float] | None:
    """The server's /metrics, parsed (None when it serves none, e.g. SGLang without --enable-metrics)."""
    try:
        return parse_metrics(client.get_text("/metrics"), names)
    except (httpx.HTTPError, ValueError):
        return None


@dataclass
class EngineIdentity:
    """Who the server says it is, from every source that can tell."""

    declared: str | None                       # the lane's `engine:`
    models_owner: str | None = None            # /v1/models owned_by
    boot_log: str | None = None                # the boot log's engine (gates/boot/parse.py)
    version: str | None = None
    version_source: str | None = None          # /version (vLLM) or /server_info (SGLang)
    served_model: str | None = None
    sources: dict[str, str] = field(default_factory=dict)   # source -> engine it points at

    @property
    def agreed(self) -> str | None:
        """The engine every source that tells names, or None (no source, or they disagree)."""
        engines = set(self.sources.values())
        return engines.pop() if len(engines) == 1 else None

    def disagreement(self) -> str | None:
        """None when every source that tells agrees with the declared engine (or, with nothing
        declared, with each other), else the sentence naming who says what."""
        if not self.sources:
            return None
        said = ", ".join(f"{k} says {v}" for k, v in self.sources.items())
        if self.declared is None:
            return None if self.agreed else f"the server's own sources disagree: {said}"
        if set(self.sources.values()) == {self.declared}:
            return None
        return f"the lane declares engine {self.declared!r} but {said}"


def identify(client: Client, declared: str | None, boot_log_engine: str | None = None) -> EngineIdentity:
    """Ask every source (models list, version endpoint, the boot log the caller parsed)."""
    ident = EngineIdentity(declared=declared, boot_log=boot_log_engine)
    ident.models_owner = models_owner(client)
    ident.served_model = served_model(client)
    ident.version, ident.version_source = engine_version(client)
    if ident.models_owner in ENGINES:
        ident.sources["/v1/models owned_by"] = ident.models_owner
    if ident.version_source == "/version":
        ident.sources["/version"] = "vllm"
    elif ident.version_source:
        ident.sources[ident.version_source] = "sglang"
    if boot_log_engine in ENGINES:
        ident.sources["the boot log"] = boot_log_engine
    return ident
