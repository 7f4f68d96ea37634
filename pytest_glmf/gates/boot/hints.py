"""The one hint for a seat cap: which knob raises `max_running_requests`, in the engine's own words.

Used by the boot parser (the `cap_reason` it writes), the boot gate and the curve's seat check.
The mamba advice is SGLang's own, quoted from its cap line (SGLang 0.5.23,
sglang/srt/mem_cache/kv_cache_configurator.py `resolve_max_num_reqs`: "To raise it: increase
--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype
bfloat16."); older builds print the cap without advice, and the same words are used.

Advice names only what the lane does not already set: a lane that passes `--mamba-ssm-dtype
bfloat16` is not told to halve its state with it (the engine's own advice line included).
"""
from __future__ import annotations

import re
from typing import Any

from pytest_glmf.config.lanes import build_server_argv

MAMBA_ADVICE = ("increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size "
                "with --mamba-ssm-dtype bfloat16")
KV_ADVICE = "raise --mem-fraction-static or lower --context-length"
ESTIMATE_ADVICE = "set --max-running-requests explicitly"
DEFAULT_ADVICE = "raise --max-running-requests"

# words that mark a reason which already names its knob
_ADVICE_WORDS = ("raise ", "increase ", "lower ", "set --")


def advice_for(kind: str) -> str:
    """The knob for a cap of this kind (mamba, kv, estimate, anything else)."""
    return {"mamba": MAMBA_ADVICE, "kv": KV_ADVICE, "estimate": ESTIMATE_ADVICE}.get(kind, DEFAULT_ADVICE)


# advice clauses that a lane can already follow: (the clause as the engine and MAMBA_ADVICE word it,
# the flag and value that make it moot)
_MOOT_CLAUSES = [(re.compile(r",? or halve the state size with --mamba-ssm-dtype bfloat16"),
                  ("--mamba-ssm-dtype", "bfloat16"))]


def lane_argv(lane: Any) -> list[str]:
    """The engine flags a lane passes (its own command, else the argv built from its fields); []
    for a lane name or None."""
    if not hasattr(lane, "extra"):
        return []

    try:
        return [str(a) for a in build_server_argv(lane)]
    except (TypeError, ValueError):
        return [str(a) for a in lane.extra]


def _passes(argv: list[str], flag: str, value: str) -> bool:
    return any(a == f"{flag}={value}" or (a == flag and i + 1 < len(argv) and argv[i + 1] == value)
               for i, a in enumerate(argv))


def without_moot_advice(text: str, lane: Any) -> str:
    """`text` without the advice clauses the lane already follows."""
    argv = lane_argv(lane)
    for clause, (flag, value) in _MOOT_CLAUSES:
        if _passes(argv, flag, value):
            text = clause.sub("", text)
    return text


def seat_cap_hint(cap_reason: str | None, lane: Any = None) -> str:
    """The reason with its knob: as given when it already names one, else with the knob its
    wording points at; advice the lane already follows is left out (`lane`: a LaneConfig)."""
    if not cap_reason:
        return f"{DEFAULT_ADVICE} (no cap reason in the boot log)"
    if any(word in cap_reason for word in _ADVICE_WORDS):
        return without_moot_advice(cap_reason, lane)
    low = cap_reason.lower()
    kind = ("mamba" if "mamba" in low or "state" in low else
            "kv" if "kv" in low or "token" in low or "memory" in low else "")
    return without_moot_advice(f"{cap_reason}: {advice_for(kind)}", lane)
