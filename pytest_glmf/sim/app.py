"""The ASGI app: routing, introspection endpoints, /metrics, the fault admin, request plumbing.

Generation endpoints live in openai_api.py (/v1/chat/completions, /v1/completions) and
native_api.py (/generate). Admin (simulator only, not part of SGLang): `GET|POST|DELETE
/sim/faults` (see faults.py), `GET /sim/state` (seats, running, queued, tuned shapes, counters),
`POST /sim/reset_autotune` (forget tuned batch shapes, as after a restart).
"""
from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections import OrderedDict
from typing import Any

from pytest_glmf.engine.logformats import V0_5_23, render
from pytest_glmf.sim import boot, native_api, openai_api, timing
from pytest_glmf.sim.args import SimConfig
from pytest_glmf.sim.faults import Faults, is_runaway
from pytest_glmf.sim.http import HTTPError, Receive, Scope, Send, read_json, send_json, send_text
from pytest_glmf.sim.logits import M64, START, Ctx, LogitModel, context_of
from pytest_glmf.sim.memory import DEFAULT_CAPTURE_BS, MemoryPlan
from pytest_glmf.sim.scheduler import ARRIVAL, Scheduler, SimRequest
from pytest_glmf.sim.streaming import run_to_end
from pytest_glmf.sim.tokenizer import decode

# What /server_info says: the SGLang whose formats the simulator speaks (--log-format), marked as ours.
VERSIONS = {"nightly-2026-09": "0.5.22.dev0+nightly20260911-glmf-sim", "0.5.23": "0.5.23-glmf-sim"}


class SimApp:
    def __init__(self, cfg: SimConfig, plan: MemoryPlan, log: boot.BootLog):
        self.cfg, self.plan, self.log = cfg, plan, log
        self.faults: Faults = cfg.faults
        self.model = LogitModel(cfg.checkpoint, cfg.perturb_shared_sigma, cfg.perturb_own_sigma, cfg.answer_tokens)
        self._score_nonce = 0
        self.scheduler: Scheduler | None = None
        self.created = int(time.time())
        self.generation_requests = 0
        self._ctx_cache: OrderedDict[tuple[int, ...], Ctx] = OrderedDict()
        self._routes = {
            ("GET", "/health"): self.health, ("GET", "/health_generate"): self.health_generate,
            ("GET", "/get_server_info"): self.get_server_info, ("GET", "/server_info"): self.server_info,
            ("GET", "/get_model_info"): self.get_model_info, ("GET", "/model_info"): self.model_info,
            ("GET", "/v1/models"): self.models, ("GET", "/metrics"): self.metrics,
            ("POST", "/flush_cache"): self.flush_cache, ("GET", "/flush_cache"): self.flush_cache,
            ("GET", "/sim/faults"): self.faults_get, ("POST", "/sim/faults"): self.faults_post,
            ("DELETE", "/sim/faults"): self.faults_delete, ("GET", "/sim/state"): self.state,
            ("POST", "/sim/reset_autotune"): self.reset_autotune,
            ("POST", "/tokenize"): self.tokenize, ("POST", "/detokenize"): self.detokenize,
        }

    # -- ASGI -----------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        if self.cfg.record_requests and method in ("POST", "PUT"):
            receive = _recording(receive, self.cfg.record_requests, method, path)
        gen = {"/v1/chat/completions": openai_api.chat, "/v1/completions": openai_api.completions,
               "/generate": native_api.generate}.get(path)
        try:
            if gen is not None:
                # the arrival is now, before the body is parsed and tokenized; yielding once lets
                # every request of a burst that uvicorn has already read stamp its arrival before
                # the first of them spends milliseconds in the tokenizer
                ARRIVAL.set((time.perf_counter(), asyncio.get_running_loop().time()))
                await asyncio.sleep(0)
                if method != "POST":
                    raise HTTPError(405, "Method Not Allowed", "MethodNotAllowed")
                await gen(self, scope, receive, send)
                return
            handler = self._routes.get((method, path))
            if handler is None:
                known = any(p == path for _, p in self._routes)
                raise HTTPError(405 if known else 404, "Method Not Allowed" if known else "Not Found", "NotFoundError")
            await handler(scope, receive, send)
        except HTTPError as exc:
            await send_json(send, exc.body(), exc.status)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                self.start_scheduler()
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                if self.scheduler is not None:
                    await self.scheduler.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def start_scheduler(self) -> None:
        cfg = self.cfg
        self.scheduler = Scheduler(
            seats=self.plan.seats, kv_tokens=self.plan.kv_tokens, model=self.model, time_scale=cfg.time_scale,
            spec_draft_tokens=cfg.num_draft_tokens, block_size=cfg.dflash_block_size,
            capture_bs=DEFAULT_CAPTURE_BS, autotune_s=cfg.autotune_s, seed=cfg.seed, log=self.log.tp,
            slow=lambda: self.faults.slow, chunked_prefill_size=cfg.chunked_prefill_size,
            radix_cache=not cfg.server_args.get("disable_radix_cache", False))
        self.scheduler.start()

    # -- request plumbing (used by the generation endpoints) ------------------------------------
    def admit_generation(self) -> None:
        """Faults that act when a generation request arrives: 503s and scheduler crashes."""
        if self.faults.http_503_left > 0:
            self.faults.http_503_left -= 1
            raise HTTPError(503, "The server is overloaded (http-503 fault).", "ServiceUnavailable")
        n = self.generation_requests
        self.generation_requests += 1
        if self.faults.crash_after_requests is not None and n >= self.faults.crash_after_requests:
            self.crash()

    def crash(self) -> None:
        if self.cfg.spec == "DFLASH" and self.cfg.mamba_ssm_dtype != "float32":
            msg = ("RuntimeError: CUDA error: an illegal memory access was encountered "
                   "(dflash verify kernel with a bfloat16 mamba state)")
        elif self.cfg.spec in ("NEXTN", "MTP"):
            msg = "RuntimeError: CUDA error: an illegal memory access was encountered"
        else:
            msg = "RuntimeError: CUDA error: an illegal memory access was encountered (crash fault)"
        boot.print_scheduler_exception(self.log, msg, where="request")
        os._exit(1)

    def next_score_nonce(self) -> int:
        """A number per scoring request: the logprob-noise fault draws afresh for each (faults.py),
        from --seed, the port (two simulators on one machine draw independently) and a counter."""
        self._score_nonce += 1
        return (((self.cfg.seed & 0xFFFF) << 48) + ((self.cfg.port & 0xFFFF) << 32) + self._score_nonce) & M64

    def context(self, prompt_ids: list[int]) -> Ctx:
        key = tuple(prompt_ids)
        ctx = self._ctx_cache.get(key)
        if ctx is None:
            ctx = context_of(prompt_ids, START)
            self._ctx_cache[key] = ctx
            if len(self._ctx_cache) > 256:
                self._ctx_cache.popitem(last=False)
        return ctx

    def check_prompt(self, prompt_ids: list[int], max_new_tokens: int | None) -> int:
        """SGLang's context-length check; returns the effective max_new_tokens."""
        n, ctx_len = len(prompt_ids), self.cfg.context_length
        if n >= ctx_len:
            raise HTTPError(400, f"The input ({n} tokens) is longer than the model's context length ({ctx_len} tokens).")
        if max_new_tokens is None:
            return ctx_len - n
        if max_new_tokens < 0:
            raise HTTPError(400, f"max_new_tokens must be >= 0, got {max_new_tokens}")
        if n + max_new_tokens > ctx_len:
            raise HTTPError(400, f"Requested token count exceeds the model's maximum context length of {ctx_len} "
                                 f"tokens. You requested a total of {n + max_new_tokens} tokens: {n} tokens from the "
                                 f"input messages and {max_new_tokens} tokens for the completion.")
        return max_new_tokens

    def new_request(self, prompt_ids: list[int], max_new_tokens: int, *, cls: timing.PromptClass,
                    temperature: float = 0.0, **kw: Any) -> SimRequest:
        rid = uuid.uuid4().hex
        if max_new_tokens > 0 and is_runaway(prompt_ids, self.cfg.seed, self.faults.runaway):
            kw["ignore_eos"] = True   # faults.py runaway=P: this answer never stops on end-of-text
        seed = kw.pop("sample_seed", None)
        if seed is None:
            seed = hash((self.cfg.seed, rid)) & 0xFFFFFFFF
        return SimRequest(rid=rid, prompt_ids=prompt_ids, max_new_tokens=max_new_tokens, ctx=self.context(prompt_ids),
                          temperature=temperature, cls=cls, sample_seed=seed, **kw)

    # -- introspection --------------------------------------------------------------------------
    async def health(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_text(send, "")

    async def health_generate(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.admit_generation()
        ids = [1, 2, 4] + list(range(400, 408)) + [5]
        r = self.new_request(ids, 1, cls=timing.DEFAULT_CLASS)
        assert self.scheduler is not None
        await run_to_end(self.scheduler, [r], receive)
        await send_text(send, "")

    async def get_server_info(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Deprecated on 0.5.23: answers, and logs a WARNING per call (sglang/srt/entrypoints/http_server.py)."""
        self.log.http(render(V0_5_23, "deprecated_get_server_info"))
        await self.server_info(scope, receive, send)

    async def get_model_info(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.log.http(render(V0_5_23, "deprecated_get_model_info"))
        await self.model_info(scope, receive, send)

    async def server_info(self, scope: Scope, receive: Receive, send: Send) -> None:
        s = self.scheduler
        c = s.counters if s else None
        accept_len = (1 + c.spec_accepted / c.spec_verify_ct) if c and c.spec_verify_ct else None
        info = dict(boot.server_args(self.cfg))
        info.update({
            "max_total_num_tokens": self.plan.kv_tokens, "version": VERSIONS[self.cfg.log_format], "status": "ready",
            "frontend": "python", "startup_time": self.created,
            "internal_states": [{
                "effective_max_running_requests_per_dp": self.plan.seats,
                "avg_spec_accept_length": accept_len,
                "last_gen_throughput": c.last_gen_tok_s if c else 0.0,
                "memory_usage": {"weight": round(self.plan.weights_gb, 2), "kvcache": round(self.plan.mla_gb + self.plan.indexer_gb, 2),
                                 "mamba": round(self.plan.state_gb, 2), "token_capacity": self.plan.kv_tokens},
            }],
        })
        await send_json(send, info)

    async def model_info(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the keys of SGLang 0.5.23's /model_info (sglang/srt/entrypoints/http_server.py `model_info`)
        await send_json(send, {"model_path": self.cfg.model_path, "served_model_name": self.cfg.served_model_name,
                               "tokenizer_path": self.cfg.model_path, "is_generation": True,
                               "preferred_sampling_params": None, "weight_version": "default", "load_format": "auto",
                               "reasoning_parser": self.cfg.reasoning_parser,
                               "tool_call_parser": self.cfg.tool_call_parser, "disaggregation_mode": "null",
                               "has_image_understanding": False, "has_audio_understanding": False,
                               "model_type": boot.MODEL_TYPE, "architectures": [boot.ARCHITECTURE]})

    async def models(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, {"object": "list", "data": [{
            "id": self.cfg.served_model_name, "object": "model", "created": self.created, "owned_by": "sglang",
            "root": self.cfg.served_model_name, "parent": None, "max_model_len": self.cfg.context_length}]})

    async def metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.cfg.enable_metrics:
            raise HTTPError(404, "Not Found (start the server with --enable-metrics)", "NotFoundError")
        s = self.scheduler
        assert s is not None
        c = s.counters
        labels = f'model_name="{self.cfg.served_model_name}",engine_type="unified",tp_rank="0",pp_rank="0"'
        used = sum(len(r.prompt_ids) + len(r.out_ids) for r in s.running)
        rows = [
            ("sglang:num_running_reqs", "gauge", "The number of running requests.", len(s.running)),
            ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", len(s.waiting)),
            ("sglang:num_used_tokens", "gauge", "The number of used tokens.", used),
            ("sglang:token_usage", "gauge", "The token usage.", round(used / max(1, self.plan.kv_tokens), 4)),
            ("sglang:gen_throughput", "gauge", "The generation throughput (token/s).", round(c.last_gen_tok_s, 2)),
            ("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.0),
            ("sglang:max_running_requests", "gauge", "The effective max running requests.", self.plan.seats),
            ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", c.prompt_tokens),
            ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", c.generation_tokens),
            ("sglang:num_requests_total", "counter", "Number of requests processed.", c.requests),
            ("sglang:num_aborted_requests_total", "counter", "Number of requests aborted.", c.aborted),
        ]
        if self.cfg.spec is not None:
            rows += [
                ("sglang:spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
                 round(1 + c.spec_accepted / c.spec_verify_ct, 4) if c.spec_verify_ct else 0.0),
                ("sglang:spec_verify_ct_total", "counter", "Speculative verify steps.", c.spec_verify_ct),
                ("sglang:spec_accepted_tokens_total", "counter", "Accepted draft tokens.", c.spec_accepted),
                ("sglang:spec_draft_tokens_total", "counter", "Proposed draft tokens.", c.spec_drafted),
            ]
        lines = []
        for name, kind, help_text, value in rows:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {float(value)}"]
        name = "sglang:time_to_first_token_seconds"
        lines += [f"# HELP {name} Histogram of time to first token in seconds.", f"# TYPE {name} histogram",
                  f'{name}_bucket{{{labels},le="+Inf"}} {float(c.ttft_count)}',
                  f"{name}_sum{{{labels}}} {c.ttft_sum_s}", f"{name}_count{{{labels}}} {float(c.ttft_count)}"]
        await send_text(send, "\n".join(lines) + "\n", content_type=b"text/plain; version=0.0.4; charset=utf-8")

    async def flush_cache(self, scope: Scope, receive: Receive, send: Send) -> None:
        s = self.scheduler
        if s is not None and (s.running or s.waiting):
            await send_text(send, "Cache not flushed: there are running or waiting requests.", 400)
            return
        if s is not None:
            s.flush_cache()
        self._ctx_cache.clear()
        await send_text(send, "Cache flushed.\nPlease check backend logs for more details. (When there are running "
                              "or waiting requests, the operation will not be performed.)\n")

    async def tokenize(self, scope: Scope, receive: Receive, send: Send) -> None:
        from pytest_glmf.sim.openai_api import chat_prompt_ids
        from pytest_glmf.sim.tokenizer import encode

        body = await read_json(receive)
        if isinstance(body.get("messages"), list):
            ids = chat_prompt_ids(body, self.cfg.tool_call_parser, self.faults.template)
        elif isinstance(body.get("prompt"), str):
            ids = encode(body["prompt"])
        else:
            raise HTTPError(400, "tokenize needs `prompt` (a string) or `messages`")
        await send_json(send, {"tokens": ids, "count": len(ids), "max_model_len": self.cfg.context_length})

    async def detokenize(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_json(receive)
        tokens = body.get("tokens")
        # DetokenizeRequest: a list of ids or a list of lists (sglang/srt/entrypoints/openai/protocol.py)
        if isinstance(tokens, list) and tokens and all(isinstance(t, list) for t in tokens):
            if not all(isinstance(t, int) for ids in tokens for t in ids):
                raise HTTPError(400, "detokenize needs `tokens`: a list of token ids, or a list of such lists")
            await send_json(send, {"text": [decode(ids) for ids in tokens]})
            return
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise HTTPError(400, "detokenize needs `tokens`: a list of token ids, or a list of such lists")
        await send_json(send, {"text": decode(tokens)})   # DetokenizeResponse (sglang/srt/entrypoints/openai/protocol.py)

    # -- admin ----------------------------------------------------------------------------------
    async def faults_get(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, self.faults.to_dict())

    async def faults_post(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_json(receive)
        specs = body.get("faults", [])
        if isinstance(specs, str):
            specs = [specs]
        if body.get("replace"):
            self.faults = self.cfg.faults = Faults()
        try:
            self.faults.apply(list(specs))
        except ValueError as exc:
            raise HTTPError(400, str(exc)) from None
        await send_json(send, self.faults.to_dict())

    async def faults_delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.faults = self.cfg.faults = Faults()
        await send_json(send, self.faults.to_dict())

    async def state(self, scope: Scope, receive: Receive, send: Send) -> None:
        s = self.scheduler
        assert s is not None
        c = s.counters
        await send_json(send, {
            "seats": self.plan.seats, "running": len(s.running), "queued": len(s.waiting),
            "tuned_shapes": sorted(s.tuned_shapes), "time_scale": self.cfg.time_scale, "checkpoint": self.cfg.checkpoint,
            "logits": self.model.params(), "generation_requests": self.generation_requests,
            "counters": {k: getattr(c, k) for k in c.__dataclass_fields__}, "faults": self.faults.to_dict(),
            "kv_tokens": self.plan.kv_tokens, "max_mamba_cache_size": self.plan.slots})

    async def reset_autotune(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.scheduler is not None
        self.scheduler.reset_shapes()
        await send_json(send, {"tuned_shapes": sorted(self.scheduler.tuned_shapes)})


def _recording(receive: Receive, out: str, method: str, path: str) -> Receive:
    """`receive`, also appending the request's body to `out` as one JSON line (--record-requests):
    what clients send, for checking against the engine's own request models."""
    chunks: list[bytes] = []

    async def wrapped() -> dict[str, Any]:
        msg = await receive()
        if msg["type"] == "http.request":
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                raw = b"".join(chunks).decode("utf-8", "replace")
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"method": method, "path": path, "body": raw}) + "\n")
        return msg

    return wrapped
