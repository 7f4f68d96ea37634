"""`sgl_kernel.speculative` (imported by SGLang's `kernels/ops/speculative/reconstruct_tree.py` on
non-CUDA hosts): NGRAM speculation only, which does not run on the CPU stand-in."""
from sgl_kernel import _speculative_only

reconstruct_indices_from_tree_mask = _speculative_only("speculative.reconstruct_indices_from_tree_mask")
