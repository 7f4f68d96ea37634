"""Deterministic logits per (checkpoint, context), and the quantization-like perturbations.

Context state: a 64-bit rolling hash of every token so far (splitmix64), the hash at the last
`<|assistant|>` token and the count of tokens since it. Nothing else enters the logits: no seed,
no request, no batch, so greedy generation and teacher-forced scoring of the same ids give exactly
the same log-probabilities, and scoring twice gives a difference of 0.0.

Distribution at a position (FP8 original, the oracle):
  - K = 6 candidate tokens drawn from the word tokens by the hash (frequent words more often);
  - candidate logits z_1 = 0 > z_2 > ... : the top margin `z_1 - z_2` is "confident"
    (CONF_BASE + Exp(CONF_MEAN)) with probability CONF_P, else "uncertain" (Exp(UNC_MEAN)); later
    gaps are Exp(1);
  - every other token shares a flat background: logit BACKGROUND - log(VOCAB_SIZE);
  - end of answer: once an assistant turn is L tokens long, L = 700 + (hash at `<|assistant|>`)
    mod 1400 (`--answer-tokens MIN:MAX`: MIN + hash mod (MAX - MIN)), `<|endoftext|>` becomes the
    top candidate (z = +6). Raw prompts without an assistant turn never end by themselves. With a
    `--reasoning-parser`, the first 60 % of L is the answer's reasoning (openai_api.py).
Quantized checkpoints add Gaussian noise to the candidate logits:
    z'_j = z_j + shared_sigma * S(h, j) + own_sigma * O_checkpoint(h, j)
S is the same draw for both NVFP4 variants (their shared error: flips "to the same wrong token"),
O is each variant's own. Defaults (fitted by Monte Carlo to the recipe's drift table):

    checkpoint  shared  own    flips vs fp8  mean|dlogp|  median  p95     (recipe)
    nvidia      0.518   0.281  ~15.7 %       ~0.136       ~0.023  ~0.62   (15.6 %, 0.136, 0.022, 0.65)
    libertai    0.518   0.362  ~16.3 %       ~0.148       ~0.025  ~0.68   (15.9 %, 0.147, 0.026, 0.69)
    both flip to the same token ~10 % (recipe 10.3 %); nvidia vs libertai differ ~10 % (recipe 15.4 %:
    with this noise model more sharing means less pairwise difference; the fit favours the
    per-checkpoint numbers).

`expected_stats(checkpoint, ...)` computes these numbers for any sigmas by a direct count over
fixed synthetic contexts, so a test (or the drift engineer) can compare the instrument's
measurement with the configured truth.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from pytest_glmf.sim.tokenizer import CONTENT_IDS, EOS_ID, VOCAB_SIZE, special

M64 = (1 << 64) - 1
H0 = 0x243F6A8885A308D3
K = 6
CONF_P = 0.627
CONF_BASE = 3.12
CONF_MEAN = 2.11
UNC_MEAN = 0.324
BACKGROUND = -7.0
EOS_BOOST = 6.0
EOS_MIN_LEN = 700
EOS_SPAN = 1400
# checkpoint -> (shared_sigma, own_sigma)
DEFAULT_SIGMAS = {"fp8": (0.0, 0.0), "nvidia": (0.518, 0.281), "libertai": (0.518, 0.362)}
_SALT = {"shared": 0x5A5A5A5A, "nvidia": 0x11111111, "libertai": 0x22222222, "fp8": 0x33333333}
_ASSISTANT = special("<|assistant|>")
_BG_LOGIT = BACKGROUND - math.log(VOCAB_SIZE)
_N_CONTENT = len(CONTENT_IDS)


def mix(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def unif(x: int) -> float:
    """(0, 1) from a 64-bit hash."""
    return ((mix(x) >> 11) + 0.5) * (1.0 / (1 << 53))


def normal(x: int) -> float:
    u1, u2 = unif(x), unif(x ^ 0xD1B54A32D192ED03)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


class Ctx(NamedTuple):
    h: int
    h_marker: int | None   # hash right after the last <|assistant|>
    n_since: int           # tokens since it


START = Ctx(H0, None, 0)


def extend(ctx: Ctx, tok: int) -> Ctx:
    h = mix(ctx.h ^ (((tok + 1) * 0x9E3779B97F4A7C15) & M64))
    if tok == _ASSISTANT:
        return Ctx(h, h, 0)
    return Ctx(h, ctx.h_marker, ctx.n_since + 1)


def context_of(ids: list[int], ctx: Ctx = START) -> Ctx:
    """extend() over every id, inlined (a 2,400-token prompt costs ~1 ms here instead of ~2.5)."""
    h, marker, n = ctx
    for t in ids:
        x = (h ^ (((t + 1) * 0x9E3779B97F4A7C15) & M64)) + 0x9E3779B97F4A7C15 & M64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
        h = x ^ (x >> 31)
        if t == _ASSISTANT:
            marker, n = h, 0
        else:
            n += 1
    return Ctx(h, marker, n)


@dataclass(frozen=True)
class Dist:
    ids: tuple[int, ...]
    logits: tuple[float, ...]
    lse: float

    def logprob(self, tok: int) -> float:
        for i, t in enumerate(self.ids):
            if t == tok:
                return self.logits[i] - self.lse
        return _BG_LOGIT - self.lse

    def argmax(self) -> int:
        best = max(range(len(self.ids)), key=lambda i: self.logits[i])
        return self.ids[best]

    def top(self, n: int) -> list[tuple[float, int]]:
        """(logprob, token id), best first; n beyond the candidates fills from the background."""
        order = sorted(range(len(self.ids)), key=lambda i: -self.logits[i])
        out = [(self.logits[i] - self.lse, self.ids[i]) for i in order[:n]]
        k = 0
        while len(out) < n:
            tid = CONTENT_IDS[k % _N_CONTENT]
            k += 1
            if tid not in self.ids:
                out.append((_BG_LOGIT - self.lse, tid))
        return out

    def probs(self) -> list[float]:
        return [math.exp(z - self.lse) for z in self.logits]


def oracle_candidates(h: int) -> tuple[list[int], list[float]]:
    ids: list[int] = []
    for j in range(K + 3):
        tid = CONTENT_IDS[int(_N_CONTENT * unif(h + 101 * (j + 1)) ** 2)]
        if tid not in ids:
            ids.append(tid)
        if len(ids) == K:
            break
    if unif(h + 7) < CONF_P:
        margin = CONF_BASE - CONF_MEAN * math.log(unif(h + 11))
    else:
        margin = -UNC_MEAN * math.log(unif(h + 13))
    logits = [0.0, -margin]
    for j in range(2, len(ids)):
        logits.append(logits[-1] + math.log(unif(h + 17 * j)))
    return ids, logits[:len(ids)]


class LogitModel:
    """Logits of one checkpoint. `dist(ctx)` is a pure function of the context."""

    def __init__(self, checkpoint: str, shared_sigma: float | None = None, own_sigma: float | None = None,
                 answer_tokens: tuple[int, int] | None = None):
        d_shared, d_own = DEFAULT_SIGMAS[checkpoint]
        self.eos_min_len, eos_max = answer_tokens or (EOS_MIN_LEN, EOS_MIN_LEN + EOS_SPAN)
        self.eos_span = eos_max - self.eos_min_len
        self.checkpoint = checkpoint
        self.shared_sigma = d_shared if shared_sigma is None else shared_sigma
        self.own_sigma = d_own if own_sigma is None else own_sigma
        self._own_salt = _SALT[checkpoint]

    def params(self) -> dict[str, float | str]:
        return {"checkpoint": self.checkpoint, "shared_sigma": self.shared_sigma, "own_sigma": self.own_sigma}

    def answer_length(self, h_marker: int) -> int:
        """The natural length of the assistant answer that starts at this marker hash: end-of-text
        is the top candidate from this many tokens on (`--answer-tokens MIN:MAX`)."""
        return self.eos_min_len + (h_marker >> 20) % self.eos_span

    def reasoning_length(self, h_marker: int) -> int:
        """Under --reasoning-parser, the first 60 % of the natural answer is its reasoning."""
        return (3 * self.answer_length(h_marker)) // 5

    def dist(self, ctx: Ctx) -> Dist:
        h = ctx.h
        ids, logits = oracle_candidates(h)
        if self.shared_sigma or self.own_sigma:
            for j in range(len(ids)):
                noise = 0.0
                if self.shared_sigma:
                    noise += self.shared_sigma * normal(h ^ (_SALT["shared"] * (j + 1)))
                if self.own_sigma:
                    noise += self.own_sigma * normal(h ^ (self._own_salt * (j + 1)))
                logits[j] += noise
        if ctx.h_marker is not None and ctx.n_since >= self.answer_length(ctx.h_marker):
            ids = [EOS_ID] + ids
            logits = [max(logits) + EOS_BOOST] + logits
        top = max(logits)
        lse = top + math.log(sum(math.exp(z - top) for z in logits) + math.exp(_BG_LOGIT + math.log(VOCAB_SIZE) - top))
        return Dist(tuple(ids), tuple(logits), lse)


def expected_stats(checkpoint: str, shared_sigma: float | None = None, own_sigma: float | None = None,
                   other: "LogitModel | None" = None, n: int = 20000) -> dict[str, float]:
    """Direct count over n fixed synthetic contexts of what the drift instrument should find when
    this checkpoint is scored against the FP8 oracle's greedy tokens: argmax mismatch rate, mean,
    median and p95 |dlogp|; with `other`, the rate at which both flip to the same token and the
    rate at which they disagree with each other."""
    oracle = LogitModel("fp8")
    cand = LogitModel(checkpoint, shared_sigma, own_sigma)
    flips = same = differ = 0
    absd: list[float] = []
    for i in range(n):
        ctx = Ctx(mix(0xC0FFEE + i), None, 0)
        do = oracle.dist(ctx)
        tok = do.argmax()
        dc = cand.dist(ctx)
        a = dc.argmax()
        flips += a != tok
        absd.append(abs(dc.logprob(tok) - do.logprob(tok)))
        if other is not None:
            b = other.dist(ctx).argmax()
            same += (a != tok) and (a == b)
            differ += a != b
    absd.sort()
    out = {"argmax_mismatch": flips / n, "mean_abs_dlogp": sum(absd) / n, "median_abs_dlogp": absd[n // 2],
           "p95_abs_dlogp": absd[int(0.95 * n)]}
    if other is not None:
        out["shared_flip_rate"] = same / n
        out["pair_mismatch"] = differ / n
    return out
