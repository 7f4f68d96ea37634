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

from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.engine.serverconfig import read_server_config
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


# -- a shell command's facts (glmf curve, glmf capacity): no launched lane, maybe no boot log ------

def server_word(base_url: str) -> "ServerConfig":
    """What a server says of itself, for a shell command against a URL (no launched lane, maybe no
    boot log): SGLang's /server_info, else vLLM's dev-mode /server_info, and /v1/models
    (engine/serverconfig.py); a server that tells nothing gives an empty config."""
    with Client(base_url, Timeouts(connect_s=3.0, first_token_s=10.0, between_tokens_s=10.0)) as client:
        cfg = read_server_config(client, "sglang")
        if not cfg.says("speculative_algorithm"):   # no SGLang /server_info: vLLM's (dev mode), if any
            cfg = read_server_config(client, "vllm")
    return cfg


def facts_told(base_url: str) -> tuple[dict[str, Any], str]:
    """What a server says of itself that the row checks use, in the boot facts' keys, with its
    one-line summary; a server that tells nothing gives ({}, "not told")."""
    cfg = server_word(base_url)
    return told_facts(cfg), cfg.summary()


def shell_facts(url: str, boot_facts: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    """A shell command's facts about one server: its boot log's (when given) completed by what the
    server says of itself (this module, the one home of that rule: the log wins where it
    says something, `sources` says where each number came from). Returns (facts or None, the
    server's one-line summary)."""
    cfg = server_word(url)
    if not told_facts(cfg) and not boot_facts:
        return None, cfg.summary()
    return complete_facts_dict(boot_facts, cfg), cfg.summary()
