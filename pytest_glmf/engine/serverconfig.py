"""What a running server says it runs, read from its own endpoints when it is launched or attached:
speculative algorithm, tool-call and reasoning parsers, context length, seats, KV tokens.

The boot log says what the server computed at boot; this says what it runs now, and it is all an
attached server without a boot log can tell. The gates use it to skip what cannot apply before
measuring anything (acceptance on a server without speculative decoding) and to say what the
server runs beside their numbers (the tool parser); the report prints it.

Sources (the engines' released code):
- SGLang 0.5.23 `/server_info` (`srt/entrypoints/http_server.py`): the ServerArgs fields
  `speculative_algorithm` (null: autoregressive), `speculative_num_draft_tokens`,
  `tool_call_parser`, `reasoning_parser`, `decode_log_interval`, `max_total_num_tokens`, and per
  DP rank `internal_states[].effective_max_running_requests_per_dp`
  (`srt/managers/scheduler_components/internal_state.py`: the scheduler's effective
  max_running_requests, after every cap); `/v1/models` `max_model_len` is the context length.
- vLLM 0.32: `/v1/models` `max_model_len`; with `VLLM_SERVER_DEV_MODE=1`, `/server_info?config_format=json`
  (`vllm/entrypoints/serve/dev/server_info/api_router.py`) has `vllm_config.speculative_config`
  (null: no speculation), `scheduler_config.max_num_seqs` and, since 0.32,
  `scheduler_config.max_num_active_seqs` (vllm/config/scheduler.py: the requests the scheduler
  admits into RUNNING, null: max_num_seqs; 0.33 lowers it at boot for DFlash/DSpark),
  `model_config.max_model_len`. vLLM tells no parser names over HTTP: those stay "not told".

`seats_told` says which field gave `max_running_requests`, in the engine's words, for the boot
facts completed by the server's word (gates/boot/told.py).

A field is *told* when the endpoint has the key, even when its value is null: `told` maps each told
field to the endpoint that said it. "Not told" (an older build, a proxy, vLLM without dev mode)
never counts as "no": a gate only skips on what the server said.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import httpx

from pytest_glmf.engine.client import Client

SGLANG_KEYS = {"speculative_algorithm": "speculative_algorithm",
               "speculative_num_draft_tokens": "speculative_num_draft_tokens",
               "tool_call_parser": "tool_call_parser", "reasoning_parser": "reasoning_parser",
               "decode_log_interval": "decode_log_interval", "max_total_tokens": "max_total_num_tokens"}


@dataclass(frozen=True)
class ServerConfig:
    engine: str | None = None
    speculative_algorithm: str | None = None
    speculative_num_draft_tokens: int | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    context_length: int | None = None
    max_running_requests: int | None = None     # effective seats, as the scheduler runs them
    max_total_tokens: int | None = None         # KV pool tokens
    decode_log_interval: int | None = None      # SGLang refreshes its gauges every this many decode steps
    seats_told: str | None = None               # the field that gave max_running_requests
    told: dict[str, str] = field(default_factory=dict)

    def says(self, name: str) -> bool:
        return name in self.told

    @property
    def speculates(self) -> bool | None:
        """True/False as the server says; None when it does not say."""
        return None if not self.says("speculative_algorithm") else self.speculative_algorithm is not None

    def why_no_speculation(self) -> str | None:
        """The server's own words when it says it runs no speculative decoding, else None."""
        if self.speculates is not False:
            return None
        return f"{self.told['speculative_algorithm']} says speculative_algorithm: null"

    def summary(self) -> str:
        """One line for reports: what was told, in the engine's own field names."""
        parts = []
        for name in ("speculative_algorithm", "tool_call_parser", "reasoning_parser", "context_length",
                     "max_running_requests", "max_total_tokens"):
            if self.says(name):
                value = getattr(self, name)
                parts.append(f"{name} {'null' if value is None else value}")
        sources = sorted(set(self.told.values()))
        return (", ".join(parts) + f" ({', '.join(sources)})") if parts else "not told"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ServerConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in names})


def _get(client: Client, path: str) -> Any:
    try:
        return client.get_json(path)
    except (httpx.HTTPError, ValueError):
        return None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def read_server_config(client: Client, engine: str | None) -> ServerConfig:
    """Ask the server; never raises (a server that tells nothing gives an empty config)."""
    values: dict[str, Any] = {"engine": engine}
    told: dict[str, str] = {}
    models = _get(client, "/v1/models")
    try:
        max_len = (models.get("data") or [{}])[0].get("max_model_len")
    except (AttributeError, IndexError, TypeError):
        max_len = None
    if _int(max_len):
        values["context_length"], told["context_length"] = int(max_len), "/v1/models"
    if engine == "sglang":
        info = _get(client, "/server_info")
        if isinstance(info, dict) and "vllm_config" not in info:
            for name, key in SGLANG_KEYS.items():
                if key in info:
                    value = info[key]
                    values[name] = value if name in ("speculative_algorithm", "tool_call_parser",
                                                     "reasoning_parser") else _int(value)
                    told[name] = "/server_info"
            states = info.get("internal_states")
            seats = [_int(s.get("effective_max_running_requests_per_dp")) for s in states or []
                     if isinstance(s, dict)]
            if seats and all(s is not None for s in seats):
                values["max_running_requests"] = sum(seats)
                told["max_running_requests"] = "/server_info"
                values["seats_told"] = "internal_states[].effective_max_running_requests_per_dp"
    elif engine == "vllm":
        info = _get(client, "/server_info?config_format=json")
        cfg = info.get("vllm_config") if isinstance(info, dict) else None
        if isinstance(cfg, dict):
            told["speculative_algorithm"] = told["speculative_num_draft_tokens"] = "/server_info"
            spec = cfg.get("speculative_config")
            if isinstance(spec, dict):
                values["speculative_algorithm"] = spec.get("method")
                values["speculative_num_draft_tokens"] = _int(spec.get("num_speculative_tokens"))
            scheduler = cfg.get("scheduler_config") or {}
            seqs, active = _int(scheduler.get("max_num_seqs")), _int(scheduler.get("max_num_active_seqs"))
            if active and (not seqs or active < seqs):   # the admission cap, when lower than the runner's slots
                values["max_running_requests"], told["max_running_requests"] = active, "/server_info"
                values["seats_told"] = "scheduler_config.max_num_active_seqs"
            elif seqs:
                values["max_running_requests"], told["max_running_requests"] = seqs, "/server_info"
                values["seats_told"] = "scheduler_config.max_num_seqs"
    return ServerConfig(**values, told=told)
