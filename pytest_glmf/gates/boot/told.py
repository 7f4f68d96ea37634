"""Boot facts completed by the server's word: the one home of "what the boot log does not say,
the server tells" (seats, KV tokens, context length), for the boot gate, `assert_seats`,
`assert_boot`, the curve and the shell commands alike.

vLLM's log never prints the `max_num_seqs` a GPU build picks (gates/boot/vllm.py), and an attached
server may come without a log at all; vLLM's dev-mode `/server_info` and SGLang's `/server_info`
say what the scheduler runs (engine/serverconfig.py). The log wins where it says something: it is
what the engine computed at boot, and it says why. Every completed fact names its source in
`BootFacts.sources`, and seats from the server get a cap reason naming the field and the knob.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_glmf.gates.boot.facts import BootFacts

if TYPE_CHECKING:
    from pytest_glmf.engine.serverconfig import ServerConfig

BOOT_LOG = "boot log"
# boot-facts key -> the ServerConfig field that tells it
TOLD_KEYS = {"max_running_requests": "max_running_requests", "kv_tokens": "max_total_tokens",
             "context_len": "context_length"}
# the knob that raises seats told by each field (the engines' own flags)
_SEAT_KNOBS = {"scheduler_config.max_num_seqs": "raise --max-num-seqs",
               "scheduler_config.max_num_active_seqs": "raise --max-num-active-seqs",
               "internal_states[].effective_max_running_requests_per_dp":
                   "raise --max-running-requests, or the cache that caps it (give the boot log to see which)"}


def told_facts(config: "ServerConfig") -> dict[str, Any]:
    """What the server told, in the boot facts' keys (only what it said, never None)."""
    out = {key: getattr(config, name) for key, name in TOLD_KEYS.items()
           if config.says(name) and getattr(config, name) is not None}
    if config.says("decode_log_interval") and config.decode_log_interval is not None:
        out["decode_log_interval"] = config.decode_log_interval
    return out


def server_seat_reason(config: "ServerConfig") -> str:
    """Why the seats are what the server says: the field, its endpoint and the knob."""
    field = config.seats_told or "max_running_requests"
    engine = {"vllm": "vLLM's ", "sglang": "SGLang's "}.get(config.engine or "", "")
    knob = _SEAT_KNOBS.get(field, "raise --max-running-requests")
    return (f"max_running_requests is {engine}{field} {config.max_running_requests} as "
            f"{config.told.get('max_running_requests', '/server_info')} says (the boot log does not print it): {knob}")


def complete_facts_dict(facts: Mapping[str, Any] | None, config: "ServerConfig") -> dict[str, Any]:
    """`facts` (a boot facts dict, or None: no boot log) with what the boot log leaves unsaid
    filled from `config`, and `sources` saying where each of seats, KV tokens and context came
    from. A cap reason the log gave for unknown seats gives way to the server's."""
    out: dict[str, Any] = dict(facts or {})
    if out.get("engine") is None and config.engine:
        out["engine"] = config.engine
    sources = dict(out.get("sources") or {})
    for key in TOLD_KEYS:
        if out.get(key) is not None:
            sources.setdefault(key, BOOT_LOG)
    for key, value in told_facts(config).items():
        if out.get(key) is None:
            out[key] = value
            if key in TOLD_KEYS:
                sources[key] = config.told[TOLD_KEYS[key]]
                if key == "max_running_requests":
                    out["cap_reason"] = server_seat_reason(config)
    out["sources"] = sources
    return out


def complete_facts(facts: BootFacts, config: "ServerConfig") -> BootFacts:
    """The BootFacts form of `complete_facts_dict` (the boot gate's fixture, `Server.boot_facts`)."""
    data = complete_facts_dict(facts.to_dict(), config)
    data.pop("decode_log_interval", None)
    return BootFacts(**data)


def source_of(facts: BootFacts | Mapping[str, Any], key: str = "max_running_requests") -> str:
    """Where a fact came from, for tables and notes ("boot log" when nothing says otherwise)."""
    sources = facts.get("sources") if isinstance(facts, Mapping) else facts.sources
    return (sources or {}).get(key, BOOT_LOG)
