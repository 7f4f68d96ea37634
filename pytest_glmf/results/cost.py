"""What a verdict cost: each gate's wall time and the server's GPU time, in the result file (`cost`).

    GPU time = the wall time the server held its GPUs (from the launch, boot included, until the
               result file was written) x the number of GPUs it held; an attached server was booted
               elsewhere: its time counts from the attach (`attached`, no `boot_s`)
    a gate's GPU time = the wall time of its tests (setup, call and teardown, summed) x the same count

The GPU count comes from the lane (`gpus: N` or a list of devices, `CUDA_VISIBLE_DEVICES` in its
env, the engine's tensor/data-parallel flags) and else from the provenance (the host's GPUs by
nvidia-smi); a simulator lane, or a host without GPUs, holds none, and its GPU time is 0. `gpus_from`
says which. A gate's share counts the GPUs as held while its tests ran, whether they were busy or not:
that is what a rented GPU bills.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_glmf.text import fmt

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig

# (flag spellings, what the count multiplies): vLLM's and SGLang's parallel sizes
TP_FLAGS = ("--tensor-parallel-size", "-tp", "--tp-size", "--tp")
DP_FLAGS = ("--data-parallel-size", "-dp", "--dp-size", "--dp")
PP_FLAGS = ("--pipeline-parallel-size", "-pp", "--pp-size")


def _flag_int(argv: Sequence[str], names: Sequence[str]) -> int | None:
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in names:
            text = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if text.isdigit():
                return int(text)
    return None


def server_gpus(lane: "LaneConfig", provenance: Mapping[str, Any]) -> tuple[int, str]:
    """How many GPUs the lane's server held, and where that number came from."""
    if lane.launcher == "sim":
        return 0, "the simulator holds no GPU"
    gpus = lane.gpus
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        return gpus, "lane gpus"
    if isinstance(gpus, list):
        return len(gpus), "lane gpus (devices)"
    visible = (lane.env or {}).get("CUDA_VISIBLE_DEVICES")
    if isinstance(visible, str) and visible.strip():
        return len([d for d in visible.split(",") if d.strip()]), "lane env CUDA_VISIBLE_DEVICES"
    argv = [str(a) for a in provenance.get("argv") or []]
    sizes = [_flag_int(argv, names) for names in (TP_FLAGS, DP_FLAGS, PP_FLAGS)]
    if any(sizes):
        n = 1
        for s in sizes:
            n *= s or 1
        return n, "the engine's parallel-size flags"
    host = provenance.get("gpu_count")
    if isinstance(host, int) and host > 0:
        return host, "the host's GPUs (nvidia-smi)"
    return 0, "no GPU seen (nvidia-smi)"


def cost_block(lane: "LaneConfig", provenance: Mapping[str, Any], gate_wall_s: Mapping[str, float],
               started: float | None, ready: float | None, until: float) -> dict[str, Any]:
    """The result file's `cost`: the server's held time (boot included) and GPU time, and per gate
    its wall time and GPU time. `started`/`ready`: when the launch began and the server answered
    (time.time(); None: no server was launched by this session)."""
    gpus, gpus_from = server_gpus(lane, provenance)
    held = max(0.0, until - started) if started is not None else None
    attached = lane.launcher == "attach"     # booted elsewhere: its boot is not this session's
    out: dict[str, Any] = {
        "gpus": gpus, "gpus_from": gpus_from, "server_held_s": held, "attached": attached,
        "boot_s": (ready - started) if started is not None and ready is not None and not attached else None,
        "server_gpu_s": held * gpus if held is not None else None,
        "gates": {gate: {"wall_s": wall, "gpu_s": wall * gpus} for gate, wall in gate_wall_s.items()},
    }
    return out


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.2f} GPU min"


def cost_lines(cost: Mapping[str, Any] | None) -> list[str]:
    """The terminal summary's lines for a result file's `cost` (none when it has none)."""
    if not isinstance(cost, Mapping):
        return []
    gpus, held = cost.get("gpus") or 0, cost.get("server_held_s")
    if held is None:
        head = "What the verdict cost: no server launched by this session"
    else:
        boot = ("attached: boot not seen" if cost.get("attached")
                else f"boot {fmt(cost.get('boot_s'))} s included")
        head = (f"What the verdict cost: {_minutes(cost.get('server_gpu_s'))}, {gpus} GPU(s) x {fmt(held)} s held "
                f"({boot}; GPUs: {cost.get('gpus_from')})")
    gates = cost.get("gates") or {}
    parts = [f"{gate} {fmt(g.get('wall_s'))} s ({_minutes(g.get('gpu_s'))})" for gate, g in gates.items()
             if isinstance(g, Mapping)]
    return [head] + (["  per gate: " + "; ".join(parts)] if parts else [])
