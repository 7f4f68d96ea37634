"""Injectable faults: the failures real servers show, on request.

Set with `--fault SPEC` (repeatable) at start, or at run time with `POST /sim/faults`
(`{"faults": ["http-503=2", ...], "replace": true}`; `GET /sim/faults` shows the active set,
`DELETE /sim/faults` clears it). Forms:

  boot-oom                 boot fails after "Load weight end" with SGLang's not-enough-memory
                           traceback and exit code 1 (like sglang#4895)
  boot-hang                boot stops after the weight load line and never gets ready
  crash-first-request      the scheduler crashes on the first generation request: the request's
                           connection drops, a `Scheduler hit an exception` traceback is printed,
                           the process exits 1 (the recipe's GLM-5.3 NextN crash, sglang#37548)
  crash-after-requests=N   same, on request N+1
  stream-cut=N             every stream is cut (connection dropped, no [DONE]) after N chunks
  http-503=N               the next N generation requests get HTTP 503 (then normal service)
  malformed-sse            every stream carries one `data:` line that is not JSON, mid-stream
  no-tokens                generation requests return at once with no output tokens
  slow=F                   every modelled time is multiplied by F (on top of --time-scale)
  tool-empty-args          tool calls are emitted without the opening <arg_value> (vllm#49248),
                           so the GLM parsers return `arguments: "{}"`
  template=CHANGE          the served chat template changes (chat completions and /tokenize alike):
                           drop-system (the system prompt is not rendered), double-bos ([gMASK]
                           twice), drop-tools (no tools block), thinking-off (reasoning off unless
                           the request turns it on); what the template gate must catch
  logprob-noise=S          every teacher-forced log-prob /generate reports (input_token_logprobs and
                           input_top_logprobs) of a model candidate token gets S * N(0, 1) added, drawn
                           from (--seed, the request's number, the position, the token): the same ids
                           scored twice differ, like an engine whose numerics depend on the batch
                           (vLLM #54521). The top-k is re-ranked after the noise; the two
                           scorings of one greedy token differ by S * sqrt(2) * N(0, 1), so the
                           expected self |dlogp| is 2 S / sqrt(pi) (`expected_self_abs_dlogp`)
  logprob-shift=D          every teacher-forced log-prob /generate reports is lowered by D nats (a
                           candidate with a known constant drift of exactly D per token)
  runaway=P                the share P of answers (chosen by a hash of the prompt ids and --seed;
                           `is_runaway`) never stop on end-of-text: they run to max_tokens, like the
                           non-terminating output of a broken quantization (runaway=1: every answer)

Counters (`http-503`, `crash-after-requests`) count generation requests (chat, completions,
/generate, /health_generate), not health or introspection calls.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pytest_glmf.sim.logits import M64, mix, normal, unif
from pytest_glmf.sim.tokenizer import TEMPLATE_CHANGES

FAULT_FORMS = ("boot-oom", "boot-hang", "crash-first-request", "crash-after-requests=N", "stream-cut=N",
               "http-503=N", "malformed-sse", "no-tokens", "slow=F", "tool-empty-args",
               "template=drop-system|double-bos|drop-tools|thinking-off", "logprob-noise=S", "logprob-shift=D",
               "runaway=P")
_FLAGS = {"boot-oom", "boot-hang", "crash-first-request", "malformed-sse", "no-tokens", "tool-empty-args"}
_INTS = {"crash-after-requests", "stream-cut", "http-503"}
_FLOATS = {"slow", "logprob-noise", "logprob-shift", "runaway"}


@dataclass
class Faults:
    boot_oom: bool = False
    boot_hang: bool = False
    crash_after_requests: int | None = None   # crash when this many requests were already admitted
    stream_cut: int | None = None
    http_503_left: int = 0
    malformed_sse: bool = False
    no_tokens: bool = False
    slow: float = 1.0
    tool_empty_args: bool = False
    template: str | None = None               # a change of sim/tokenizer.py TEMPLATE_CHANGES
    logprob_noise: float = 0.0
    logprob_shift: float = 0.0
    runaway: float = 0.0
    specs: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, specs: list[str]) -> "Faults":
        f = cls()
        f.apply(specs)
        return f

    def apply(self, specs: list[str]) -> None:
        """Add fault specs; raise ValueError naming a bad one and the valid forms."""
        for spec in specs:
            name, _, value = spec.strip().partition("=")
            try:
                if name in _FLAGS and not value:
                    if name == "crash-first-request":
                        self.crash_after_requests = 0
                    else:
                        setattr(self, name.replace("-", "_"), True)
                elif name in _INTS and value:
                    n = int(value)
                    if n < 0:
                        raise ValueError
                    if name == "http-503":
                        self.http_503_left = n
                    else:
                        setattr(self, name.replace("-", "_"), n)
                elif name == "template" and value in TEMPLATE_CHANGES:
                    self.template = value
                elif name in _FLOATS and value:
                    x = float(value)
                    if not math.isfinite(x) or x < 0 or (name == "slow" and x == 0) or (name == "runaway" and x > 1):
                        raise ValueError
                    setattr(self, name.replace("-", "_"), x)
                else:
                    raise ValueError
            except ValueError:
                raise ValueError(f"--fault {spec!r}: unknown or malformed fault; valid forms: "
                                 + ", ".join(FAULT_FORMS)) from None
            self.specs.append(spec.strip())

    def to_dict(self) -> dict[str, Any]:
        return {"specs": list(self.specs), "boot_oom": self.boot_oom, "boot_hang": self.boot_hang,
                "crash_after_requests": self.crash_after_requests, "stream_cut": self.stream_cut,
                "http_503_left": self.http_503_left, "malformed_sse": self.malformed_sse,
                "no_tokens": self.no_tokens, "slow": self.slow, "tool_empty_args": self.tool_empty_args,
                "template": self.template,
                "logprob_noise": self.logprob_noise, "logprob_shift": self.logprob_shift, "runaway": self.runaway}

    def perturbs_scores(self) -> bool:
        return bool(self.logprob_noise or self.logprob_shift)

    def scored_logprob(self, lp: float, nonce: int, pos: int, tid: int, candidate: bool) -> float:
        """A reported teacher-forced log-prob under logprob-noise / logprob-shift (see the docstring)."""
        if self.logprob_noise and candidate:
            lp += self.logprob_noise * normal(mix(nonce * 0x9E3779B97F4A7C15 & M64) ^ (pos * 0x632BE59BD9B4E019 & M64)
                                              ^ ((tid + 1) * 0xD6E8FEB86659FD93 & M64))
        return lp - self.logprob_shift


def is_runaway(prompt_ids: list[int], seed: int, share: float) -> bool:
    """Whether the runaway=P fault picks the answer to these prompt ids (the sim's and a test's truth)."""
    if share <= 0:
        return False
    return share >= 1 or unif(mix(hash(tuple(prompt_ids)) & M64) ^ (seed * 0x2545F4914F6CDD1D & M64) ^ 0x7A11) < share


def expected_self_abs_dlogp(noise: float) -> float:
    """E|x1 - x2| for two scorings under logprob-noise=S: S * sqrt(2) * E|N(0,1)| = 2 S / sqrt(pi)."""
    return 2.0 * noise / math.sqrt(math.pi)
