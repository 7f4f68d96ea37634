"""The boot gate's declaration: what the boot log says, bounded per lane in a thresholds file.

    boot:
      max_running_requests: {min: 9}            # the effective seats the engine printed
      kv_pool_dtypes: [fp8_e4m3, bfloat16]      # every KV pool's dtype, as a set
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.spec import GateCommand, GateSpec, Metric

METRICS = [
    Metric("max_running_requests", "higher", "count", doc="the effective concurrency cap (seats) printed at boot"),
    Metric("kv_tokens", "higher", "tokens", doc="the KV token pool"),
    Metric("context_len", "higher", "tokens", doc="the context length the engine serves"),
    Metric("kv_cache_memory_gib", "higher", "GiB", doc="memory the engine gave the KV cache"),
]


@dataclass(frozen=True)
class BootSettings:
    """The boot gate reads the log as printed: it has no settings (any key is a typo)."""


def _check_kv_pool_dtypes(spec: GateSpec, where: str, value: Any) -> None:
    if not isinstance(value, list) or not value or not all(isinstance(x, str) and x for x in value):
        raise ConfigError(f"{where}: must be a list of dtype names, e.g. [fp8_e4m3, bfloat16]")


TITLE = "Boot facts"
# What the gate's numbers mean, one sentence each, printed under its tables by every report
DEFINITIONS = (
    "seats: the effective max_running_requests the engine prints at boot (its summary line), else the server's "
    "word (/server_info); requested: the flag; why capped: the engine's cap line (e.g. the mamba state cache: "
    "slots / state slots per request).",
    "KV pool tokens, context: the token pools and the context length from the boot log; KV cache GiB: the "
    "memory the engine gave the KV cache; kv_pools: one entry per pool line with its dtype.",
)


SPEC = GateSpec.declare("boot", METRICS, BootSettings, keys={"kv_pool_dtypes": _check_kv_pool_dtypes},
                        doc="boot facts: seats, KV pool, context length, KV pool dtypes",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("bootlog", "parse a boot log into facts (seats, cap reason, KV pools)", rank=80),
                        report_columns=("max_running_requests", "requested_max_running_requests", "kv_tokens",
                                        "context_len", "kv_pools", "cap_reason"),
                        report_rank=10, report="pytest_glmf.gates.boot.report")
