"""The served surface: what the engine under test exposes, recorded per run so an image upgrade
shows what changed in the engine ("gating image upgrades" starts with "what changed").

Recorded in the result file's provenance as `served_surface`, in two steps:
- at launch (no generation: readiness and identity never generate): engine and version, which
  introspection endpoints answer, the flags the engine's parser accepts (from preflight), the
  metric names on /metrics, the tool-call parser, the keys of /model_info and /server_info;
- at the end of the session, after every gate ran, one 4-token generation: the `/generate`
  meta_info keys (SGLang) or the completion's keys (vLLM) and the log-prob layout (where the null
  entry is, what an entry looks like).

`surface_changes(now, baseline)` lists the differences, one line each; the report prints them
after the headline (a change is a fact to read, not a failure: a gate that depends on a field
fails on its own).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.engine.introspect import engine_version, metrics, models_owner, served_model

# GET endpoints without side effects (SGLang 0.5.23 http_server.py, vLLM's API server); the
# deprecated /get_* names are never probed (each call logs a warning on SGLang)
ENDPOINTS = ("/health", "/v1/models", "/model_info", "/server_info", "/version", "/metrics")
PROMPT_IDS = [1, 2, 3, 4, 5, 6]   # any vocabulary has these ids

if TYPE_CHECKING:
    from pytest_glmf.launch.base import Server


def _client(server: "Server", read_s: float = 30.0) -> Client:
    return Client(server.base_url, Timeouts(connect_s=3.0, first_token_s=read_s, between_tokens_s=read_s))


def record_at_launch(server: "Server", flags_accepted: list[str] | None) -> None:
    """Put the launch part into `server.provenance["served_surface"]`; never raises."""
    argv = [str(a) for a in server.provenance.get("argv") or []]
    try:
        with _client(server) as client:
            server.provenance["served_surface"] = launch_surface(client, server.engine, flags_accepted, argv)
    except (httpx.HTTPError, ValueError) as exc:
        server.provenance["served_surface"] = {"not_probed": f"{type(exc).__name__}: {str(exc)[:200]}"}


def record_at_end(server: "Server") -> None:
    """Add the generation part (after every gate ran); never raises."""

    surface = server.provenance.setdefault("served_surface", {})
    # only a server that said which engine and version it is (SGLang /server_info, vLLM /version):
    # a test double answering a few routes is not asked to generate one more time
    if "generation" in surface or not surface.get("version") or not server.is_alive():
        return
    # bounded: a server a fault left stalled must not hold the session's end (recorded as not probed)
    with _client(server, read_s=5.0) as client:
        surface["generation"] = generation_surface(client, server.engine, served_model(client))


def _status(client: Client, path: str) -> int | None:
    try:
        return client._http.get(path).status_code
    except httpx.HTTPError:
        return None


def _keys(client: Client, path: str) -> list[str] | None:
    try:
        body = client.get_json(path)
    except (httpx.HTTPError, ValueError):
        return None
    return sorted(body) if isinstance(body, dict) else None


def launch_surface(client: Client, engine: str, flags_accepted: list[str] | None, argv: list[str]) -> dict[str, Any]:
    version, source = engine_version(client)
    model_info = _keys(client, "/model_info") or []
    parser = None
    if "tool_call_parser" in model_info:
        parser = client.get_json("/model_info").get("tool_call_parser")
    elif "--tool-call-parser" in argv[:-1]:
        parser = argv[argv.index("--tool-call-parser") + 1]
    names = metrics(client)
    return {"engine": engine, "owned_by": models_owner(client), "version": version, "version_source": source,
            "endpoints": {p: _status(client, p) for p in ENDPOINTS},
            "flags_accepted": sorted(flags_accepted) if flags_accepted else None,
            "metric_names": sorted(names) if names is not None else None,
            "tool_call_parser": parser, "model_info_keys": model_info or None,
            "server_info_keys": _keys(client, "/server_info") if engine == "sglang" else None}


def _entry_shape(entry: Any) -> str:
    if isinstance(entry, list):
        return "[" + ", ".join("null" if x is None else type(x).__name__ for x in entry) + "]"
    if isinstance(entry, dict):
        if entry and all(str(k).lstrip("-").isdigit() for k in entry):   # vLLM: keyed by token id
            return "{<token id>: " + _entry_shape(next(iter(entry.values()))) + "}"
        return "{" + ", ".join(sorted(entry)) + "}"
    return "null" if entry is None else type(entry).__name__


def generation_surface(client: Client, engine: str, model: str | None = None) -> dict[str, Any]:
    """One short generation with log-probs: its keys and the log-prob layout (None entries: not told)."""
    try:
        if engine == "sglang":
            r = client.post_json("/generate", {"input_ids": PROMPT_IDS, "sampling_params": {
                "max_new_tokens": 4, "temperature": 0}, "return_logprob": True, "logprob_start_len": 2,
                "top_logprobs_num": 1})
            meta = r.get("meta_info") or {}
            inp = meta.get("input_token_logprobs") or []
            return {"meta_info_keys": sorted(meta),
                    "logprobs": {"request": "/generate return_logprob, logprob_start_len 2",
                                 "entry": _entry_shape(inp[1] if len(inp) > 1 else None),
                                 "null_at": [i + 2 for i, e in enumerate(inp) if isinstance(e, list) and e[0] is None],
                                 "input_entries": len(inp)}}
        body: dict[str, Any] = {"prompt": PROMPT_IDS, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 1}
        if model:
            body["model"] = model
        r = client.post_json("/v1/completions", body)
        choice = (r.get("choices") or [{}])[0]
        plp = choice.get("prompt_logprobs") or []
        return {"completion_keys": sorted(choice),
                "logprobs": {"request": "/v1/completions prompt_logprobs 1",
                             "entry": _entry_shape(plp[1] if len(plp) > 1 else None),
                             "null_at": [i for i, e in enumerate(plp) if e is None], "input_entries": len(plp)}}
    except (httpx.HTTPError, ValueError) as exc:
        return {"not_probed": f"{type(exc).__name__}: {str(exc)[:200]}"}


def _listing(name: str, before: Any, now: Any) -> str | None:
    if isinstance(before, list) and isinstance(now, list):
        added, gone = sorted(set(now) - set(before)), sorted(set(before) - set(now))
        if not (added or gone):
            return None
        parts = []
        if added:
            parts.append(f"+{len(added)} ({', '.join(added[:6])}{', ...' if len(added) > 6 else ''})")
        if gone:
            parts.append(f"-{len(gone)} ({', '.join(gone[:6])}{', ...' if len(gone) > 6 else ''})")
        return f"{name}: " + " ".join(parts)
    return None if before == now else f"{name}: baseline {before!r}, now {now!r}"


def surface_changes(now: Mapping[str, Any] | None, base: Mapping[str, Any] | None) -> list[str]:
    """One line per difference between two recorded surfaces (fields either side lacks are skipped)."""
    if not now or not base:
        return []
    out = []
    for key in sorted(set(now) & set(base)):
        a, b = base[key], now[key]
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for sub in sorted(set(a) | set(b)):
                line = _listing(f"{key}.{sub}", a.get(sub), b.get(sub))
                if line:
                    out.append(line)
        elif a is not None and b is not None and (line := _listing(key, a, b)):
            out.append(line)
    return out
