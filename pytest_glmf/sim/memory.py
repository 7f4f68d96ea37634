"""Seat and memory arithmetic of the simulated GB300: how the flags become pools and seats.

The model (all sizes in GB as SGLang prints them, i.e. GiB):

    static budget   = gpu_mem_gib * mem_fraction_static
    pool budget     = static budget - target weights - drafter weights - decode workspace
    decode workspace= 1.5 + 0.1632 * cuda_graph_max_bs     (graph buffers + activations per captured bs)
    state per slot  = conv 0.0012 + ssm (0.132 fp32 | 0.066 bf16)
                      + with speculative decoding, per intermediate state (DFLASH: block size of
                      them, others: draft tokens): ssm 0.0290 + conv 0.0006 (kept in fp32: the bf16
                      state crashes the DFlash2 verify kernel, per the recipe)
    state pool      = max_mamba_cache_size * state per slot; without --max-mamba-cache-size the
                      pool gets mamba_full_memory_ratio * 0.3037 of the pool budget (calibrated so
                      the daily flags give the recipe's default of 38 slots)
    KV pool tokens  = (pool budget - state pool) / bytes per token, bytes per token =
                      MLA 4.834 KB (bf16 always: fp8 KV excludes the only fp8 MLA backend, #36830)
                      + DSA indexer 0.94 KB (fp8_e4m3) or 1.88 KB (bf16)
                      + drafter KV 47.16 KB with DFLASH (not printed as a pool, as in SGLang)
                      capped by --max-total-tokens when given
    seats           = min(requested max_running_requests (default min(4096, tokens // 2)),
                          max_mamba_cache_size // state slots per request)
    state slots per request: 5 under the default extra_buffer strategy, 4 extra_buffer_lazy, 3 no_buffer

Fitted to the recipe (GB300, 250 GiB, NVFP4 weights 158.44 GB, drafter 2.0 GB):

    config                                   recipe            this model
    DFlash2 block 7, MEM 0.85, 48 slots      597K tokens       ~597K, 9 seats
    DFlash2 block 7, MEM 0.85, 120 slots     41 GB, 134K       40.8 GB, ~134K, 24 seats
    DFlash2 block 8, MEM 0.85, 48 slots      543K              ~570K
    DFlash2 block 7, MEM 0.85, default       38 slots, 7 seats 38 slots, 7 seats
    AR, MEM 0.90, 640 bf16 slots, bs 128     43 GB, 201K, 128  43.0 GB, ~201K, 128 seats
    AR, MEM 0.90, 254 fp32 slots, bs 128     1.79M, 50 seats   ~1.79M, 50 seats

The recipe's figures are not all consistent with one linear model at a fixed budget (the AR
pool would be smaller than the DFlash2 one at a higher memory fraction); the per-captured-bs
workspace term is what reconciles them (AR captures graphs up to 128, the daily lane up to 16).
The real SGLang does not cap running requests by the graph batch size; it only captures graphs
for sizes up to min(cuda_graph_max_bs, seats), and larger batches run without graphs.
"""
from __future__ import annotations

from dataclasses import dataclass

from pytest_glmf.sim.args import SimConfig

GB_PER_KB = 1e-6  # the fit uses decimal KB per token against GB pools

WEIGHTS_GB = {"nvidia": 158.44, "libertai": 157.10, "fp8": 158.44}  # fp8: served with expert offload in the recipe
DRAFTER_GB = 2.0
WORKSPACE_GB = 1.5
WORKSPACE_GB_PER_BS = 0.1632
CONV_GB_PER_SLOT = 0.0012
SSM_GB_PER_SLOT = {"float32": 0.132, "bfloat16": 0.066, "float16": 0.066}
INTERMEDIATE_SSM_GB = 0.0290
INTERMEDIATE_CONV_GB = 0.0006
DEFAULT_STATE_SHARE = 0.3037
MLA_KB_PER_TOKEN = 4.834
INDEXER_KB_PER_TOKEN = {"fp8": 0.94, "bf16": 1.88}
DRAFTER_KB_PER_TOKEN = {"DFLASH": 47.16}
SLOTS_PER_REQUEST = {"extra_buffer": 5, "extra_buffer_lazy": 4, "no_buffer": 3}
MIN_KV_TOKENS = 4096

# SGLang's default decode capture sizes (cuda_graph_runner), filtered by max bs and seats.
DEFAULT_CAPTURE_BS = [1, 2, 4, 8, 12, 16, 24, 32] + list(range(40, 257, 8)) + list(range(272, 513, 16))


class BootOOM(RuntimeError):
    """The configuration does not fit: the message is the line SGLang would print."""


@dataclass
class MemoryPlan:
    total_gib: float
    weights_gb: float
    drafter_gb: float
    workspace_gb: float
    pool_budget_gb: float
    slots: int
    slots_per_request: int
    conv_gb: float
    ssm_gb: float
    intermediate_ssm_gb: float
    intermediate_conv_gb: float
    kv_tokens: int
    mla_gb: float
    indexer_gb: float
    drafter_kv_gb: float                  # allocated, not printed as a pool (as in SGLang)
    indexer_dtype: str                    # torch dtype name
    kv_fp8: bool
    requested_max_running_requests: int | None
    uncapped_max_running_requests: int
    seats: int
    state_capped: bool
    cuda_graph_bs: list[int]

    @property
    def state_gb(self) -> float:
        return self.conv_gb + self.ssm_gb + self.intermediate_ssm_gb + self.intermediate_conv_gb

    @property
    def avail_after_weights_gb(self) -> float:
        return self.total_gib - self.weights_gb - self.drafter_gb

    @property
    def avail_after_pools_gb(self) -> float:
        return self.avail_after_weights_gb - self.state_gb - self.mla_gb - self.indexer_gb - self.drafter_kv_gb

    @property
    def avail_after_graphs_gb(self) -> float:
        return self.avail_after_pools_gb - self.workspace_gb


def intermediate_states(cfg: SimConfig) -> int:
    if cfg.spec is None:
        return 0
    if cfg.spec == "DFLASH":
        return int(cfg.dflash_block_size or 8)
    return int(cfg.num_draft_tokens or 3)


def state_gb_per_slot(cfg: SimConfig) -> float:
    k = intermediate_states(cfg)
    return CONV_GB_PER_SLOT + SSM_GB_PER_SLOT[cfg.mamba_ssm_dtype] + k * (INTERMEDIATE_SSM_GB + INTERMEDIATE_CONV_GB)


def kv_kb_per_token(cfg: SimConfig) -> tuple[float, float, float]:
    """(MLA, indexer, drafter) KB per token."""
    fp8 = cfg.kv_cache_dtype.startswith("fp8")
    indexer = INDEXER_KB_PER_TOKEN["fp8" if fp8 else "bf16"]
    drafter = DRAFTER_KB_PER_TOKEN.get(cfg.spec or "", 0.0)
    return MLA_KB_PER_TOKEN, indexer, drafter


def plan(cfg: SimConfig) -> MemoryPlan:
    """The pools and seats for these flags, or BootOOM with SGLang's message."""
    weights = WEIGHTS_GB[cfg.checkpoint]
    drafter = DRAFTER_GB if cfg.spec is not None else 0.0
    workspace = WORKSPACE_GB + WORKSPACE_GB_PER_BS * cfg.cuda_graph_max_bs
    budget = cfg.gpu_mem_gib * cfg.mem_fraction_static - weights - drafter - workspace
    if budget <= 0:
        raise BootOOM("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    per_slot = state_gb_per_slot(cfg)
    if cfg.max_mamba_cache_size is not None:
        slots = cfg.max_mamba_cache_size
    else:
        slots = int(cfg.mamba_full_memory_ratio * DEFAULT_STATE_SHARE * budget / per_slot)
    state = slots * per_slot
    if state >= budget:
        raise BootOOM("RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                      f"max_mamba_cache_size={slots} needs {state:.2f} GB of a {budget:.2f} GB pool budget; "
                      "lower --max-mamba-cache-size or raise --mem-fraction-static.")
    mla_kb, idx_kb, draft_kb = kv_kb_per_token(cfg)
    kv_tokens = int((budget - state) / ((mla_kb + idx_kb + draft_kb) * GB_PER_KB))
    kv_tokens -= kv_tokens % 64  # page-aligned, like the real allocator
    cap = cfg.server_args.get("max_total_tokens")
    if cap:   # --max-total-tokens caps the pool (SGLang 0.5.23 mem_cache/kv_cache_configurator.py: min of the two)
        kv_tokens = min(kv_tokens, int(cap) - int(cap) % 64)
    if kv_tokens < MIN_KV_TOKENS:
        raise BootOOM("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    k_slots = SLOTS_PER_REQUEST[cfg.mamba_scheduler_strategy]
    uncapped = cfg.max_running_requests if cfg.max_running_requests is not None else min(4096, kv_tokens // 2)
    state_cap = slots // k_slots
    seats = min(uncapped, state_cap)
    if seats < 1:
        raise BootOOM(f"RuntimeError: Not enough memory for one running request: max_mamba_cache_size={slots} "
                      f"< {k_slots} state slots per request.")
    k_int = intermediate_states(cfg)
    graph_bs = [bs for bs in DEFAULT_CAPTURE_BS if bs <= min(cfg.cuda_graph_max_bs, seats)]
    return MemoryPlan(
        total_gib=cfg.gpu_mem_gib, weights_gb=weights, drafter_gb=drafter, workspace_gb=workspace,
        pool_budget_gb=budget, slots=slots, slots_per_request=k_slots,
        conv_gb=slots * CONV_GB_PER_SLOT, ssm_gb=slots * SSM_GB_PER_SLOT[cfg.mamba_ssm_dtype],
        intermediate_ssm_gb=slots * k_int * INTERMEDIATE_SSM_GB, intermediate_conv_gb=slots * k_int * INTERMEDIATE_CONV_GB,
        kv_tokens=kv_tokens, mla_gb=kv_tokens * mla_kb * GB_PER_KB, indexer_gb=kv_tokens * idx_kb * GB_PER_KB,
        drafter_kv_gb=kv_tokens * draft_kb * GB_PER_KB,
        indexer_dtype="torch.float8_e4m3fn" if cfg.kv_cache_dtype.startswith("fp8") else "torch.bfloat16",
        kv_fp8=cfg.kv_cache_dtype.startswith("fp8"),
        requested_max_running_requests=cfg.max_running_requests, uncapped_max_running_requests=uncapped,
        seats=seats, state_capped=state_cap < uncapped, cuda_graph_bs=graph_bs)
