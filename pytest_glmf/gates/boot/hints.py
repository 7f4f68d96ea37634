"""The one hint for a seat cap: which knob raises `max_running_requests`, in the engine's own words.

Used by the boot parser (the `cap_reason` it writes), the boot gate and the curve's seat check.
The mamba advice is SGLang's own, quoted from its cap line (SGLang 0.5.23,
sglang/srt/mem_cache/kv_cache_configurator.py `resolve_max_num_reqs`: "To raise it: increase
--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype
bfloat16."); older builds print the cap without advice, and the same words are used.
"""
from __future__ import annotations

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


def seat_cap_hint(cap_reason: str | None) -> str:
    """The reason with its knob: as given when it already names one, else with the knob its
    wording points at."""
    if not cap_reason:
        return f"{DEFAULT_ADVICE} (no cap reason in the boot log)"
    if any(word in cap_reason for word in _ADVICE_WORDS):
        return cap_reason
    low = cap_reason.lower()
    kind = ("mamba" if "mamba" in low or "state" in low else
            "kv" if "kv" in low or "token" in low or "memory" in low else "")
    return f"{cap_reason}: {advice_for(kind)}"
