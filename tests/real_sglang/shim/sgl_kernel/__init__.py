"""A stand-in for `sgl_kernel`'s CPU build, for the running-SGLang CI stage only (test code; never in
the wheel, never on a user's path).

Why: with `SGLANG_USE_CPU_ENGINE=1` SGLang 0.5.23 imports a few `*_cpu` bookkeeping ops from the CPU
build of `sgl_kernel` unconditionally (`srt/mem_cache/allocation.py`, `kernels/ops/kvcache/cache_move.py`,
`kernels/ops/speculative/{cache_locs,eagle,multi_layer_eagle,spec_tree}.py`). That build is not on PyPI:
`sglang-kernel`/`sgl-kernel` wheels are CUDA builds (research/sglang_cpu.md section 4). The math layers
do not need it: without AMX every layer's `forward_cpu` falls back to `forward_native`.

Each op below is the meaning of the Triton kernel SGLang runs on a GPU for the same call, in plain
torch (the kernel's file is named on each). The ones only speculative decoding calls raise: that path
does not run on the CPU anyway (the `torch_native` backend has no TARGET_VERIFY), and an op that is
called must never be silently approximated.
"""
from __future__ import annotations

import ctypes

import torch

__version__ = "0.0.0+glmf-cpu-stand-in"


def _spans(start: torch.Tensor, end: torch.Tensor) -> list[tuple[int, int]]:
    return list(zip(start.tolist(), end.tolist()))


def assign_req_to_token_pool_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor,
                                 out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """`srt/mem_cache/allocation.py` `assign_req_to_token_pool`: request i's new KV slots
    out_cache_loc[sum of earlier lengths:...] go to req_to_token[req_pool_indices[i], start:end]."""
    offset = 0
    for row, (start, end) in zip(req_pool_indices.tolist(), _spans(start_offset, end_offset)):
        n = end - start
        if n > 0:
            req_to_token[row, start:end] = out_cache_loc[offset:offset + n].to(req_to_token.dtype)
        offset += n


def assign_extend_cache_locs_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor,
                                 out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """`kernels/ops/speculative/cache_locs.py` `assign_extend_cache_locs`: the inverse gather,
    out_cache_loc[sum of earlier lengths:...] = req_to_token[req_pool_indices[i], start:end]."""
    offset = 0
    for row, (start, end) in zip(req_pool_indices.tolist(), _spans(start_offset, end_offset)):
        n = end - start
        if n > 0:
            out_cache_loc[offset:offset + n] = req_to_token[row, start:end].to(out_cache_loc.dtype)
        offset += n


def copy_all_layer_kv_cache_cpu(data_ptrs: torch.Tensor, strides: torch.Tensor,
                                tgt_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
    """`kernels/ops/kvcache/cache_move.py` `copy_all_layer_kv_cache_tiled`: for every layer buffer
    (a raw address and its bytes per token slot), slot src_loc[j] is copied to tgt_loc[j]. All
    sources are read before any target is written, as the kernel's load-then-store tile does, so
    overlapping moves are safe."""
    src, tgt = src_loc.tolist(), tgt_loc.tolist()
    for base, stride in zip(data_ptrs.tolist(), strides.tolist()):
        rows = [ctypes.string_at(base + s * stride, stride) for s in src]
        for t, row in zip(tgt, rows):
            ctypes.memmove(base + t * stride, row, stride)


def _speculative_only(name: str):
    def op(*args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            f"sgl_kernel.{name}: speculative decoding does not run on the CPU stand-in "
            "(tests/real_sglang/shim; research/sglang_cpu.md section 6)")
    op.__name__ = name
    return op


assign_draft_cache_locs_contiguous_cpu = _speculative_only("assign_draft_cache_locs_contiguous_cpu")
fill_bonus_tokens_cpu = _speculative_only("fill_bonus_tokens_cpu")
fill_accept_out_cache_loc_cpu = _speculative_only("fill_accept_out_cache_loc_cpu")
rotate_input_ids_cpu = _speculative_only("rotate_input_ids_cpu")
build_tree_kernel_efficient_cpu = _speculative_only("build_tree_kernel_efficient_cpu")
verify_tree_greedy_cpu = _speculative_only("verify_tree_greedy_cpu")
