"""The simulator's KV pool: SGLang's admission arithmetic, the prefix cache and retraction.

Pure bookkeeping first (kvcache.KVPool), then the scheduler driving it at a tiny time scale
(no HTTP): distinct prompts that overflow the pool queue, a shared prefix is computed and stored
once, a pool that runs out during decode retracts the newest requests and finishes them later."""
from __future__ import annotations

import asyncio

import pytest

from pytest_glmf.sim import timing
from pytest_glmf.sim.kvcache import INIT_NEW_TOKEN_RATIO, PAGE_TOKENS, KVHold, KVPool, page_keys
from pytest_glmf.sim.logits import START, LogitModel
from pytest_glmf.sim.scheduler import Scheduler, SimRequest


def hold(ids: list[int], max_new: int = 100, ignore_eos: bool = True) -> KVHold:
    return KVHold(keys=page_keys(ids), prompt_tokens=len(ids), max_new_tokens=max_new, ignore_eos=ignore_eos)


def prompt(tag: int, n: int, shared: int = 0) -> list[int]:
    """n token ids; the first `shared` are the same for every tag."""
    return [7] * shared + [1000 + tag * 7919 + i for i in range(n - shared)]


def test_page_keys_chain_the_prefix():
    a, b = prompt(1, 200, shared=130), prompt(2, 200, shared=130)
    ka, kb = page_keys(a), page_keys(b)
    assert len(ka) == 200 // PAGE_TOKENS == 3
    assert ka[:2] == kb[:2] and ka[2] != kb[2]     # two whole shared pages, the third differs


def test_admission_counts_prompt_output_page_and_what_running_requests_may_generate():
    pool = KVPool(10_000)
    a = hold(prompt(1, 3000), max_new=1000)
    assert pool.fits(a, 3000, [])                       # 3000 + 1000 + 64 < 10000
    pool.admit(a, 0, 3000)
    b = hold(prompt(2, 3000), max_new=1000)
    # free 7000 - a's 1000 still to generate = 6000 > 3000 + 1000 + 64
    assert pool.fits(b, 3000, [a])
    pool.admit(b, 0, 3000)
    c = hold(prompt(3, 1000), max_new=1000)
    assert not pool.fits(c, 1000, [a, b])               # 4000 - 2000 reserved < 2064
    pool.insert(a)
    pool.insert(b)
    a.fresh = b.fresh = False
    # ignore_eos keeps the full reservation; without it SGLang reserves new_token_ratio of it
    a.ignore_eos = b.ignore_eos = False
    assert pool.reserved([a, b]) == pytest.approx(2 * 1000 * INIT_NEW_TOKEN_RATIO)
    assert pool.fits(c, 1000, [a, b])                   # 4000 - 1400 > 2064


def test_prefix_cache_shares_pages_and_frees_them_lru():
    pool = KVPool(100_000)
    a = hold(prompt(1, 1000, shared=900))
    pool.admit(a, 0, 1000)
    pool.insert(a)
    assert pool.used == 1000 and pool.private == 1000 % PAGE_TOKENS
    b = hold(prompt(2, 1000, shared=900))
    pages, extend = pool.extend_tokens(b, 1000)
    assert pages == 900 // PAGE_TOKENS and extend == 1000 - pages * PAGE_TOKENS
    pool.admit(b, pages, extend)
    pool.insert(b)
    assert b.cached == pages * PAGE_TOKENS
    assert pool.used == 1000 + extend                   # the shared pages are stored once
    same = hold(prompt(1, 1000, shared=900))
    assert pool.match(same, 1000) == 1000 // PAGE_TOKENS   # whole pages, at most len - 1 tokens
    pool.release(a)
    pool.release(b)
    assert pool.held == 0 and pool.evictable_pages == len(pool.nodes)
    assert pool.free_or_evictable == pool.kv_tokens
    pool.evict(pool.free + 3 * PAGE_TOKENS)
    assert pool.free >= 3 * PAGE_TOKENS
    assert pool.flush() > 0 and pool.used == 0


def test_same_prefix_in_one_chunk_is_computed_twice_then_shared():
    pool = KVPool(100_000)
    a, b = hold(prompt(1, 640, shared=640)), hold(prompt(2, 640, shared=640))
    pool.admit(a, 0, 640)
    pool.admit(b, 0, 640)                               # both matched before either was inserted
    assert pool.used == 1280
    pool.insert(a)
    pool.insert(b)                                      # b's copy is freed, the tree's is shared
    assert pool.used == 640 and len(pool.nodes) == 10


def test_a_finished_turn_leaves_prompt_and_answer_for_the_next_turn_unless_evicted():
    pool = KVPool(4_000)
    turn1 = prompt(1, 1000)
    a = hold(turn1, max_new=300)
    pool.admit(a, 0, 1000)
    pool.insert(a)
    pool.grow(a, 300)
    answer = [50_000 + i for i in range(300)]
    pool.cache_finished(a, turn1 + answer)
    pool.release(a)
    assert len(pool.nodes) == 1300 // PAGE_TOKENS and pool.private == 0 and pool.held == 0
    # the next turn resends prompt + answer + a new user message: every whole page of it is cached
    turn2 = turn1 + answer + [60_000 + i for i in range(200)]
    b = hold(turn2)
    assert pool.match(b, len(turn2)) == 1300 // PAGE_TOKENS
    # another session's long prompt under pressure evicts the idle session's pages (LRU)
    other = hold(prompt(9, 3500))
    pool.admit(other, 0, 3500)
    assert pool.match(b, len(turn2)) < 1300 // PAGE_TOKENS
    assert pool.used <= pool.kv_tokens


def test_an_unfinished_sequence_is_not_cached_as_another_requests():
    pool = KVPool(10_000)
    a = hold(prompt(1, 640))
    pool.admit(a, 0, 640)
    pool.insert(a)
    pool.grow(a, 128)
    pool.cache_finished(a, prompt(2, 768))              # not a's sequence: nothing inserted
    assert len(pool.nodes) == 10 and pool.private == 128


def test_retraction_order_and_ratio_follow_sglang():
    pool = KVPool(10_000)
    hs = [hold(prompt(i, 100 * (i + 1)), max_new=500, ignore_eos=False) for i in range(3)]
    hs[0].generated, hs[1].generated, hs[2].generated = 50, 10, 10
    order = pool.retract_order(hs)
    assert order[-1] == 2 and order[-2] == 1            # fewest generated first, then the longest prompt
    assert pool.ratio_after_retract(hs[:1]) == pytest.approx((50 + 20) / 501)
    for _ in range(10_000):
        pool.decay()
    assert pool.new_token_ratio == pytest.approx(INIT_NEW_TOKEN_RATIO * 0.14)


# -- the scheduler with the pool ------------------------------------------------------------------

def run_requests(requests: list[SimRequest], *, kv_tokens: int, seats: int = 64, radix: bool = True,
                 stagger_s: float = 0.0) -> tuple[Scheduler, list[str]]:
    lines: list[str] = []

    async def within_a_minute() -> Scheduler:
        async with asyncio.timeout(60):
            return await go()

    async def go() -> Scheduler:
        s = Scheduler(seats=seats, kv_tokens=kv_tokens, model=LogitModel("nvidia"), time_scale=0.002,
                      spec_draft_tokens=None, block_size=None, capture_bs=[1, 2, 4, 8, 16], autotune_s=0.0,
                      seed=1, log=lines.append, chunked_prefill_size=8192, radix_cache=radix)
        s.start()
        for r in requests:
            s.submit(r)
            if stagger_s:
                await asyncio.sleep(stagger_s)
        while not all(r.done for r in requests):
            await asyncio.sleep(0.005)
        await s.stop()
        return s

    return asyncio.run(within_a_minute()), lines


def request(ids: list[int], max_new: int, ignore_eos: bool = True) -> SimRequest:
    return SimRequest(rid=str(id(ids)), prompt_ids=ids, max_new_tokens=max_new, ctx=START, ignore_eos=ignore_eos,
                      min_new_tokens=max_new)


def test_distinct_prompts_that_overflow_the_pool_queue():
    """Six 3,000-token prompts with 200 tokens out in a 10,000-token pool: three fit (3,264 each),
    the others wait for them to finish, so their first token comes after the first three's last."""
    reqs = [request(prompt(i, 3000), 200) for i in range(6)]
    sched, lines = run_requests(reqs, kv_tokens=10_000)
    first, rest = reqs[:3], reqs[3:]
    assert max(r.t_done for r in first) <= min(r.t_first for r in rest)
    assert all(len(r.out_ids) == 200 for r in reqs)
    prefills = [ln for ln in lines if ln.startswith("Prefill batch")]
    assert prefills[0].startswith("Prefill batch, #new-seq: 3, #new-token: 9000, #cached-token: 0")
    assert "#queue-req: 3" in prefills[0]
    assert sched.pool.held == 0 and sched.counters.retracted == 0


def test_a_shared_prefix_fits_and_is_computed_once():
    """The same six users sending one 2,944-token briefing (+ a private tail): the briefing pages are
    stored once, everyone runs at once, and the later chunks compute only the tails."""
    reqs = [request(prompt(i, 3000, shared=2944), 200) for i in range(6)]
    sched, lines = run_requests(reqs, kv_tokens=10_000)
    prefills = [ln for ln in lines if ln.startswith("Prefill batch")]
    assert len(prefills) == 1 and "#new-seq: 6" in prefills[0]
    # the first 8192-token chunk computes three whole prompts (matched before any was cached),
    # later ones match the 46 cached pages: 6 x 3,000 - 3 x 2,944 tokens computed
    assert "#new-token: 9168, #cached-token: 8832" in prefills[0]
    assert sched.pool.held == 0


def test_radix_cache_off_computes_every_prompt():
    reqs = [request(prompt(i, 3000, shared=2944), 50) for i in range(2)]
    _, lines = run_requests(reqs, kv_tokens=100_000, radix=False)
    assert "#new-token: 6000, #cached-token: 0" in next(ln for ln in lines if ln.startswith("Prefill batch"))


def test_decode_out_of_pool_retracts_and_resumes():
    """Without ignore_eos SGLang reserves only new_token_ratio (0.7) of what running requests may
    still generate, so it admits more than the pool holds to the end; when decode runs out it
    retracts the newest request, which later finishes after a second prefill of prompt + output."""
    reqs = [request(prompt(i, 1000), 1500, ignore_eos=False) for i in range(3)]
    sched, lines = run_requests(reqs, kv_tokens=6_000, stagger_s=0.01)
    retracts = [ln for ln in lines if ln.startswith("KV cache pool is full. Retract requests.")]
    assert retracts and sched.counters.retracted >= 1
    assert "#retracted_reqs: 1, #new_tokens_gained: " in retracts[0] and "#new_token_ratio: " in retracts[0]
    assert all(len(r.out_ids) == 1500 and r.finish_reason == "length" for r in reqs)
    assert sched.pool.held == 0


def test_long_prompts_cost_more_per_token_than_the_recipe_briefing():
    one_long = timing.prefill_s(timing.prefill_work(57344))
    many_short = timing.prefill_s(sum(timing.prefill_work(2389) for _ in range(24)))   # same 57,336 tokens
    assert one_long > many_short * 1.1
    cached = timing.prefill_work(100, 50_000)
    assert cached > 100 * 1.3                             # new tokens attend to the cached context
