"""The boot log, in SGLang's formats (docs/engines.md section 1), derived from the flags and the plan.

Lines carry SGLang's prefixes: `[YYYY-MM-DD HH:MM:SS TP0] ...` for the scheduler rank and
`[YYYY-MM-DD HH:MM:SS] ...` for the HTTP process. The messages come from
`pytest_glmf.engine.logformats`, in the generation `--log-format` picks: `nightly-2026-09` (the
recipe's image; with `--kv-cache-dtype fp8_e4m3` this hybrid DSA model prints two KV pools, the MLA
pool `torch.bfloat16` and the indexer `torch.float8_e4m3fn`: the recipe's "FP8 KV is half true") or
`0.5.23` (the released package's format strings: a `server_args={...}` dict, one DSA pool line,
`Capture target decode CUDA graph end. bs=[...]`). The summary line carries the effective
`max_running_requests`; the server_args dump echoes the requested one.
"""
from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from pytest_glmf.engine import logformats as lf
from pytest_glmf.sim.args import SimConfig, parse_args, sim_only_keys
from pytest_glmf.sim.memory import MemoryPlan, plan

# ServerArgs keys the simulator adds; kept out of the dump like SGLang would.
SIM_ONLY_KEYS = sim_only_keys()

# The recipe's GLM-5.3-Flash (linear attention + DSA) as SGLang 0.5.23 names it
# (sglang/srt/models/glm5_next.py EntryClass; configs/glm5_next.py model_type "glm5_next").
ARCHITECTURE = lf.GLM5_ARCHITECTURE
MODEL_TYPE = "glm5_next"
_TORCH_DTYPE = {"fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}


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


def server_args(cfg: SimConfig) -> dict[str, Any]:
    """The arguments the dump shows (and /server_info echoes): flags as parsed, sim-only ones left out."""
    args = {k: v for k, v in cfg.server_args.items() if k not in SIM_ONLY_KEYS}
    args["speculative_algorithm"] = cfg.spec
    args["served_model_name"] = cfg.served_model_name
    args["mem_fraction_static"] = cfg.mem_fraction_static
    args["context_length"] = cfg.server_args.get("context_length")
    args["chunked_prefill_size"] = cfg.chunked_prefill_size
    args["tokenizer_path"] = cfg.server_args.get("tokenizer_path") or cfg.model_path
    args["random_seed"] = cfg.server_args.get("random_seed") or cfg.seed
    return args


def server_args_line(cfg: SimConfig) -> str:
    args = server_args(cfg)
    if cfg.log_format == lf.NIGHTLY:
        return lf.render(cfg.log_format, "server_args", args_kv=", ".join(f"{k}={v!r}" for k, v in args.items()))
    return lf.render(cfg.log_format, "server_args", args_dict=args)


def print_until_weights(log: BootLog, cfg: SimConfig, plan_weights_gb: float, drafter_gb: float) -> None:
    g = cfg.log_format
    log.http(server_args_line(cfg))
    log.http(lf.render(g, "chat_template", content_format="string"))
    if lf.has(g, "init_dist_begin"):
        log.tp(lf.render(g, "init_dist_begin"))
        log.tp(lf.render(g, "init_dist_end", usage_gb=0.0))
    log.tp(lf.render(g, "load_weight_begin", avail_gb=cfg.gpu_mem_gib))
    avail = cfg.gpu_mem_gib - plan_weights_gb
    log.tp(lf.render(g, "load_weight_end", elapsed_s=23.18, arch=ARCHITECTURE, avail_gb=avail,
                     usage_gb=plan_weights_gb))
    if cfg.spec is not None and drafter_gb:
        log.tp(lf.render(g, "load_weight_end", elapsed_s=1.42, arch="DFlashDraftModel",
                         avail_gb=avail - drafter_gb, usage_gb=drafter_gb))


def print_pools_and_graphs(log: BootLog, cfg: SimConfig, p: MemoryPlan) -> None:
    g = cfg.log_format
    kv_dtype = _TORCH_DTYPE.get(cfg.kv_cache_dtype, "torch.bfloat16")
    if lf.has(g, "kv_dtype"):
        log.tp(lf.render(g, "kv_dtype", dtype="torch.float8_e4m3fn" if p.kv_fp8 else "torch.bfloat16"))
    if cfg.spec is not None:
        log.tp(lf.render(g, "mamba_pool_spec", slots=p.slots, conv_gb=p.conv_gb, ssm_gb=p.ssm_gb,
                         issm_gb=p.intermediate_ssm_gb, iconv_gb=p.intermediate_conv_gb))
    else:
        log.tp(lf.render(g, "mamba_pool", slots=p.slots, conv_gb=p.conv_gb, ssm_gb=p.ssm_gb))
    if g == lf.NIGHTLY:
        # MLA pool stays bf16 (index_kpool excludes the only fp8-capable MLA backend, sglang#36830)
        log.tp(lf.render(g, "kv_pool", dtype="torch.bfloat16", tokens=p.kv_tokens, size_gb=p.mla_gb))
        log.tp(lf.render(g, "kv_pool", dtype=p.indexer_dtype, tokens=p.kv_tokens, size_gb=p.indexer_gb))
    else:
        # one DSATokenToKVPool line: the pool's dtype is the resolved --kv-cache-dtype
        # (sglang/srt/mem_cache/kv_cache_dtype.py), the size includes the indexer keys
        log.tp(lf.render(g, "kv_pool", dtype=kv_dtype, tokens=p.kv_tokens, size_gb=p.mla_gb + p.indexer_gb))
    log.tp(lf.render(g, "memory_pool_end", avail_gb=p.avail_after_pools_gb))
    if p.state_capped:
        log.tp(lf.render(g, "mamba_cap", seats=p.seats, slots=p.slots, slots_per_request=p.slots_per_request))
    if g == lf.NIGHTLY:
        log.tp(lf.render(g, "tree_cache", source="default", impl="MambaRadixCache", swa=False, ssm=True))
    else:
        log.tp(lf.render(g, "tree_cache", source="default", impl="UnifiedRadixCache", swa=False, ssm=True,
                         hicache=False))
    if not cfg.server_args.get("disable_cuda_graph") and p.cuda_graph_bs:
        elapsed = 2.0 + 0.35 * len(p.cuda_graph_bs) * (3 if cfg.spec else 1)
        if g == lf.NIGHTLY:
            log.tp(lf.render(g, "graph_begin", avail_gb=p.avail_after_pools_gb))
            log.tp(lf.render(g, "graph_bs", bs=p.cuda_graph_bs))
            log.tp(lf.render(g, "graph_end", elapsed_s=elapsed, usage_gb=p.workspace_gb,
                             avail_gb=p.avail_after_graphs_gb))
        else:
            name = "target verify" if cfg.spec is not None else "target decode"
            per_req = (cfg.num_draft_tokens or 0) + 1 if cfg.spec is not None else 1
            log.tp(lf.render(g, "graph_begin", capture_name=name, backend="full", tokens_per_req=per_req,
                             avail_gb=p.avail_after_pools_gb))
            log.tp(lf.render(g, "graph_end", capture_name=name, bs=p.cuda_graph_bs, elapsed_s=elapsed,
                             usage_gb=p.workspace_gb, avail_gb=p.avail_after_graphs_gb))
    log.tp(lf.render(g, "summary", kv_tokens=p.kv_tokens, chunked_prefill_size=cfg.chunked_prefill_size,
                     max_prefill_tokens=cfg.max_prefill_tokens, seats=p.seats, context_len=cfg.context_length,
                     avail_gb=p.avail_after_graphs_gb))


def print_scheduler_exception(log: BootLog, error_line: str, where: str = "init") -> None:
    """The traceback SGLang prints when the scheduler dies (sglang#4895 shape)."""
    log.tp(lf.render(lf.V0_5_23, "scheduler_exception", traceback="Traceback (most recent call last):"))
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
    log.http(lf.render(lf.V0_5_23, "sigquit"))


def print_http_ready(log: BootLog, host: str, port: int, pid: int) -> None:
    log.http(f"INFO:     Started server process [{pid}]")
    log.http("INFO:     Waiting for application startup.")
    log.http("INFO:     Application startup complete.")
    log.http(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
    log.http(lf.render(lf.V0_5_23, "ready"))


def boot_log_text(argv: list[str]) -> str:
    """The whole boot log the simulator prints for these flags, as text (for tests and scripts)."""

    cfg = parse_args(argv)
    p = plan(cfg)
    out = io.StringIO()
    log = BootLog(out)
    print_until_weights(log, cfg, p.weights_gb, p.drafter_gb)
    print_pools_and_graphs(log, cfg, p)
    print_http_ready(log, "127.0.0.1", cfg.port, 1)
    return out.getvalue()
