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
from pytest_glmf.sim.openai_api import chat_prompt_ids
from pytest_glmf.sim.scheduler import ARRIVAL, Scheduler, SimRequest
from pytest_glmf.sim.streaming import run_to_end
from pytest_glmf.sim.tokenizer import decode, encode

# SGLang's /health answers after polling its 1-token generation every second (http_server.py
# health_generate: `await asyncio.sleep(1)` per round, HEALTH_CHECK_TIMEOUT 20 rounds); scaled by --time-scale
HEALTH_POLL_S = 1.0
HEALTH_CHECK_TIMEOUT_S = 20.0
# Before warm-up, _execute_server_warmup sleeps 1 s, then asks /model_info, then generates 8 tokens
WARMUP_SLEEP_S = 1.0
WARMUP_NEW_TOKENS = 8
WARMUP_IDS = [1, 2, 4] + list(range(420, 427)) + [5]   # "The capital city of France is", in spirit

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
        self.up = False           # SGLang's ServerStatus: Starting until the warm-up request has run, then Up
        self._ctx_cache: OrderedDict[tuple[int, ...], Ctx] = OrderedDict()
        self._routes = {
            ("GET", "/health"): self.health_generate, ("GET", "/health_generate"): self.health_generate,
            ("GET", "/ready"): self.ready,
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
            radix_cache=not cfg.server_args.get("disable_radix_cache", False),
            decode_log_interval=cfg.decode_log_interval)
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
                                 f"input messages and {max_new_tokens} tokens for the completion. Please reduce the "
                                 "number of tokens in the input messages or the completion to fit within the limit.")
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
    async def warm_up(self) -> None:
        """SGLang's `_wait_and_warmup` after the port is bound: a 1 s wait, then an 8-token
        generation; the server is Up (and logs its ready line) after it."""
        await asyncio.sleep(WARMUP_SLEEP_S * self.cfg.time_scale)
        r = self.new_request(WARMUP_IDS, WARMUP_NEW_TOKENS, cls=timing.DEFAULT_CLASS, ignore_eos=True)
        assert self.scheduler is not None
        await run_to_end(self.scheduler, [r], _never_disconnects)
        self.up = True

    async def ready(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_text(send, "", 200 if self.up else 503)

    async def health_generate(self, scope: Scope, receive: Receive, send: Send) -> None:
        """/health and /health_generate (one handler in SGLang 0.5.23): 503 while starting, else a
        1-token generation, polled every HEALTH_POLL_S; 200 once any token came out since it began
        (a busy server answers at the first poll), 503 after HEALTH_CHECK_TIMEOUT_S."""
        if not self.up:
            await send_text(send, "", 503)
            return
        if scope["path"].rstrip("/") == "/health_generate":
            self.admit_generation()   # the fault counters count it (faults.py), never plain /health
        s = self.scheduler
        assert s is not None
        ids = [1, 2, 4] + list(range(400, 408)) + [5]
        r = self.new_request(ids, 1, cls=timing.DEFAULT_CLASS)
        tokens_before = s.counters.generation_tokens
        task = asyncio.get_running_loop().create_task(run_to_end(s, [r], receive))
        try:
            for _ in range(int(HEALTH_CHECK_TIMEOUT_S / HEALTH_POLL_S)):
                await asyncio.sleep(HEALTH_POLL_S * self.cfg.time_scale)
                if s.counters.generation_tokens > tokens_before or r.out_ids:
                    await send_text(send, "")
                    return
            await send_text(send, "", 503)
        finally:
            if not task.done():
                task.cancel()
                s.abort(r)

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
        # 0.5.23's memory_usage (scheduler_components/memory_usage.py build_memory_usage): no
        # separate mamba entry; the state pool is part of the KV cache's memory
        memory = {"weight": round(self.plan.weights_gb, 3),
                  "kvcache": round(self.plan.mla_gb + self.plan.indexer_gb + self.plan.state_gb, 3),
                  "startup_available": round(self.cfg.gpu_mem_gib - self.plan.weights_gb, 3),
                  "token_capacity": self.plan.kv_tokens, "token_capacity_swa": None,
                  "graph": {phase: 0.0 for phase in ("decode", "prefill", "draft_decode", "draft_extend",
                                                     "draft_prefill", "target_verify")}}
        state: dict[str, Any] = {"effective_max_running_requests_per_dp": self.plan.seats,
                                 "last_gen_throughput": c.last_gen_tok_s if c else 0.0, "memory_usage": memory}
        if self.cfg.spec is not None:   # internal_state.py _add_speculative: only with speculative decoding
            state["avg_spec_accept_length"] = accept_len
        info.update({
            "max_total_num_tokens": self.plan.kv_tokens, "version": VERSIONS[self.cfg.log_format], "status": "ready",
            "frontend": "python", "startup_time": self.startup_time(),
            "internal_states": [{**dict(boot.server_args(self.cfg)), **state}],
        })
        await send_json(send, info)

    def startup_time(self) -> dict[str, Any]:
        """0.5.23's `startup_time`: seconds per boot phase (the sim's boot is --boot-s, scaled)."""
        boot_s = round(self.cfg.boot_s * self.cfg.time_scale, 3)
        return {"load_weight": boot_s, "kv_cache_allocation": 0.0, "scheduler_e2e": boot_s, "tokenizer_e2e": 0.0,
                "cuda_graph": {phase: 0.0 for phase in ("decode", "prefill", "draft_decode", "draft_extend",
                                                        "draft_prefill", "target_verify")}}

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
        # 0.5.23's label sets: the scheduler's gauges carry its ranks, the tokenizer's counters and
        # histograms whether the request streamed (the sim counts every request as one kind)
        model = self.cfg.served_model_name
        gauge = f'engine_type="unified",model_name="{model}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
        counter = f'engine_type="unified",is_streaming="false",model_name="{model}"'
        used = sum(len(r.prompt_ids) + len(r.out_ids) for r in s.running)
        rows = [
            # refreshed at prefill logs, decode_log_interval decode steps and idle, as in SGLang
            ("sglang:num_running_reqs", "gauge", "The number of running requests.", s.gauge_running, gauge),
            ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", s.gauge_queued, gauge),
            ("sglang:num_used_tokens", "gauge", "The number of used tokens.", used, gauge),
            ("sglang:token_usage", "gauge", "The token usage.", round(used / max(1, self.plan.kv_tokens), 4), gauge),
            ("sglang:gen_throughput", "gauge", "The generation throughput (token/s).", round(c.last_gen_tok_s, 2), gauge),
            ("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.0, gauge),
            # present without speculative decoding too (0.0 then), as in 0.5.23
            ("sglang:spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
             round(1 + c.spec_accepted / c.spec_verify_ct, 4) if c.spec_verify_ct else 0.0, gauge),
            ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", c.prompt_tokens, counter),
            ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", c.generation_tokens,
             counter),
            ("sglang:num_requests_total", "counter", "Number of requests processed.", c.requests, counter),
        ]
        if self.cfg.spec is not None:
            # not in 0.5.23's /metrics (not checked against it: the real stage runs no speculative decoding)
            rows += [
                ("sglang:spec_verify_ct_total", "counter", "Speculative verify steps.", c.spec_verify_ct, counter),
                ("sglang:spec_accepted_tokens_total", "counter", "Accepted draft tokens.", c.spec_accepted, counter),
                ("sglang:spec_draft_tokens_total", "counter", "Proposed draft tokens.", c.spec_drafted, counter),
            ]
        lines = []
        for name, kind, help_text, value, labels in rows:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {float(value)}"]
        name = "sglang:time_to_first_token_seconds"
        lines += [f"# HELP {name} Histogram of time to first token in seconds.", f"# TYPE {name} histogram",
                  f'{name}_bucket{{{counter},le="+Inf"}} {float(c.ttft_count)}',
                  f"{name}_sum{{{counter}}} {c.ttft_sum_s}", f"{name}_count{{{counter}}} {float(c.ttft_count)}"]
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


async def _never_disconnects() -> dict[str, Any]:
    """The `receive` of a request no client sent (the warm-up): it never disconnects."""
    await asyncio.Event().wait()
    return {"type": "http.disconnect"}


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
