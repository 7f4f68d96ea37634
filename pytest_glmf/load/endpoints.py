"""Where a curve's streams go: one server, a router in front of several, or several replicas (DP
ranks without a router) that the client spreads its streams over itself, and the boot facts of
several replicas read as one lane (seats summed, with the per-replica breakdown).

Stream i goes to endpoint i mod K (round-robin; with one URL, a router's own assignment). The
server-side observations around a run (/metrics counters and gauges) are summed over the endpoints,
and each endpoint's own counter delta is kept so a row shows how the streams were spread. None of
this is in the timed path.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_glmf.config.lanes import server_root
from pytest_glmf.engine.introspect import first_model_id, parse_metrics
from pytest_glmf.load import http as load_http

if TYPE_CHECKING:
    from pytest_glmf.launch.base import Server

GEN_TOKENS = ("sglang:generation_tokens_total", "vllm:generation_tokens_total")
RUNNING = ("sglang:num_running_reqs", "vllm:num_requests_running")
QUEUED = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")
CURVE_METRICS = GEN_TOKENS + RUNNING + QUEUED        # all a curve reads of /metrics (parse only these)


def pick(metrics: Mapping[str, float], names: Sequence[str]) -> float | None:
    return next((metrics[n] for n in names if n in metrics), None)


class Target:
    """One server's base URL: the one-shot calls around a run (metrics, flush, served model)."""

    def __init__(self, base_url: str, api_key: str | None = None):
        self.url = server_root(base_url)
        self.host, self.port, self.https, self.prefix = load_http.split_url(self.url)
        self.api_key = api_key
        self.flush_endpoint: str | None = None

    async def call(self, path: str, method: str = "GET") -> tuple[int, bytes]:
        return await load_http.http_call(self.host, self.port, self.https, self.prefix + path, method,
                                         api_key=self.api_key)

    async def metrics(self, names: Sequence[str] | None = None) -> dict[str, float] | None:
        """/metrics parsed (only `names` when given), None when the server serves none."""
        try:
            status, body = await self.call("/metrics")
            return parse_metrics(body.decode("utf-8", "replace"), names) if status == 200 else None
        except (TimeoutError, OSError, ValueError):   # ValueError: not Prometheus text
            return None

    def metrics_blocking(self, names: Sequence[str], timeout_s: float = 10.0) -> dict[str, float] | None:
        """The same from a thread (runner.MetricsSampler): a blocking call, never on an event loop."""
        try:
            status, body = load_http.http_get_blocking(self.host, self.port, self.https, self.prefix + "/metrics",
                                                       timeout_s, self.api_key)
            return parse_metrics(body.decode("utf-8", "replace"), names) if status == 200 else None
        except (TimeoutError, OSError, ValueError):
            return None

    async def served_model(self) -> str | None:
        """The first model id of /v1/models (vLLM rejects any other name; SGLang accepts any)."""
        try:
            status, body = await self.call("/v1/models")
            return first_model_id(json.loads(body)) if status == 200 else None
        except (TimeoutError, OSError, ValueError):
            return None

    async def flush(self) -> str | None:
        """SGLang /flush_cache; vLLM /reset_prefix_cache (dev mode). Returns the endpoint that worked."""
        for path in ([self.flush_endpoint] if self.flush_endpoint else ["/flush_cache", "/reset_prefix_cache"]):
            try:
                status, _ = await self.call(path, "POST")
            except (TimeoutError, OSError):
                continue
            if status == 200:
                self.flush_endpoint = path
                return path
        return None


class Endpoints:
    """The servers one curve measures as one: `targets[user % K]` serves user's stream."""

    def __init__(self, targets: Sequence[Target]):
        if not targets:
            raise ValueError("a curve needs at least one server URL")
        self.targets = list(targets)

    @classmethod
    def from_urls(cls, urls: str | Sequence[str], api_key: str | None = None) -> "Endpoints":
        return cls([Target(u, api_key) for u in ([urls] if isinstance(urls, str) else urls)])

    def __len__(self) -> int:
        return len(self.targets)

    @property
    def urls(self) -> list[str]:
        return [t.url for t in self.targets]

    def of_user(self, user: int) -> int:
        return user % len(self.targets)

    async def metrics_each(self, names: Sequence[str] | None = None) -> list[dict[str, float] | None]:
        return [await t.metrics(names) for t in self.targets]

    async def flush(self) -> str | None:
        """Flush every endpoint; the path when all of them took it, else None."""
        done = [await t.flush() for t in self.targets]
        return done[0] if all(d is not None for d in done) else None

    async def served_model(self) -> str | None:
        return await self.targets[0].served_model()


def as_endpoints(target: "Target | Endpoints | str | Sequence[str]", api_key: str | None = None) -> Endpoints:
    if isinstance(target, Endpoints):
        return target
    if isinstance(target, Target):
        return Endpoints([target])
    return Endpoints.from_urls(target, api_key)


def summed(each: Sequence[Mapping[str, float] | None]) -> dict[str, float] | None:
    """/metrics of several endpoints as one server's (None when any endpoint gave none)."""
    if not each or any(m is None for m in each):
        return None
    out: dict[str, float] = {}
    for m in each:
        for k, v in m.items():   # type: ignore[union-attr]
            out[k] = out.get(k, 0.0) + v
    return out


# -- boot facts of several replicas ----------------------------------------------------------------

_SUMMED = ("max_running_requests", "requested_max_running_requests", "kv_tokens")


def replica_facts(per_replica: Sequence[Mapping[str, Any] | None], names: Sequence[str],
                  assigned_by: str = "client") -> dict[str, Any]:
    """Boot facts of several replicas as the facts of one lane: seats, requested seats and KV
    tokens summed (None when any replica's log does not say), the first replica's other facts,
    and `replicas`: each replica's name (URL, or boot log behind a router), seats, KV tokens and
    cap reason. `assigned_by` is "client" (streams dealt round-robin by the load generator, so
    each replica's share is known) or "router"."""
    facts = [dict(f or {}) for f in per_replica]
    out: dict[str, Any] = dict(facts[0]) if facts else {}
    for key in _SUMMED:
        values = [f.get(key) for f in facts]
        out[key] = sum(values) if values and all(v is not None for v in values) else None
    reasons = [f"{name}: {f['cap_reason']}" for name, f in zip(names, facts) if f.get("cap_reason")]
    out["cap_reason"] = "; ".join(reasons) or None
    out["replicas"] = [{"name": name, "max_running_requests": f.get("max_running_requests"),
                        "kv_tokens": f.get("kv_tokens"), "cap_reason": f.get("cap_reason"),
                        "engine": f.get("engine")} for name, f in zip(names, facts)]
    out["assigned_by"] = assigned_by
    return out


def server_endpoints(server: "Server") -> tuple[list[str], dict[str, Any]]:
    """(stream URLs, boot facts) of a launched lane: one server's own facts, or its replicas' facts
    read one by one and summed. `decode_log_interval` rides along when the server said it
    (engine/serverconfig.py): SGLang refreshes its running-requests gauge only that often."""
    urls = server.stream_urls
    refresh = {"decode_log_interval": server.config.decode_log_interval}
    if not server.replicas:
        return urls, {**server.boot_facts.to_dict(), **refresh}
    own_urls = len(urls) == len(server.replicas)
    names = [r.base_url if own_urls else str(r.boot_log_path or f"replica {i + 1}")
             for i, r in enumerate(server.replicas)]
    facts = replica_facts([r.boot_facts.to_dict() if r.boot_log_path else None for r in server.replicas], names,
                          assigned_by="client" if own_urls else "router")
    return urls, {**facts, **refresh}
