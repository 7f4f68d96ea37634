"""The boot log, in SGLang's formats (docs/engines.md section 1), derived from the flags and the plan.

Lines carry SGLang's prefixes: `[YYYY-MM-DD HH:MM:SS TP0] ...` for the scheduler rank and
`[YYYY-MM-DD HH:MM:SS] ...` for the HTTP process. With `--kv-cache-dtype fp8_e4m3` this hybrid
model prints two KV pools: the MLA pool stays `torch.bfloat16` and the DSA indexer pool is
`torch.float8_e4m3fn` (the recipe's "FP8 KV is half true"). The summary line carries the
effective `max_running_requests`; the server_args dump echoes the requested one.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from pytest_glmf.sim.args import SimConfig
from pytest_glmf.sim.memory import MemoryPlan

# ServerArgs keys the simulator adds; kept out of the dump like SGLang would.
SIM_ONLY_KEYS = {"time_scale", "checkpoint", "perturb_shared_sigma", "perturb_own_sigma", "gpu_mem_gib", "seed",
                 "tool_leak_rate", "autotune_s", "boot_s", "fault", "nice"}

ARCHITECTURE = "Glm5ForCausalLM"


class BootLog:
    """Writes prefixed lines to a stream (stdout by default), flushing each one."""

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.time):
        self.stream = stream or sys.stdout
        self.clock = clock

    def _ts(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.clock()))

    def tp(self, msg: str) -> None:
        self._write(f"[{self._ts()} TP0] {msg}")

    def http(self, msg: str) -> None:
        self._write(f"[{self._ts()}] {msg}")

    def raw(self, msg: str) -> None:
        self._write(msg)

    def _write(self, line: str) -> None:
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):  # the launcher closed our stdout: keep serving
            pass


def _repr(value: Any) -> str:
    return repr(value)


def server_args_line(cfg: SimConfig) -> str:
    args = {k: v for k, v in cfg.server_args.items() if k not in SIM_ONLY_KEYS}
    args["speculative_algorithm"] = cfg.spec
    args["served_model_name"] = cfg.served_model_name
    args["mem_fraction_static"] = cfg.mem_fraction_static
    args["context_length"] = cfg.server_args.get("context_length")
    args["chunked_prefill_size"] = cfg.chunked_prefill_size
    args["tokenizer_path"] = cfg.server_args.get("tokenizer_path") or cfg.model_path
    args["random_seed"] = cfg.server_args.get("random_seed") or cfg.seed
    body = ", ".join(f"{k}={_repr(v)}" for k, v in args.items())
    return f"server_args=ServerArgs({body})"


def print_until_weights(log: BootLog, cfg: SimConfig, plan_weights_gb: float, drafter_gb: float) -> None:
    log.http(server_args_line(cfg))
    log.http("Using default HuggingFace chat template with detected content format: string")
    log.tp("Init torch distributed begin.")
    log.tp("Init torch distributed ends. mem usage=0.00 GB")
    log.tp(f"Load weight begin. avail mem={cfg.gpu_mem_gib:.2f} GB")
    avail = cfg.gpu_mem_gib - plan_weights_gb
    log.tp(f"Load weight end. elapsed=23.18 s, type={ARCHITECTURE}, avail mem={avail:.2f} GB, "
           f"mem usage={plan_weights_gb:.2f} GB.")
    if cfg.spec is not None and drafter_gb:
        log.tp(f"Load weight end. elapsed=1.42 s, type=DFlashDraftModel, avail mem={avail - drafter_gb:.2f} GB, "
               f"mem usage={drafter_gb:.2f} GB.")


def print_pools_and_graphs(log: BootLog, cfg: SimConfig, p: MemoryPlan) -> None:
    kv_dtype = "torch.float8_e4m3fn" if p.kv_fp8 else "torch.bfloat16"
    log.tp(f"Using KV cache dtype: {kv_dtype}")
    mamba = (f"Mamba Cache is allocated. max_mamba_cache_size: {p.slots}, conv_state size: {p.conv_gb:.2f}GB, "
             f"ssm_state size: {p.ssm_gb:.2f}GB ")
    if cfg.spec is not None:
        mamba += (f"intermediate_ssm_state_cache size: {p.intermediate_ssm_gb:.2f}GB "
                  f"intermediate_conv_window_cache size: {p.intermediate_conv_gb:.2f}GB ")
    log.tp(mamba.rstrip())
    # MLA pool stays bf16 (index_kpool excludes the only fp8-capable MLA backend, sglang#36830)
    log.tp(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {p.kv_tokens}, KV size: {p.mla_gb:.2f} GB")
    log.tp(f"KV Cache is allocated. dtype: {p.indexer_dtype}, #tokens: {p.kv_tokens}, KV size: {p.indexer_gb:.2f} GB")
    log.tp(f"Memory pool end. avail mem={p.avail_after_pools_gb:.2f} GB")
    if p.state_capped:
        log.tp(f"max_running_requests is capped to {p.seats} by the mamba state cache "
               f"(max_mamba_cache_size={p.slots}, {p.slots_per_request} state slots per request). To raise it: "
               "increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
               "--mamba-ssm-dtype bfloat16.")
    log.tp("Tree cache initialized: source=default impl=MambaRadixCache hybrid_swa=False hybrid_ssm=True "
           "hierarchical=False streaming_wrapped=False")
    if not cfg.server_args.get("disable_cuda_graph") and p.cuda_graph_bs:
        log.tp(f"Capture cuda graph begin. This can take up to several minutes. avail mem={p.avail_after_pools_gb:.2f} GB")
        log.tp(f"Capture cuda graph bs {p.cuda_graph_bs}")
        elapsed = 2.0 + 0.35 * len(p.cuda_graph_bs) * (3 if cfg.spec else 1)
        log.tp(f"Capture cuda graph end. Time elapsed: {elapsed:.2f} s. mem usage={p.workspace_gb:.2f} GB. "
               f"avail mem={p.avail_after_graphs_gb:.2f} GB.")
    log.tp(f"max_total_num_tokens={p.kv_tokens}, chunked_prefill_size={cfg.chunked_prefill_size}, "
           f"max_prefill_tokens={cfg.max_prefill_tokens}, max_running_requests={p.seats}, "
           f"context_len={cfg.context_length}, available_gpu_mem={p.avail_after_graphs_gb:.2f} GB")


def print_scheduler_exception(log: BootLog, error_line: str, where: str = "init") -> None:
    """The traceback SGLang prints when the scheduler dies (sglang#4895 shape)."""
    log.tp("Scheduler hit an exception: Traceback (most recent call last):")
    if where == "init":
        frames = [
            ('/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2905, in run_scheduler_process',
             "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
            ('/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1802, in init_memory_pool',
             "raise RuntimeError("),
        ]
    else:
        frames = [
            ('/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2911, in run_scheduler_process',
             "scheduler.event_loop_overlap()"),
            ('/sgl-workspace/sglang/python/sglang/srt/speculative/eagle_worker.py", line 312, in forward_batch_generation',
             "self.verify(batch, spec_info)"),
        ]
    for loc, code in frames:
        log.raw(f'  File "{loc}')
        log.raw(f"    {code}")
    log.raw(error_line)
    log.raw("")
    log.http("Received sigquit from a child process. It usually means the child failed.")


def print_http_ready(log: BootLog, host: str, port: int, pid: int) -> None:
    log.http(f"INFO:     Started server process [{pid}]")
    log.http("INFO:     Waiting for application startup.")
    log.http("INFO:     Application startup complete.")
    log.http(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
    log.http("The server is fired up and ready to roll!")
