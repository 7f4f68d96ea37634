"""Which engine entry point a command line starts, and which lane key produced each of its flags.

Entry points (the engines' own): SGLang `python -m sglang.launch_server FLAGS` or `sglang serve
FLAGS` (console script `sglang = sglang.cli.main:main`); vLLM `python -m
vllm.entrypoints.openai.api_server FLAGS` or `vllm serve FLAGS`. Lane keys follow
config/lanes.py `build_server_argv`: a flag written in `extra` (or a hand-written `command`) is
the user's own word; the others come from the lane's fields.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.config.lanes import SGLANG_CUDA_GRAPH_MAX_BS_FLAG

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig

MODULES = {"sglang": "sglang.launch_server", "vllm": "vllm.entrypoints.openai.api_server"}

# flags build_server_argv writes from a lane's fields, per engine
BUILT = {
    "sglang": {"--model-path": "model", "--speculative-algorithm": "spec", "--speculative-draft-model-path": "draft",
               "--kv-cache-dtype": "kv", "--mem-fraction-static": "mem", "--context-length": "ctx",
               "--host": "the launcher (host)", "--port": "port"},
    "vllm": {"--model": "model", "--speculative-config": "spec (and draft)", "--kv-cache-dtype": "kv",
             "--gpu-memory-utilization": "mem", "--max-model-len": "ctx", "--host": "the launcher (host)",
             "--port": "port"},
}


def entry_point(engine: str, argv: list[str]) -> tuple[str, list[str]] | None:
    """(interpreter, the engine's flags), or None when argv starts no known entry point of `engine`."""
    module = MODULES.get(engine)
    if module is None or not argv:
        return None
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] == module:
        return argv[0], list(argv[3:])
    if len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == engine and argv[1] == "serve":
        return "python3", list(argv[2:])
    return None


def flag_sources(lane: "LaneConfig", argv: list[str]) -> dict[str, str]:
    """flag -> the lane key it came from ("extra", "maxbs", "command", ...)."""
    if lane.command:
        return {tok.split("=", 1)[0]: "command" for tok in argv if tok.startswith("-")}

    out = dict(BUILT.get(lane.engine, {}))
    graph_flag = lane.cuda_graph_max_bs_flag or (SGLANG_CUDA_GRAPH_MAX_BS_FLAG if lane.engine == "sglang" else None)
    if graph_flag:
        out[graph_flag] = "cuda_graph_max_bs_flag" if lane.cuda_graph_max_bs_flag else "maxbs"
    for tok in lane.extra:
        if tok.startswith("-"):
            out[tok.split("=", 1)[0]] = "extra"
    return out
