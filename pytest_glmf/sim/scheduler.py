"""One asyncio loop that admits, prefills and steps every running request (continuous batching).

At most `seats` requests run, and only as many as the KV token pool admits (kvcache.py: SGLang's
admission arithmetic, the prefix cache, retraction when decode runs out of pool); the rest wait
in FIFO order (their TTFT includes the wait). Each iteration is either one prefill forward
(every waiting request that fits the free seats and the pool) or one decode step of the whole
running batch; its duration comes from timing.py times the time scale and the `slow` fault. A
prefill computes only what the prefix cache does not hold, and long prompts cost more per token
(timing.prefill_work). A prefill forward runs in chunks of `chunked_prefill_size` tokens, like
SGLang's chunked prefill: a request gets its first token when the chunk that finishes its prompt
ends, so the first requests of a burst see a shorter TTFT than the last (decode waits for the
whole forward). A request's arrival is when its HTTP request reached the server (`ARRIVAL`, set
by the app before the body is parsed and tokenized), not when the handler got round to
submitting it: on a GPU box the tokenizer runs beside the GPU, here it shares one Python thread.
The loop keeps a virtual clock: when the CPU falls behind (very small time scales, many streams)
it runs several steps before yielding, so tokens arrive in fewer, larger chunks but at the
modelled rate. Handlers wait on a per-request event and drain `pending`: one
chunk per decode step when the machine keeps up.
"""
from __future__ import annotations

import asyncio
import bisect
import contextvars
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_glmf.sim import timing
from pytest_glmf.sim.kvcache import KVHold, KVPool, page_keys
from pytest_glmf.sim.logits import Ctx, LogitModel, extend
from pytest_glmf.sim.tokenizer import EOS_ID

DECODE_LOG_INTERVAL = 40        # ServerArgs.decode_log_interval's default (--decode-log-interval)
MAX_STEPS_WITHOUT_YIELD = 8
# Lag the loop may make up by running steps back to back (a descheduled process on a busy box
# would otherwise report bursts faster than the model); more than this is lost, like a stall.
MAX_LAG_S = 0.100
MAX_BACKDATE_S = 1.0   # an idle server's first forward starts at the first arrival, at most this long ago
GREEDY_CACHE_MAX = 100_000
# (perf_counter, event-loop time) at which the current HTTP request reached the server
ARRIVAL: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar("glmf_sim_arrival", default=None)


@dataclass
class SimRequest:
    rid: str
    prompt_ids: list[int]
    max_new_tokens: int
    ctx: Ctx                                   # logit context after the prompt
    temperature: float = 0.0
    top_p: float = 1.0
    min_new_tokens: int = 0
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()
    forced_ids: list[int] | None = None        # scripted output (tool-call markup), then EOS
    want_logprobs: bool = False
    top_n: int = 0
    cls: timing.PromptClass = timing.DEFAULT_CLASS
    sample_seed: int = 0
    # progress
    out_ids: list[int] = field(default_factory=list)
    out_logprobs: list[float] = field(default_factory=list)
    out_top: list[list[tuple[float, int]]] = field(default_factory=list)
    pending: int = 0                           # out_ids[-pending:] not yet taken by the handler
    finish_reason: str | None = None           # "stop" | "length" | "abort"
    matched_stop: int | None = None
    t_arrival: float = 0.0
    t_arrival_loop: float = 0.0                # event-loop clock, for the scheduler's virtual time
    t_first: float | None = None
    t_done: float | None = None
    spec_verify_ct: int = 0
    spec_accepted: int = 0
    spec_drafted: int = 0
    spec_correct_drafts_histogram: list[int] = field(default_factory=list)   # index j: steps that accepted j drafts
    event: asyncio.Event = field(default_factory=asyncio.Event)
    kv: KVHold | None = None                   # its share of the KV pool (set on submit)
    _rng: random.Random | None = None

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the prefix cache held when it was scheduled."""
        return self.kv.cached if self.kv is not None else 0

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    def take(self) -> list[int]:
        """Token ids produced since the last take."""
        n, self.pending = self.pending, 0
        self.event.clear()
        return self.out_ids[len(self.out_ids) - n:] if n else []


@dataclass
class Counters:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0
    aborted: int = 0
    ttft_sum_s: float = 0.0
    ttft_count: int = 0
    e2e_sum_s: float = 0.0
    spec_verify_ct: int = 0
    spec_accepted: int = 0
    spec_drafted: int = 0
    last_gen_tok_s: float = 0.0
    retracted: int = 0


class Scheduler:
    def __init__(self, *, seats: int, kv_tokens: int, model: LogitModel, time_scale: float,
                 spec_draft_tokens: int | None, block_size: int | None, capture_bs: list[int],
                 autotune_s: float, seed: int, log: Callable[[str], None], slow: Callable[[], float] = lambda: 1.0,
                 chunked_prefill_size: int | None = None, radix_cache: bool = True,
                 decode_log_interval: int = DECODE_LOG_INTERVAL):
        self.seats = seats
        self.decode_log_interval = decode_log_interval
        # the /metrics gauges as SGLang 0.5.23 publishes them (scheduler_components/
        # metrics_reporter.py): set at each prefill log (the requests running before it), every
        # decode_log_interval decode steps (the batch) and when the scheduler goes idle; stale between
        self.gauge_running = 0
        self.gauge_queued = 0
        self.chunk_tokens = chunked_prefill_size if chunked_prefill_size and chunked_prefill_size > 0 else None
        self.kv_tokens = kv_tokens
        self.pool = KVPool(kv_tokens, radix_cache)
        self.model = model
        self.time_scale = time_scale
        self.spec_draft_tokens = spec_draft_tokens
        self.block_size = block_size
        self.capture_bs = capture_bs
        self.autotune_s = autotune_s
        self.tuned_shapes: set[int] = {1}   # SGLang's boot warmup request runs at batch 1
        self.seed = seed
        self.log = log
        self.slow = slow
        self.waiting: list[SimRequest] = []
        self.running: list[SimRequest] = []
        self.counters = Counters()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._greedy: dict[tuple[Ctx, bool], int] = {}
        self._decode_steps = 0
        self._log_tokens = 0
        self._log_t = time.monotonic()
        self._rng = random.Random(seed)

    # -- public -------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def submit(self, r: SimRequest) -> None:
        arrived = ARRIVAL.get()
        if arrived is None:
            arrived = (time.perf_counter(), asyncio.get_running_loop().time())
        r.t_arrival, r.t_arrival_loop = arrived
        self.counters.requests += 1
        self.counters.prompt_tokens += len(r.prompt_ids)
        if r.temperature > 0:
            r._rng = random.Random(r.sample_seed)
        r.kv = KVHold(keys=page_keys(r.prompt_ids) if self.pool.radix_cache else [],
                      prompt_tokens=len(r.prompt_ids), max_new_tokens=r.max_new_tokens, ignore_eos=r.ignore_eos)
        self.waiting.append(r)
        self._wake.set()

    def abort(self, r: SimRequest) -> None:
        if r.done:
            return
        r.finish_reason = "abort"
        r.t_done = time.perf_counter()
        self.counters.aborted += 1
        if r in self.waiting:
            self.waiting.remove(r)
        if r in self.running:
            self.running.remove(r)
        if r.kv is not None:
            self.pool.release(r.kv)
        self._wake.set()

    def flush_cache(self) -> int:
        """/flush_cache (only called with nothing running or waiting): the prefix cache and the
        greedy-token memo are emptied; returns the KV tokens freed."""
        self._greedy.clear()
        return self.pool.flush()

    def reset_shapes(self) -> None:
        self.tuned_shapes = {1}

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        cursor = loop.time()
        steps_since_yield = 0
        while True:
            if not self.running and not self.waiting:
                self.gauge_running = self.gauge_queued = 0
                self.pool.idle()
                self._wake.clear()
                await self._wake.wait()
                # the forward starts when the first request arrived, not when this task got the CPU
                # after the HTTP handlers of a burst of arrivals ran
                now = loop.time()
                cursor = max(now - MAX_BACKDATE_S, min([now] + [r.t_arrival_loop for r in self.waiting]))
                if self.waiting:
                    cursor = await self._prefill(cursor, self.time_scale * self.slow(), self.seats)
                continue
            now = loop.time()
            cursor = max(cursor, now - MAX_LAG_S)   # after a stall, catch up at most this much
            scale = self.time_scale * self.slow()
            free = self.seats - len(self.running)
            if self.waiting and free > 0 and self._head_fits():
                cursor = await self._prefill(cursor, scale, free)
                steps_since_yield = 0
                continue
            # decode step: tokens become visible at the end of the step
            self._make_room()
            batch_now = list(self.running)
            step_s, counts = self._plan_step()
            cursor += step_s * scale
            lag = loop.time() - cursor
            if lag > 0.005 and steps_since_yield < MAX_STEPS_WITHOUT_YIELD:
                steps_since_yield += 1      # behind: catch up before yielding (bigger chunks)
            else:
                steps_since_yield = 0
                await asyncio.sleep(max(0.0, cursor - loop.time()))
            for r, n in zip(batch_now, counts):
                if not r.done:
                    self._emit(r, n)
            self._decode_steps += 1
            if self._decode_steps % self.decode_log_interval == 0:
                self.gauge_running, self.gauge_queued = len(batch_now), len(self.waiting)
                self._log_decode()

    def _head_fits(self) -> bool:
        """Does the first waiting request fit the pool beside what is running? With nothing
        running it is admitted regardless (one request larger than the pool must not stall the
        server; the context-length check keeps prompts below it)."""
        if not self.running:
            return True
        r = self.waiting[0]
        assert r.kv is not None
        _, extend = self.pool.extend_tokens(r.kv, len(r.prompt_ids) + len(r.out_ids))
        return self.pool.fits(r.kv, extend, [x.kv for x in self.running if x.kv is not None])

    async def _prefill(self, start: float, scale: float, free: int) -> float:
        """One prefill forward from `start` (loop clock); returns its end. Requests that arrived
        during the first half of the forward join it (a burst of users sent "at once" reaches the
        server over a few milliseconds and the recipe's TTFT shows one forward for all of them),
        as long as they fit the free seats and the KV pool (first one that does not: the rest
        wait, as in SGLang). The forward's chunk k (of chunk_tokens) ends at start +
        prefill_s(work of its first k * chunk_tokens tokens): the fitted prefill curve is the
        time to the forward's end, chunking only orders first tokens. A request is matched
        against the prefix cache as of the chunk it starts in, so prompts finished in earlier
        chunks of this forward are shared (SGLang schedules each chunk as its own round)."""
        loop = asyncio.get_running_loop()
        batch: list[SimRequest] = []
        ends: list[int] = []        # cumulative computed tokens at the end of each batch member
        works: list[float] = []     # the same in prefill work (timing.prefill_work)
        tokens = 0
        work = 0.0
        cached = 0
        inserted = 0                # batch[:inserted] are in the prefix cache
        shape = 0
        autotune = 0.0
        end = start
        first_done = 0              # batch[:first_done] have their first token

        def work_at(done: int) -> float:
            """Prefill work of the forward's first `done` computed tokens."""
            if done >= tokens:
                return work
            k = bisect.bisect_left(ends, done)
            lo, wlo = (ends[k - 1], works[k - 1]) if k else (0, 0.0)
            return wlo + (works[k] - wlo) * (done - lo) / max(1, ends[k] - lo)

        def chunk_end(i: int) -> float:
            done_at = tokens
            if self.chunk_tokens is not None:
                done_at = min(tokens, -(-ends[i] // self.chunk_tokens) * self.chunk_tokens)
            return start + (timing.prefill_s(work_at(done_at)) + autotune) * scale

        while True:
            while self.waiting and len(batch) < free:
                r = self.waiting[0]
                assert r.kv is not None
                if batch and r.t_arrival_loop > start + 0.5 * (end - start):
                    break
                if self.chunk_tokens is not None:
                    round_start = tokens // self.chunk_tokens * self.chunk_tokens
                    while inserted < len(batch) and ends[inserted] <= round_start:
                        self.pool.insert(batch[inserted].kv)   # type: ignore[arg-type]
                        inserted += 1
                want = len(r.prompt_ids) + len(r.out_ids)     # a retracted request recomputes its output too
                pages, extend = self.pool.extend_tokens(r.kv, want)
                others = [x.kv for x in self.running + batch if x.kv is not None]
                if (batch or self.running) and not self.pool.fits(r.kv, extend, others):
                    break
                del self.waiting[0]
                self.pool.admit(r.kv, pages, extend)
                batch.append(r)
                tokens += extend
                work += timing.prefill_work(extend, want - extend)
                cached += want - extend
                ends.append(tokens)
                works.append(work)
                # the batch shape this forward leaves running; its first hit pays the kernel autotune
                shape = timing.shape_bucket(len(self.running) + len(batch), self.capture_bs)
                autotune = self.autotune_s if shape not in self.tuned_shapes else 0.0
                end = start + (timing.prefill_s(work) + autotune) * scale
            now = loop.time()
            while first_done < len(batch) and chunk_end(first_done) <= now:
                self._first_token(batch[first_done])
                first_done += 1
            if now >= end or not batch:
                break
            due = chunk_end(first_done) if first_done < len(batch) else end
            self._wake.clear()
            try:   # not wait_for: on Python 3.11 it can drop stop()'s cancel, and stop() would wait forever
                async with asyncio.timeout(max(0.0, min(due, end) - now)):
                    await self._wake.wait()
            except TimeoutError:
                pass
        self.tuned_shapes.add(shape)
        for r in batch[inserted:]:
            self.pool.insert(r.kv)   # type: ignore[arg-type]
        for r in batch:
            r.kv.fresh = False   # type: ignore[union-attr]
        self.gauge_running, self.gauge_queued = len(self.running), len(self.waiting)
        self.log(f"Prefill batch, #new-seq: {len(batch)}, #new-token: {tokens}, #cached-token: {cached}, "
                 f"token usage: {self._usage():.2f}, #running-req: {len(self.running)}, #queue-req: {len(self.waiting)}")
        for r in batch[first_done:]:
            self._first_token(r)
        self.running.extend(r for r in batch if r.t_first is not None and not r.done)
        # Decode starts from when the first tokens really went out: if this process woke late (a
        # busy machine), catching that up in decode would squeeze the first decode steps together
        # and make the requests' decode rate faster than the model.
        return max(end, loop.time())

    def _first_token(self, r: SimRequest) -> None:
        """The prefill's token: the first one, or, for a retracted request prefilled again with
        what it had generated, its next one."""
        if r.done:      # aborted while prefilling
            return
        if r.t_first is None:
            r.t_first = time.perf_counter()
            self.counters.ttft_sum_s += r.t_first - r.t_arrival
            self.counters.ttft_count += 1
        self._emit(r, 1)

    def _make_room(self) -> None:
        """Before a decode step: the step's new tokens must fit the pool (evicting cached pages
        first); if they do not, retract requests the way SGLang's retract_decode does."""
        per = 1 + (self.spec_draft_tokens or 0)
        pool = self.pool
        if pool.step_fits(len(self.running) * per):
            pool.evict(len(self.running) * per)
            pool.decay()
            return
        holds = [r.kv for r in self.running]
        order = pool.retract_order(holds)   # type: ignore[arg-type]
        free_before, ratio_before = pool.free, pool.new_token_ratio
        retracted: list[SimRequest] = []
        while len(order) > 1 and (not retracted or not pool.step_fits(len(order) * per)):
            r = self.running[order.pop()]
            pool.release(r.kv)   # type: ignore[arg-type]
            retracted.append(r)
        self.running = [r for r in self.running if r not in retracted]
        pool.new_token_ratio = pool.ratio_after_retract([r.kv for r in self.running])   # type: ignore[misc]
        self.waiting.extend(retracted)          # back to the end of the queue, output kept
        self.counters.retracted += len(retracted)
        pool.evict(len(self.running) * per)
        self.log(f"KV cache pool is full. Retract requests. #retracted_reqs: {len(retracted)}, "
                 f"#new_tokens_gained: {pool.free - free_before}, "
                 f"#new_token_ratio: {ratio_before:.4f} -> {pool.new_token_ratio:.4f}")

    def _plan_step(self) -> tuple[float, list[int]]:
        n = len(self.running)
        if self.spec_draft_tokens is None:
            return timing.ar_step_s(n), [1] * n
        d = self.spec_draft_tokens
        base = sum(timing.spec_base_step_s(r.cls, d, self.block_size) for r in self.running) / max(1, n)
        counts = []
        for r in self.running:
            accepted = sum(1 for _ in range(d) if self._rng.random() < r.cls.accept_rate)
            r.spec_verify_ct += 1
            r.spec_accepted += accepted
            r.spec_drafted += d
            # SGLang 0.5.23's Req.update_spec_correct_drafts_histogram: index = drafts accepted in the step
            r.spec_correct_drafts_histogram.extend([0] * (accepted + 1 - len(r.spec_correct_drafts_histogram)))
            r.spec_correct_drafts_histogram[accepted] += 1
            counts.append(1 + accepted)
        self.counters.spec_verify_ct += n
        self.counters.spec_accepted += sum(counts) - n
        self.counters.spec_drafted += n * d
        return base * timing.spec_growth(n), counts

    def _usage(self) -> float:
        return min(1.0, self.pool.held / max(1, self.kv_tokens))

    def _log_decode(self) -> None:
        now = time.monotonic()
        gen = self.counters.generation_tokens - self._log_tokens
        tok_s = gen / max(1e-9, now - self._log_t)
        self.counters.last_gen_tok_s = tok_s
        self._log_t, self._log_tokens = now, self.counters.generation_tokens
        tokens = self.pool.held
        spec = ""
        if self.spec_draft_tokens is not None and self.counters.spec_verify_ct:
            c = self.counters
            spec = (f"accept len: {1 + c.spec_accepted / c.spec_verify_ct:.2f}, "
                    f"accept rate: {c.spec_accepted / max(1, c.spec_drafted):.2f}, ")
        self.log(f"Decode batch, #running-req: {len(self.running)}, #token: {tokens}, token usage: {self._usage():.2f}, "
                 f"{spec}cuda graph: True, gen throughput (token/s): {tok_s:.2f}, #queue-req: {len(self.waiting)}")

    # -- token generation -----------------------------------------------------------------------
    def _next_token(self, r: SimRequest) -> tuple[int, float | None]:
        k = len(r.out_ids)
        if r.forced_ids is not None:
            tok = r.forced_ids[k] if k < len(r.forced_ids) else EOS_ID
            if not r.want_logprobs:
                return tok, None
            forced = self.model.dist(r.ctx)
            r.out_top.append(forced.top(r.top_n) if r.top_n else [])
            return tok, forced.logprob(tok)
        eos_ok = not (r.ignore_eos or k < r.min_new_tokens)
        if r.temperature <= 0 and not r.want_logprobs:
            hit = self._greedy.get((r.ctx, eos_ok))
            if hit is not None:
                return hit, None
        dist = self.model.dist(r.ctx)
        if not eos_ok:
            ids = [i for i in dist.ids if i != EOS_ID]
            logits = [z for i, z in zip(dist.ids, dist.logits) if i != EOS_ID]
        else:
            ids, logits = list(dist.ids), list(dist.logits)
        if r.temperature <= 0 or r._rng is None:
            tok = ids[max(range(len(ids)), key=lambda i: logits[i])]
        else:
            t = max(r.temperature, 1e-3)
            top = max(logits)
            weights = [math.exp((z - top) / t) for z in logits]
            tok = r._rng.choices(ids, weights=weights)[0]
        if r.temperature <= 0 and len(self._greedy) < GREEDY_CACHE_MAX:
            self._greedy[(r.ctx, eos_ok)] = tok   # identical prompts (a load test's briefing) reuse the work
        if r.want_logprobs:
            r.out_top.append(dist.top(r.top_n) if r.top_n else [])
            return tok, dist.logprob(tok)
        return tok, None

    def _emit(self, r: SimRequest, n: int) -> None:
        """Generate up to n tokens for r; finish it when it stops."""
        if r.max_new_tokens <= 0 and not r.done:
            r.finish_reason = "length"   # scoring only (max_new_tokens 0)
            n = 0
        for _ in range(n):
            if r.done:
                break
            tok, lp = self._next_token(r)
            r.out_ids.append(tok)
            if r.want_logprobs:
                r.out_logprobs.append(lp if lp is not None else 0.0)
            r.ctx = extend(r.ctx, tok)
            r.pending += 1
            if r.kv is not None:
                self.pool.grow(r.kv, 1)
            self.counters.generation_tokens += 1
            k = len(r.out_ids)
            if tok == EOS_ID and not r.ignore_eos and k > r.min_new_tokens:
                r.finish_reason, r.matched_stop = "stop", EOS_ID
            elif tok in r.stop_token_ids and k > r.min_new_tokens:
                r.finish_reason, r.matched_stop = "stop", tok
            elif k >= r.max_new_tokens:
                r.finish_reason = "length"
        if r.done:
            r.t_done = time.perf_counter()
            self.counters.e2e_sum_s += r.t_done - r.t_arrival
            if r in self.running:
                self.running.remove(r)
            if r.kv is not None:
                self.pool.cache_finished(r.kv, r.prompt_ids + r.out_ids)
                self.pool.release(r.kv)
        r.event.set()
