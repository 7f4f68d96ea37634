"""Command line of the simulator: the SGLang flags the launcher builds, plus sim-only knobs.

`parse_args(argv) -> SimConfig`. Unknown flags fail the way SGLang's argparse fails
(`error: unrecognized arguments: --foo`, exit code 2), and like SGLang's parser (argparse's default
`allow_abbrev`) a unique prefix is accepted and a shared one is `ambiguous option` (exit 2). SGLang-only flags the simulator has no use
for are still accepted (and echoed in the server_args dump) so a real lane's command line runs
unchanged. The host must be a loopback address: the simulator never listens beyond this machine.

Checkpoint: `--checkpoint fp8|nvidia|libertai` picks the logit variant (see logits.py). Without it
the model path decides: a path naming "libertai" is the community quant, one naming "nvfp4" (or
"fp4") NVIDIA's, anything else the FP8 original.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from pytest_glmf.engine import logformats
from pytest_glmf.sim import faults as faults_mod

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "MTP")


class SimArgError(ValueError):
    """A flag value the simulator refuses (after argparse accepted its shape)."""


def _bool_flag(ap: argparse._ActionsContainer, name: str, help_text: str = "") -> None:
    ap.add_argument(name, action="store_true", default=False, help=help_text or argparse.SUPPRESS)


SIM_GROUP = "simulator flags"
SGLANG_GROUP = "SGLang flags"
DEFAULT_PORT = 30000


def build_parser(prog: str = "python -m pytest_glmf.sim") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=prog, usage="%(prog)s [--port N] [--time-scale X] [simulator flags] [SGLang flags]",
        description="SGLang-compatible simulator of the recipe's GB300 (GLM-5.3-Flash): prints an SGLang boot "
                    f"log, then serves SGLang's HTTP API on 127.0.0.1:{DEFAULT_PORT} (--port N) at the GB300's "
                    "speed (--time-scale 1.0) until Ctrl-C.")
    # the simulator's own flags first: what a user of `glmf sim` turns; SGLang's after, for lanes
    s = ap.add_argument_group(SIM_GROUP, "the simulator's own knobs (a real SGLang refuses them)")
    g = ap.add_argument_group(SGLANG_GROUP, "accepted as SGLang accepts them, so a real lane's command line runs "
                                            "unchanged; the model, seat, cache, speculative and parser flags "
                                            "shape the simulation, the rest are echoed in /server_info")
    g.add_argument("--model-path", "--model", dest="model_path", default="/models/GLM-5.3-Flash-NVFP4")
    g.add_argument("--tokenizer-path", default=None)
    g.add_argument("--served-model-name", default=None)
    g.add_argument("--host", default="127.0.0.1", help="loopback only (default: %(default)s)")
    g.add_argument("--port", type=int, default=DEFAULT_PORT, help="where it listens (default: %(default)s)")
    g.add_argument("--speculative-algorithm", default=None,
                   help="none/NONE (autoregressive), DFLASH, EAGLE, EAGLE3, NEXTN, ...")
    g.add_argument("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path",
                   default=None)
    g.add_argument("--speculative-dflash-block-size", type=int, default=None)
    g.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    g.add_argument("--speculative-num-steps", type=int, default=None)
    g.add_argument("--speculative-eagle-topk", type=int, default=None)
    g.add_argument("--speculative-draft-attention-backend", default=None)
    g.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"])
    g.add_argument("--mem-fraction-static", type=float, default=None)
    g.add_argument("--context-length", type=int, default=None)
    # SGLang 0.5.23 (sglang/srt/arg_groups/fields/exec_.py) and the recipe's nightly: the old
    # --cuda-graph-max-bs is an ambiguous prefix of these two, as it is here (allow_abbrev)
    g.add_argument("--cuda-graph-max-bs-decode", type=int, default=None)
    g.add_argument("--cuda-graph-max-bs-prefill", type=int, default=None)
    g.add_argument("--cuda-graph-bs-decode", type=int, nargs="+", default=None)
    _bool_flag(g, "--disable-cuda-graph")
    g.add_argument("--max-running-requests", type=int, default=None)
    g.add_argument("--max-total-tokens", type=int, default=None)
    g.add_argument("--chunked-prefill-size", type=int, default=None)
    g.add_argument("--max-prefill-tokens", type=int, default=16384)
    g.add_argument("--max-mamba-cache-size", type=int, default=None)
    g.add_argument("--mamba-ssm-dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    g.add_argument("--mamba-full-memory-ratio", type=float, default=0.9)
    g.add_argument("--mamba-radix-cache-strategy", dest="mamba_radix_cache_strategy",
                   default="extra_buffer", choices=["no_buffer", "extra_buffer", "extra_buffer_lazy"])
    g.add_argument("--linear-attn-decode-backend", default=None)
    g.add_argument("--linear-attn-prefill-backend", default=None)
    g.add_argument("--attention-backend", default=None)
    g.add_argument("--tool-call-parser", default=None, choices=["glm", "glm45", "glm47", "hermes", "qwen25"])
    g.add_argument("--reasoning-parser", default=None)
    _bool_flag(g, "--enable-metrics")
    # decode steps between the decode log line and the refresh of the /metrics gauges (ServerArgs default)
    g.add_argument("--decode-log-interval", type=int, default=40)
    _bool_flag(g, "--trust-remote-code")
    _bool_flag(g, "--disable-overlap-schedule")
    _bool_flag(g, "--disable-radix-cache")
    _bool_flag(g, "--enable-cache-report")   # usage.prompt_tokens_details.cached_tokens (OpenAI API)
    _bool_flag(g, "--enable-mixed-chunk")
    _bool_flag(g, "--log-requests")
    g.add_argument("--tp-size", dest="tp_size", type=int, default=1)   # --tp: a unique prefix, as in SGLang
    g.add_argument("--dp-size", dest="dp_size", type=int, default=1)
    g.add_argument("--ep-size", type=int, default=1)
    g.add_argument("--dtype", default="auto")
    g.add_argument("--quantization", default=None)
    g.add_argument("--moe-runner-backend", default="auto")
    g.add_argument("--chat-template", default=None)
    g.add_argument("--api-key", default=None)
    g.add_argument("--random-seed", type=int, default=None)
    g.add_argument("--log-level", default="info")
    g.add_argument("--watchdog-timeout", type=float, default=300.0)
    g.add_argument("--download-dir", default=None)
    g.add_argument("--revision", default=None)
    s.add_argument("--time-scale", type=float, default=1.0, metavar="X",
                   help="multiplies every modelled time: 1.0 is the recipe's GB300, 0.05 is 20x faster "
                        "(default: %(default)s)")
    s.add_argument("--checkpoint", default=None, choices=["fp8", "nvidia", "libertai"],
                   help="logit variant; default from the model path (libertai / nvfp4 / else fp8)")
    s.add_argument("--perturb-shared-sigma", type=float, default=None,
                   help="std of the logit noise both NVFP4 variants share (default from logits.py)")
    s.add_argument("--perturb-own-sigma", type=float, default=None,
                   help="std of this checkpoint's own logit noise (default per checkpoint, logits.py)")
    s.add_argument("--answer-tokens", default=None, metavar="MIN:MAX",
                   help="an assistant answer's natural length lies in [MIN, MAX) tokens, by a hash of the "
                        "prompt (default 700:2100, logits.py); with --reasoning-parser its first 60 %% is "
                        "reasoning")
    s.add_argument("--gpu-mem-gib", type=float, default=250.0, help="GPU memory (GB300 Station: 250)")
    s.add_argument("--seed", type=int, default=0, help="seeds sampling at temperature > 0 and draft acceptance")
    s.add_argument("--tool-leak-rate", type=float, default=0.0,
                   help="fraction of tool-call turns whose markup is left in content (deterministic per request)")
    s.add_argument("--autotune-s", type=float, default=None,
                   help="first-hit delay per new batch shape at time scale 1 (default 12.6 s: 13 s first token at C16)")
    s.add_argument("--nice", type=int, default=0,
                   help="lower the simulator's CPU priority by N (os.nice): a load generator measuring it on the "
                        "same machine is then scheduled first, as beside a GPU server; on a busy machine the "
                        "simulator then falls behind its model instead (default 0; a lane's sim_args may set it)")
    s.add_argument("--boot-s", type=float, default=0.0,
                   help="extra seconds to wait (x time scale) before serving, like weight loading")
    s.add_argument("--log-format", default=logformats.NIGHTLY, choices=logformats.GENERATIONS,
                   help="which SGLang's boot-log lines to print: the recipe's pinned nightly (default) or the "
                        "released 0.5.23 (pytest_glmf/engine/logformats.py has both)")
    s.add_argument("--record-requests", default=None, metavar="FILE",
                   help="append every POST body the simulator receives to FILE, one JSON line each "
                        "({method, path, body}): what a client really sends")
    s.add_argument("--fault", action="append", default=[],
                   help="inject a fault; repeatable: " + ", ".join(faults_mod.FAULT_FORMS))
    for action in [*s._group_actions, *g._group_actions]:   # short placeholders, not SPECULATIVE_NUM_STEPS
        if action.nargs != 0 and action.choices is None and action.metavar is None:
            action.metavar = {int: "N", float: "X"}.get(action.type, "VALUE")  # type: ignore[call-overload]
    return ap


@dataclass
class SimConfig:
    model_path: str
    served_model_name: str
    host: str
    port: int
    spec: str | None                  # None (autoregressive) or the upper-case algorithm
    draft_path: str | None
    dflash_block_size: int | None
    num_draft_tokens: int | None      # draft tokens verified per step (block - 1 for DFLASH)
    kv_cache_dtype: str
    mem_fraction_static: float
    context_length: int
    cuda_graph_max_bs: int
    max_running_requests: int | None  # requested (None: not given)
    max_mamba_cache_size: int | None  # requested (None: derived from --mamba-full-memory-ratio)
    mamba_ssm_dtype: str
    mamba_full_memory_ratio: float
    mamba_scheduler_strategy: str     # --mamba-radix-cache-strategy
    tool_call_parser: str | None
    reasoning_parser: str | None
    enable_metrics: bool
    chunked_prefill_size: int
    max_prefill_tokens: int
    time_scale: float
    checkpoint: str
    perturb_shared_sigma: float | None
    perturb_own_sigma: float | None
    gpu_mem_gib: float
    seed: int
    tool_leak_rate: float
    autotune_s: float
    boot_s: float
    faults: faults_mod.Faults
    nice: int = 0
    log_format: str = logformats.NIGHTLY
    record_requests: str | None = None
    answer_tokens: tuple[int, int] | None = None   # [MIN, MAX) natural answer length (None: logits.py's)
    decode_log_interval: int = 40
    server_args: dict[str, Any] = field(default_factory=dict)   # every parsed flag, for the dump


def sim_only_keys() -> frozenset[str]:
    """The simulator's own settings: never in the server_args dump or /server_info."""
    group = next(g for g in build_parser()._action_groups if g.title == SIM_GROUP)
    return frozenset(a.dest for a in group._group_actions)


def checkpoint_from_path(path: str) -> str:
    low = path.lower()
    if "libertai" in low:
        return "libertai"
    if "nvfp4" in low or "fp4" in low:
        return "nvidia"
    return "fp8"


def parse_args(argv: list[str], prog: str = "python -m pytest_glmf.sim") -> SimConfig:
    """Parse; argparse exits with code 2 naming an unknown flag. Raises SimArgError for values
    the simulator refuses (non-loopback host, bad fault spec)."""
    ns = build_parser(prog).parse_args(argv)
    if ns.host not in LOOPBACK_HOSTS:
        raise SimArgError(f"--host {ns.host}: the simulator binds to 127.0.0.1 only (got a non-loopback address); "
                          "use --host 127.0.0.1")
    spec = ns.speculative_algorithm
    spec = None if spec is None or spec.lower() == "none" else spec.upper()
    if spec is not None and spec not in SPEC_ALGORITHMS:
        raise SimArgError(f"--speculative-algorithm {ns.speculative_algorithm}: unknown algorithm "
                          f"(known: NONE, {', '.join(SPEC_ALGORITHMS)})")
    block = ns.speculative_dflash_block_size
    if spec == "DFLASH":
        block = block or 8   # the DFlash2 drafter proposes eight-token blocks
        num_draft = block - 1  # the block includes the target's own token
    elif spec is not None:
        num_draft = (ns.speculative_num_draft_tokens or 4) - 1
    else:
        num_draft = None
    if not 0.0 <= ns.tool_leak_rate <= 1.0:
        raise SimArgError(f"--tool-leak-rate {ns.tool_leak_rate}: must be within [0, 1]")
    if ns.time_scale <= 0:
        raise SimArgError(f"--time-scale {ns.time_scale}: must be > 0")
    if ns.decode_log_interval < 1:
        raise SimArgError(f"--decode-log-interval {ns.decode_log_interval}: must be >= 1")
    if not 0 <= ns.nice <= 19:
        raise SimArgError(f"--nice {ns.nice}: must be within [0, 19]")
    answer_tokens = None
    if ns.answer_tokens is not None:
        lo, sep, hi = ns.answer_tokens.partition(":")
        try:
            answer_tokens = (int(lo), int(hi)) if sep else None
        except ValueError:
            answer_tokens = None
        if answer_tokens is None or not 1 <= answer_tokens[0] < answer_tokens[1]:
            raise SimArgError(f"--answer-tokens {ns.answer_tokens!r}: expected MIN:MAX, integers, 1 <= MIN < MAX")
    try:
        faults = faults_mod.Faults.parse(ns.fault)
    except ValueError as exc:
        raise SimArgError(str(exc)) from None
    mem = ns.mem_fraction_static if ns.mem_fraction_static is not None else 0.85
    ctx = ns.context_length if ns.context_length is not None else 202752  # the model's config max
    served = ns.served_model_name or ns.model_path
    server_args = {k: v for k, v in sorted(vars(ns).items()) if k not in ("fault",)}
    return SimConfig(
        model_path=ns.model_path, served_model_name=served, host=ns.host, port=ns.port,
        spec=spec, draft_path=ns.speculative_draft_model_path, dflash_block_size=block if spec == "DFLASH" else None,
        num_draft_tokens=num_draft, kv_cache_dtype=ns.kv_cache_dtype, mem_fraction_static=mem, context_length=ctx,
        cuda_graph_max_bs=(ns.cuda_graph_max_bs_decode if ns.cuda_graph_max_bs_decode is not None
                           else (48 if spec else 160)),
        max_running_requests=ns.max_running_requests, max_mamba_cache_size=ns.max_mamba_cache_size,
        mamba_ssm_dtype=ns.mamba_ssm_dtype, mamba_full_memory_ratio=ns.mamba_full_memory_ratio,
        mamba_scheduler_strategy=ns.mamba_radix_cache_strategy, tool_call_parser=ns.tool_call_parser,
        reasoning_parser=ns.reasoning_parser, enable_metrics=ns.enable_metrics,
        chunked_prefill_size=ns.chunked_prefill_size if ns.chunked_prefill_size is not None else 8192,
        max_prefill_tokens=ns.max_prefill_tokens, time_scale=ns.time_scale,
        checkpoint=ns.checkpoint or checkpoint_from_path(ns.model_path),
        perturb_shared_sigma=ns.perturb_shared_sigma, perturb_own_sigma=ns.perturb_own_sigma,
        gpu_mem_gib=ns.gpu_mem_gib, seed=ns.seed, tool_leak_rate=ns.tool_leak_rate,
        autotune_s=12.6 if ns.autotune_s is None else ns.autotune_s, boot_s=ns.boot_s,
        faults=faults, server_args=server_args, nice=ns.nice, log_format=ns.log_format,
        record_requests=ns.record_requests, answer_tokens=answer_tokens, decode_log_interval=ns.decode_log_interval)
