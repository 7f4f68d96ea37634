"""The KV token pool at run time: who holds which tokens, the prefix (radix) cache, and SGLang's
admission and retraction arithmetic. Pure bookkeeping: no clock, no I/O (the scheduler decides
when; this module says whether it fits).

What the released SGLang does (0.5.23 wheel; paths inside the package):
- Admission (`managers/schedule_policy.py` PrefillAdder, `mem_cache/prefill_budget.py`): a
  waiting request is admitted when its uncached prompt tokens + min(max_new_tokens, 4096) + one
  page fit in (free + evictable cached tokens) minus what the running requests may still
  generate: min(max_new - generated, 4096) x ratio, where ratio is 1.0 for ignore_eos requests
  and for requests admitted in this round, else `new_token_ratio`. The waiting queue is served
  in order: the first request that does not fit stops the round (head-of-line, NO_TOKEN).
- `new_token_ratio` starts at SGLANG_INIT_NEW_TOKEN_RATIO 0.7, falls by (0.7 - 0.7 x 0.14) / 600
  per decode step to 0.098, is reset when the server goes idle, and after a retraction becomes
  (tokens generated + 20 x running) / (sum of max_new_tokens + 1) over the requests kept
  (`scheduler_components/new_token_ratio_tracker.py`).
- Decode (`schedule_batch.py` check_decode_mem / retract_decode): when the next step's tokens do
  not fit, requests are retracted, fewest generated tokens first (then longest prompt), until it
  fits, always keeping one; their KV is freed (not cached) and they go back to the end of the
  waiting queue, to be prefilled again with what they had generated. The server logs
  "KV cache pool is full. Retract requests. #retracted_reqs: N, #new_tokens_gained: M, ...".
- The radix cache (on unless --disable-radix-cache): a prompt's prefix already in the tree is
  not computed or stored again (at most len - 1 tokens match: the last one is always computed).
  Matching happens when a request is scheduled, against what earlier forwards inserted, so
  requests that share a prefix and are prefilled in the same chunk both compute it; after the
  chunk the duplicate is freed and the tree's copy shared. Unreferenced cached tokens are
  evictable (least recently used first) and count as free for admission.
The cache here works on whole pages of PAGE_TOKENS (DSA attention pages its KV in 64-token pages;
memory.py aligns the pool to them); the tail of a prompt and generated tokens are private to
their request while it runs. A request that finishes (not aborted, not retracted) leaves its
whole pages of prompt + output in the cache, as SGLang's `cache_finished_req` inserts the full
sequence: an agent's next turn, which resends the conversation, finds its previous prompt (and
the answer, where the chat template renders it as the same tokens) unless it was evicted
meanwhile, and those pages weigh on the pool like any cached prefix.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

PAGE_TOKENS = 64
CLIP_MAX_NEW_TOKENS = 4096           # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
INIT_NEW_TOKEN_RATIO = 0.7           # SGLANG_INIT_NEW_TOKEN_RATIO x schedule_conservativeness 1.0
MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * 0.14     # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600   # ..._DECAY_STEPS
RETRACT_DECODE_STEPS = 20            # SGLANG_RETRACT_DECODE_STEPS


def page_keys(ids: Sequence[int]) -> list[int]:
    """One key per whole page of `ids`, chained (a page's key covers everything before it), so
    equal keys mean equal prefixes."""
    keys, prev = [], 0
    for i in range(0, len(ids) - PAGE_TOKENS + 1, PAGE_TOKENS):
        prev = hash((prev, tuple(ids[i:i + PAGE_TOKENS])))
        keys.append(prev)
    return keys


@dataclass
class KVHold:
    """What one request holds in the pool (kept on the request by the scheduler)."""

    keys: list[int]                    # page keys of its prompt
    prompt_tokens: int
    max_new_tokens: int
    ignore_eos: bool
    nodes: list[int] = field(default_factory=list)    # tree pages it references (a prefix of keys)
    private: int = 0                   # tokens only it holds (uncached prompt part, generated tokens)
    generated: int = 0
    cached: int = 0                    # prompt tokens found in the cache when it was scheduled
    fresh: bool = True                 # admitted in the current forward (reserves its whole output)
    admitted: bool = False


@dataclass
class _Node:
    refs: int
    depth: int
    last_use: int = 0


class KVPool:
    def __init__(self, kv_tokens: int, radix_cache: bool = True):
        self.kv_tokens = kv_tokens
        self.radix_cache = radix_cache
        self.nodes: dict[int, _Node] = {}
        self.private = 0                 # sum of the holds' private tokens
        self.evictable_pages = 0
        self.new_token_ratio = INIT_NEW_TOKEN_RATIO
        self.clock = 0                   # LRU order of released pages
        self.retracted_total = 0
        self.cache_hit_tokens = 0
        self.prompt_tokens_seen = 0

    # -- sizes ------------------------------------------------------------------------------------
    @property
    def used(self) -> int:
        """Tokens held: private tokens plus every cached page (referenced or evictable)."""
        return self.private + len(self.nodes) * PAGE_TOKENS

    @property
    def held(self) -> int:
        """Tokens running requests hold (what SGLang's token usage reports)."""
        return self.used - self.evictable_pages * PAGE_TOKENS

    @property
    def free(self) -> int:
        return self.kv_tokens - self.used

    @property
    def free_or_evictable(self) -> int:
        return self.free + self.evictable_pages * PAGE_TOKENS

    def reserved(self, holds: Sequence[KVHold]) -> float:
        """What the admitted requests may still generate (the admission offset)."""
        total = 0.0
        for h in holds:
            ratio = 1.0 if (h.ignore_eos or h.fresh) else self.new_token_ratio
            total += min(max(h.max_new_tokens - h.generated, 0), CLIP_MAX_NEW_TOKENS) * ratio
        return total

    # -- the prefix cache -----------------------------------------------------------------------
    def match(self, hold: KVHold, tokens: int) -> int:
        """Leading pages of `hold` found in the cache, at most tokens - 1 tokens of them."""
        if not self.radix_cache:
            return 0
        limit = max(0, tokens - 1) // PAGE_TOKENS
        n = 0
        for key in hold.keys[:limit]:
            if key not in self.nodes:
                break
            n += 1
        return n

    def _ref(self, key: int) -> None:
        node = self.nodes[key]
        if node.refs == 0:
            self.evictable_pages -= 1
        node.refs += 1

    def _unref(self, key: int) -> None:
        node = self.nodes.get(key)
        if node is None:
            return
        node.refs -= 1
        if node.refs == 0:
            self.evictable_pages += 1
            self.clock += 1
            node.last_use = self.clock

    def extend_tokens(self, hold: KVHold, tokens: int) -> tuple[int, int]:
        """(cached pages, tokens to compute) if `hold` with `tokens` to prefill were scheduled now."""
        pages = self.match(hold, tokens)
        return pages, tokens - pages * PAGE_TOKENS

    def fits(self, hold: KVHold, extend: int, others: Sequence[KVHold]) -> bool:
        """SGLang's admission test for one request against the requests already admitted."""
        need = extend + min(hold.max_new_tokens - hold.generated, CLIP_MAX_NEW_TOKENS) + PAGE_TOKENS
        return need < self.free_or_evictable - self.reserved(others)

    def admit(self, hold: KVHold, pages: int, extend: int) -> None:
        """Reference the cached pages and allocate the tokens to compute (evicting as needed)."""
        for key in hold.keys[:pages]:
            self._ref(key)
        hold.nodes = list(hold.keys[:pages])
        hold.cached = pages * PAGE_TOKENS
        self.cache_hit_tokens += hold.cached
        self.prompt_tokens_seen += hold.cached + extend
        self.evict(extend)
        hold.private += extend
        self.private += extend
        hold.admitted, hold.fresh = True, True

    def insert(self, hold: KVHold) -> None:
        """After its prompt is computed: its whole prompt pages join the cache. A page someone
        inserted meanwhile (same prefix, same chunk) is shared and this request's copy freed."""
        if not self.radix_cache or not hold.admitted:
            return
        start = len(hold.nodes)
        for depth, key in enumerate(hold.keys[start:], start):
            if key in self.nodes:
                self._ref(key)
            else:
                self.nodes[key] = _Node(refs=1, depth=depth)
            hold.nodes.append(key)
            hold.private -= PAGE_TOKENS
            self.private -= PAGE_TOKENS

    def cache_finished(self, hold: KVHold, ids: Sequence[int]) -> None:
        """A request finished: the whole pages of `ids` (its prompt and output) beyond those it
        already references join the cache, its own private tokens becoming the tree's copy (a page
        already there is shared and this copy freed). Call before release()."""
        if not self.radix_cache or not hold.admitted:
            return
        keys = page_keys(ids)
        if keys[:len(hold.nodes)] != hold.nodes:
            return   # not this request's sequence
        for depth in range(len(hold.nodes), len(keys)):
            if hold.private < PAGE_TOKENS:
                break
            key = keys[depth]
            if key in self.nodes:
                self._ref(key)
            else:
                self.nodes[key] = _Node(refs=1, depth=depth)
            hold.nodes.append(key)
            hold.private -= PAGE_TOKENS
            self.private -= PAGE_TOKENS

    def grow(self, hold: KVHold, tokens: int) -> None:
        """Generated tokens: private to the request (the scheduler made room for the step)."""
        if not hold.admitted:
            return
        hold.private += tokens
        hold.generated += tokens
        self.private += tokens

    def release(self, hold: KVHold) -> None:
        """A request finished, was aborted or retracted: its private tokens are freed, its cached
        pages stay in the cache (evictable once nobody references them)."""
        if not hold.admitted:
            return
        for key in hold.nodes:
            self._unref(key)
        self.private -= hold.private
        hold.nodes, hold.private, hold.admitted = [], 0, False

    def evict(self, tokens: int) -> None:
        """Make `tokens` free by dropping unreferenced pages, least recently used (deepest) first."""
        short = tokens - self.free
        if short <= 0 or not self.evictable_pages:
            return
        victims = sorted((k for k, n in self.nodes.items() if n.refs == 0),
                         key=lambda k: (self.nodes[k].last_use, -self.nodes[k].depth))
        for key in victims[:-(-short // PAGE_TOKENS)]:
            del self.nodes[key]
            self.evictable_pages -= 1

    def flush(self) -> int:
        """/flush_cache: drop every unreferenced page; returns the tokens freed."""
        gone = [k for k, n in self.nodes.items() if n.refs == 0]
        for key in gone:
            del self.nodes[key]
        self.evictable_pages = 0
        return len(gone) * PAGE_TOKENS

    # -- decode ---------------------------------------------------------------------------------
    def step_fits(self, tokens: int) -> bool:
        return tokens <= self.free_or_evictable

    def retract_order(self, holds: Sequence[KVHold]) -> list[int]:
        """Indices, the one to retract first last (fewest generated tokens, then longest prompt)."""
        return sorted(range(len(holds)), key=lambda i: (holds[i].generated, -holds[i].prompt_tokens), reverse=True)

    def ratio_after_retract(self, kept: Sequence[KVHold]) -> float:
        decoded = sum(h.generated for h in kept)
        max_new = sum(h.max_new_tokens for h in kept)
        return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(kept)) / (max_new + 1))

    def decay(self) -> None:
        self.new_token_ratio = max(self.new_token_ratio - NEW_TOKEN_RATIO_DECAY, MIN_NEW_TOKEN_RATIO)

    def idle(self) -> None:
        self.new_token_ratio = INIT_NEW_TOKEN_RATIO
