"""Lanes file and thresholds file: load, validate, clear errors.

A lane is one server config, named like the recipe's launcher variables (IMAGE, MODEL, DRAFT, SPEC,
KV, MEM, CTX, MAXBS, EXTRA). Loading and validation of the files is completed by the plugin-core
work; the LaneConfig fields below are the contract the launchers rely on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LaneConfig:
    name: str
    engine: str = "sglang"                 # sglang | vllm
    launcher: str = "sim"                  # docker | process | sim | attach
    image: str | None = None               # docker
    model: str | None = None               # --model-path / vllm --model
    draft: str | None = None               # --speculative-draft-model-path
    spec: str | None = None                # --speculative-algorithm (None/"none": autoregressive)
    kv: str | None = None                  # --kv-cache-dtype
    mem: float | None = None               # --mem-fraction-static / --gpu-memory-utilization
    ctx: int | None = None                 # --context-length / --max-model-len
    maxbs: int | None = None               # cuda graph max batch size
    cuda_graph_max_bs_flag: str = "--cuda-graph-max-bs"  # renamed --cuda-graph-max-bs-decode on newer SGLang
    extra: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None                # None: pick a free port
    gpus: str | int | list[str] | None = None   # docker: "all", a count, or device ids
    volumes: dict[str, str] = field(default_factory=dict)  # host path -> container path (read-only)
    shm_size: str | None = None
    ipc_mode: str | None = None
    boot_timeout_s: float = 1800.0
    url: str | None = None                 # attach
    boot_log: str | None = None            # attach: a file holding the server's boot log
    command: list[str] | None = None       # process: argv of the server (None: built from fields)
    time_scale: float = 1.0                # sim: 1.0 is the recipe's GB300 speed; smaller is faster
    sim_args: list[str] = field(default_factory=list)  # sim: extra simulator-only flags (faults...)
    timeouts: dict[str, float] = field(default_factory=dict)  # connect_s, first_token_s, between_tokens_s, gate_s
    source: str = "<built-in>"             # file the lane came from, for error messages

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)
