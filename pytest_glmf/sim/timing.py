"""The timing model at time scale 1.0 (the recipe's GB300), and speculative acceptance per class.

Decode step (autoregressive): a table from the recipe's batch-lane curve (per-user tok/s ->
seconds per step), linear in the running batch between its points and beyond 128:

    running   1     8     16    32    48    96    128
    tok/s     142   90    72    55    50    39    34      step = 1 / tok_s - pause / 383

The recipe's column is what its streams measured: (384 - 1) tokens over first to last token of a
stream in a burst of 2,400-token prompts, and a stream whose prompt finished in an early prefill
chunk waits for the rest of the burst's prefill before its second token (decode waits for the
forward). So the step is shorter than 1 / tok_s by the median stream's wait spread over its 383
tokens, and the median stream of that workload measures the recipe's number (48 users: a 0.21 s
wait, a 51.4 tok/s step rate, 50.0 measured). One user waits for nothing: 142 as measured.

Decode step (speculative, e.g. DFlash2): each request of prompt class c verifies one block per
step and emits 1 + Binomial(draft_tokens, accept_rate_c) tokens; its batch-1 step time is
(1 + draft_tokens * accept_rate_c) / tok_s_c from the recipe's block-7 table, times
(1 + 0.15 * (block - 7)) for other block sizes; the batch step is the mean over running requests
times the growth of the recipe's DFlash2 per-user curve (1: 252, 8: 106, 16: 86, 24: 72 tok/s), less
the burst's prefill wait as for the autoregressive table (the round-2 column is what the median
stream of a burst of briefings measured).

That curve is two workloads: its 1-user point is the daily config's single stream (the recipe
method, a history essay), its 8-24-user points the round-2 table's 120-slot column, measured on the
curve's workload (a 2,400-token briefing and a 400-word synthesis, 384 tokens out: its AR column,
668 · 90/user and 1,075 · 72/user, is the "128 users" table's). So the class the briefing falls in
must run the curve as it is, 252 tok/s at batch 1: the synthesis class has the essay's acceptance
and speed. That is the recipe's round-2 numbers read back, not a measurement: the recipe never ran
the briefing on DFlash2 single-stream. Its document words (the briefing "describes", its task says
"plain prose") would make it prose, whose 175 tok/s through the same curve gives 74 / 60 / 50 per
user at 8 / 16 / 24 users, below AR's 90 / 72 (62 at 24 users, between the table's 16 and 32), where
the recipe measured DFlash2 ahead at every concurrency it had slots for (106 / 86 / 72 per user: 1.18x,
1.19x, 1.16x over the simulator's AR; on aggregate at 24 users 1,482 against ~1,350).

    class            accept  tok/s (block 7, batch 1)   keywords at a word start (last user turn, first match wins)
    multi_turn_chat  0.30    205    two or more user turns
    synthesis        0.33    252    synthesis, briefing (round 2's workload; matched before the classes below)
    json_extraction  0.40    262    json
    math             0.61    291    solve, step by step, equation, compute, calculate
    code             0.41    253    python, typescript, javascript, function, implement, code, class, def
    shell_ops        0.39    254    shell, bash, command(s), one-liner, systemd, filesystem, mount
    prose            0.29    175    story, prose, poem, literary, personal essay, describe
    history_essay    0.33    252    history, historical, essay; and any prompt matching nothing
The mean acceptance over the recipe's seven classes (all but synthesis) is 0.39, as it found.

Prefill: one forward admits every waiting request that fits the free seats and the KV pool
(kvcache.py); it takes 0.17 s + c * (work / 1000) ** 0.757 (fitted to the recipe's TTFT p95 for
a 2,400-token briefing at 1-128 users: 0.18 s at 1 user, 0.76 s at 48, 1.41 s at 128). The work
of a request is its computed tokens plus attention over its context: e new tokens after p
cached ones cost e + (e * p + e**2 / 2) / ATTN_TOKENS token-equivalents, so one long prompt
costs more than many short ones of the same total (GLM-5's DSA indexer scores every earlier
token, O(L^2) per layer; its sparse attention then reads at most 2,048 of them, which the linear
term covers). ATTN_TOKENS = 131,072 is an assumption, not a recipe figure: +0.9 % per token at
2,400 tokens, +22 % at 56K, +50 % at 128K (a lone 56K prompt: ~0.57 s). c = 0.01625 s divided by
the 2,400-token term's factor, so the recipe's rows (every prompt ~2,400 tokens) keep their fit
exactly. Decode does not slow with context: the recipe's middle config gives 32 users with 56K
tokens each 55 tok/s, the 32-user speed of the 2,400-token curve. The forward
runs in chunks of --chunked-prefill-size tokens (8192): chunk k ends at prefill_s(k x 8192), and a
request's first token comes out of the chunk that finishes its prompt, so inside a burst TTFT
spreads from the first chunk to the last (2,400-token briefings, p50 / p95: 16 users 0.35 / 0.43 s,
48 users 0.56 / 0.76 s, 128 users 0.93 / 1.37 s; the recipe: 0.37 / 0.52, 0.69 / 0.76, 0.98 / 1.41). A prefill that brings the running batch into a batch-size bucket
(the cuda-graph capture sizes, then multiples of 32) not seen before pays the autotune delay
(12.6 s: the recipe's 13 s first token at C16); bucket 1 is warmed at boot, like SGLang's warmup
request.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

AR_TABLE = [(1, 142.0), (8, 90.0), (16, 72.0), (32, 55.0), (48, 50.0), (96, 39.0), (128, 34.0)]
SPEC_PER_USER = [(1, 252.0), (8, 106.0), (16, 86.0), (24, 72.0)]
PREFILL_FIXED_S = 0.17
PREFILL_EXP = 0.757
ATTN_TOKENS = 131072
RECIPE_PROMPT_TOKENS = 2400
PREFILL_COEF_S = 0.01625 / (1 + RECIPE_PROMPT_TOKENS / 2 / ATTN_TOKENS) ** PREFILL_EXP
BLOCK_STEP_GROWTH = 0.15


@dataclass(frozen=True)
class PromptClass:
    name: str
    accept_rate: float
    tok_s: float                      # batch 1, DFlash2 block 7
    keywords: tuple[str, ...]


HISTORY_ESSAY = PromptClass("history_essay", 0.33, 252.0, ("history", "historical", "essay"))
# round 2's workload (module docstring): the class its DFlash2 curve was measured on, so the essay's numbers
SYNTHESIS = PromptClass("synthesis", HISTORY_ESSAY.accept_rate, HISTORY_ESSAY.tok_s, ("synthesis", "briefing"))
CLASSES = [
    SYNTHESIS,
    PromptClass("json_extraction", 0.40, 262.0, ("json",)),
    PromptClass("math", 0.61, 291.0, ("solve", "step by step", "step-by-step", "equation", "compute", "calculate")),
    PromptClass("code", 0.41, 253.0, ("python", "typescript", "javascript", "function", "implement", "code",
                                      "class ", "def ", "```")),
    PromptClass("shell_ops", 0.39, 254.0, ("shell", "bash", "command", "one-liner", "systemd", "filesystem", "mount")),
    PromptClass("prose", 0.29, 175.0, ("story", "prose", "poem", "literary", "personal essay", "describe")),
    HISTORY_ESSAY,
]
# keywords match at a word start ("story" is not in "history"; "command" is in "commands")
_KEYWORD_RE = {c.name: re.compile("|".join(r"(?<![a-z])" + re.escape(k) for k in c.keywords)) for c in CLASSES}
MULTI_TURN = PromptClass("multi_turn_chat", 0.30, 205.0, ())
DEFAULT_CLASS = CLASSES[-1]
BY_NAME = {c.name: c for c in CLASSES + [MULTI_TURN]}


@lru_cache(maxsize=1024)
def classify(last_user_text: str, user_turns: int = 1) -> PromptClass:
    if user_turns >= 2:
        return MULTI_TURN
    low = last_user_text.lower()
    for c in CLASSES:
        if _KEYWORD_RE[c.name].search(low):
            return c
    return DEFAULT_CLASS


def _interp(table: list[tuple[int, float]], n: float) -> float:
    """Linear interpolation of `value` over `n`, extrapolating from the last two points."""
    xs = [x for x, _ in table]
    if n <= xs[0]:
        return table[0][1]
    i = bisect.bisect_left(xs, n)
    if i >= len(xs):
        i = len(xs) - 1
    (x0, y0), (x1, y1) = table[i - 1], table[i]
    return y0 + (y1 - y0) * (n - x0) / (x1 - x0)


RECIPE_OUT_TOKENS = 384
CHUNK_TOKENS = 8192          # SGLang's default --chunked-prefill-size, which the recipe ran with


def burst_pause_median_s(users: int, prompt_tokens: int = RECIPE_PROMPT_TOKENS, chunk: int = CHUNK_TOKENS) -> float:
    """The median stream's wait between its first and second token when `users` prompts arrive
    at once: its first token comes when the chunk that finishes its prompt ends, its next one
    after the whole forward (scheduler.Scheduler._prefill)."""
    work = prefill_work(prompt_tokens)
    total = users * prompt_tokens
    ends = [min(total, -(-(i + 1) * prompt_tokens // chunk) * chunk) for i in range(users)]
    pauses = sorted(prefill_s(total * work / prompt_tokens) - prefill_s(e * work / prompt_tokens) for e in ends)
    return pauses[len(pauses) // 2]


@lru_cache(maxsize=1)
def _ar_step_table() -> list[tuple[int, float]]:
    return [(n, 1.0 / tok_s - burst_pause_median_s(n) / (RECIPE_OUT_TOKENS - 1)) for n, tok_s in AR_TABLE]


@lru_cache(maxsize=1)
def _spec_growth_table() -> list[tuple[int, float]]:
    # per-token time at n over batch 1's, the burst's wait taken out as in _ar_step_table
    return [(n, SPEC_PER_USER[0][1] * (1.0 / tok_s - burst_pause_median_s(n) / (RECIPE_OUT_TOKENS - 1)))
            for n, tok_s in SPEC_PER_USER]


def ar_step_s(running: int) -> float:
    return _interp(_ar_step_table(), max(1, running))


def spec_growth(running: int) -> float:
    return _interp(_spec_growth_table(), max(1, running))


def spec_base_step_s(cls: PromptClass, draft_tokens: int, block_size: int | None) -> float:
    """Batch-1 step time of one request of this class."""
    step = (1.0 + 6 * cls.accept_rate) / cls.tok_s   # the table was measured at block 7 (6 drafts)
    if block_size is not None:
        step *= 1.0 + BLOCK_STEP_GROWTH * (block_size - 7)
    elif draft_tokens != 6:
        step *= 1.0 + BLOCK_STEP_GROWTH * (draft_tokens - 6)
    return step


def prefill_work(new_tokens: int, cached_tokens: int = 0) -> float:
    """Token-equivalents of computing `new_tokens` after `cached_tokens` of context."""
    e, p = max(0, new_tokens), max(0, cached_tokens)
    return e + (e * p + e * e / 2) / ATTN_TOKENS


def prefill_s(work: float) -> float:
    """One forward's time for `work` token-equivalents (prefill_work summed over its requests)."""
    return PREFILL_FIXED_S + PREFILL_COEF_S * (max(0.0, work) / 1000.0) ** PREFILL_EXP


def shape_bucket(running: int, capture_bs: list[int]) -> int:
    """The batch shape a running batch of this size executes as (kernels are tuned per shape)."""
    for bs in capture_bs:
        if bs >= running:
            return bs
    return -(-running // 32) * 32
