"""Fake NVFP4 quantization of a float32 model dir: the two real-engine candidates (run by ./setup).

The recipe compares a mixed-precision NVIDIA checkpoint (MLP/experts in NVFP4, attention and
embeddings kept in higher precision) with a community quant that quantizes more. We cannot run
NVFP4 kernels on a CPU, so we make look-alikes: weights are rounded to exactly the values an NVFP4
checkpoint can hold, then stored back in float32, and vLLM serves them like any float32 model.
The numerics of the weights match NVFP4 (up to one float32 rounding of the final product); the
arithmetic of the matmuls does not (float32 here, FP4 tensor cores there).

NVFP4 as we implement it (NVIDIA's format, as used by TensorRT Model Optimizer checkpoints):
- blocks of 16 consecutive elements along the input dimension of a weight [out, in];
- each element is FP4 E2M1: sign and one of {0, 0.5, 1, 1.5, 2, 3, 4, 6}; round to nearest,
  ties to even (the value with mantissa bit 0);
- each block has a scale stored in FP8 E4M3 (torch.float8_e4m3fn; max 448), and the tensor has one
  float32 global scale `g = amax(|W|) / (6 * 448)`, so block scale = E4M3(block_amax / 6 / g);
- dequantized weight = fp4 * e4m3_scale * g.

Schemes:
- `nvfp4-mlp`   (lane real-candidate): mlp.gate_proj / up_proj / down_proj quantized; attention
  projections, norms, embeddings and the (tied) head left as they are. The NVIDIA-mix look-alike.
- `nvfp4-all`   (lane real-candidate-all): every linear projection, attention included; norms,
  embeddings and head still untouched (a tied head is the embedding, and quantizing it would make
  "everything" also mean "the vocabulary", which no community quant of the recipe does either).

Writes `glmf_fakequant.json` (scheme, tensors touched, relative error) next to the weights.
Run with the real-engine venv's python: `python fakequant.py --src DIR --out DIR --scheme S`.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

BLOCK = 16
E4M3_MAX = 448.0
FP4_MAX = 6.0
FP4_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)   # index parity = mantissa bit (ties to even)

SCHEMES = {
    "nvfp4-mlp": re.compile(r"\.mlp\.(gate_proj|up_proj|down_proj)\.weight$"),
    "nvfp4-all": re.compile(r"\.(mlp\.(gate_proj|up_proj|down_proj)|self_attn\.(q_proj|k_proj|v_proj|o_proj))\.weight$"),
}


def round_fp4_e2m1(x):
    """Round |x| <= 6 (already scaled) to the nearest E2M1 value, ties to even; keeps the sign."""
    import torch

    grid = torch.tensor(FP4_GRID, dtype=x.dtype)
    mag = x.abs().clamp(max=FP4_MAX)
    hi = torch.bucketize(mag, grid).clamp(max=len(FP4_GRID) - 1)   # first grid value >= mag
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = mag - grid[lo], grid[hi] - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    return torch.where(pick_hi, grid[hi], grid[lo]) * x.sign()


def nvfp4_fake_quant(w):
    """Return W rounded to NVFP4-representable values (float32), see the module docstring."""
    import torch

    out_f, in_f = w.shape
    if in_f % BLOCK:
        raise ValueError(f"input dim {in_f} is not a multiple of the NVFP4 block {BLOCK}")
    w32 = w.to(torch.float32)
    amax = w32.abs().max()
    if amax == 0:
        return w32.clone()
    g = amax / (FP4_MAX * E4M3_MAX)
    blocks = w32.reshape(out_f, in_f // BLOCK, BLOCK)
    block_amax = blocks.abs().amax(dim=-1, keepdim=True)
    scale = (block_amax / FP4_MAX / g).to(torch.float8_e4m3fn).to(torch.float32)
    # A block whose scale underflows E4M3 to 0 holds values far below the tensor's amax: it
    # becomes zeros, as in a real NVFP4 checkpoint.
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = round_fp4_e2m1(blocks / (safe * g))
    deq = torch.where(scale > 0, q * scale * g, torch.zeros_like(q))
    return deq.reshape(out_f, in_f)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--scheme", required=True, choices=sorted(SCHEMES))
    args = ap.parse_args(argv)

    from safetensors.torch import load_file, save_file

    t0 = time.monotonic()
    pattern = SCHEMES[args.scheme]
    tmp = args.out.with_name(args.out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(args.src, tmp, ignore=shutil.ignore_patterns("*.safetensors", "glmf_fakequant.json"))
    touched, kept, num, den = [], [], 0.0, 0.0
    for shard in sorted(args.src.glob("*.safetensors")):
        tensors = load_file(shard)
        for name, w in tensors.items():
            if not pattern.search(name):
                kept.append(name)
                continue
            deq = nvfp4_fake_quant(w)
            num += float(((deq - w.float()) ** 2).sum())
            den += float((w.float() ** 2).sum())
            tensors[name] = deq.to(w.dtype).contiguous()
            touched.append(name)
        save_file(tensors, tmp / shard.name, metadata={"format": "pt"})
    if not touched:
        print(f"fakequant: scheme {args.scheme} matched no tensor in {args.src}", file=sys.stderr)
        return 1
    rel_rmse = (num / den) ** 0.5 if den else 0.0
    report = {
        "scheme": args.scheme, "format": "NVFP4 look-alike: E2M1 values, E4M3 scale per 16, fp32 global scale",
        "block": BLOCK, "tensors_quantized": len(touched), "tensors_kept": len(kept),
        "relative_rmse_quantized": rel_rmse, "quantized": touched,
    }
    (tmp / "glmf_fakequant.json").write_text(json.dumps(report, indent=2))
    shutil.rmtree(args.out, ignore_errors=True)
    tmp.rename(args.out)
    print(
        f"fakequant: {args.scheme}: {len(touched)} tensors quantized, {len(kept)} kept, "
        f"relative RMSE {rel_rmse:.4f} -> {args.out} ({time.monotonic() - t0:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
