"""The knobs a failed acceptance check names, picked by the lane's engine and speculative method,
and the draft settings a run records beside its numbers (so a drop against the baseline shows what
changed in the drafter's configuration).

A hint names only the engine's own flags for the method it runs: a vLLM n-gram server is told about
`prompt_lookup_min`/`prompt_lookup_max` in `--speculative-config`, never SGLang's DFlash flags.
Sources: vLLM's `SpeculativeConfig` (vllm/config/speculative.py: `method`, `num_speculative_tokens`,
`prompt_lookup_min`, `prompt_lookup_max`, `model`); SGLang 0.5.23's server args
(`--speculative-algorithm`, `--speculative-draft-model-path`, `--speculative-num-steps`,
`--speculative-eagle-topk`, `--speculative-num-draft-tokens`, `--speculative-dflash-block-size`).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

VLLM_NGRAM = ("the n-gram proposer drafts only where the last prompt_lookup_min..prompt_lookup_max tokens already "
              "occurred in the context: lower prompt_lookup_min or raise prompt_lookup_max in --speculative-config; "
              "num_speculative_tokens sets the drafts per step")
VLLM_DRAFTER = ("check the draft model (\"model\") and num_speculative_tokens in --speculative-config: "
                "more draft tokens per step lower the rate arithmetically; gate the length")
SGLANG_DFLASH = ("check the draft model (--speculative-draft-model-path) and --speculative-dflash-block-size "
                 "(and the draft attention backend, --speculative-draft-attention-backend)")
SGLANG_EAGLE = ("check the draft model (--speculative-draft-model-path), --speculative-num-steps, "
                "--speculative-eagle-topk and --speculative-num-draft-tokens")
SGLANG_NGRAM = ("the n-gram proposer drafts only from text already seen: check --speculative-num-draft-tokens "
                "and the n-gram match window flags of --speculative-algorithm NGRAM")
UNKNOWN = "check the engine's speculative settings (the draft model and the drafts per step)"


@dataclass(frozen=True)
class Knobs:
    """What to turn, for one engine and method."""

    engine: str | None
    method: str | None

    def drafter(self) -> str:
        """The knobs of the drafter, in the engine's own words."""
        method = (self.method or "").lower()
        if self.engine == "vllm":
            return VLLM_NGRAM if method == "ngram" else VLLM_DRAFTER
        if self.engine == "sglang":
            if method == "dflash":
                return SGLANG_DFLASH
            if method == "ngram":
                return SGLANG_NGRAM
            return SGLANG_EAGLE
        return UNKNOWN

    def hints(self) -> dict[str, str]:
        """One hint per metric for the failure tables (gates/verdict.checks_from_bounds)."""
        knobs = self.drafter()
        pos = {f"accept_pos{k}": f"draft token {k} rejected more often: {knobs}" for k in range(1, 9)}
        return {"accept_rate": f"drafts rejected more often: {knobs}",
                "accept_length": f"fewer tokens per verify step: {knobs}",
                "tok_s": "single-stream speed: check the spec flags, the decode backend, and that nothing else "
                         "loads the server",
                **pos}

    def no_drafts(self) -> str:
        """Why a server may draft nothing, and what to turn."""
        return f"the server proposed no draft token: {self.drafter()}"


def draft_settings(argv: Sequence[str] | None, method: str | None = None,
                   draft_tokens: int | None = None) -> dict[str, Any]:
    """The drafter's configuration from a server's command line: vLLM's `--speculative-config`
    JSON (its keys), SGLang's `--speculative-*` flags (their names without the prefix). A server
    whose command line is unknown (attached) records what it said of itself (`method`,
    `draft_tokens`: engine/serverconfig.py), when it said it."""
    out = _from_argv(argv)
    if not out and method:
        out = {"method": method, **({"draft_tokens": draft_tokens} if draft_tokens is not None else {})}
    return out


def _from_argv(argv: Sequence[str] | None) -> dict[str, Any]:
    args = [str(a) for a in argv or []]
    out: dict[str, Any] = {}
    for i, arg in enumerate(args):
        flag, eq, inline = arg.partition("=")
        if not flag.startswith("--speculative-") and flag != "-sc":
            continue
        value: Any = inline if eq else (args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True)
        if flag in ("--speculative-config", "-sc"):
            try:
                parsed = json.loads(value) if isinstance(value, str) else None
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                out.update({str(k): v for k, v in parsed.items()})
            continue
        out[flag[len("--speculative-"):].replace("-", "_")] = value
    return out

