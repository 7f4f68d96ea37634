"""Boot-gate checks that need more than a bound: the KV pool dtypes, per pool layout.

`kv_pool_dtypes` in a thresholds file lists the dtypes the lane's KV pools must have (the recipe's
`[fp8_e4m3, bfloat16]`: "FP8 KV is half true", the DSA indexer fp8 and the MLA pool bf16). How the
log shows them depends on the SGLang generation (pytest_glmf/engine/logformats.py):
- two DSA pool lines (the recipe's nightly) or one line per pool (other models): the set of
  printed dtypes must equal the expected set;
- one DSA pool line (0.5.23: MLA latent and indexer keys in one `DSATokenToKVPool`, only the pool's
  own dtype printed): the printed dtype must be one of the expected ones; the split cannot be
  read from this log, and the failure says so.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_glmf.engine import logformats as lf

# Engines spell the same dtype several ways (torch names, recipe flags): compare normalized.
_DTYPE_ALIASES = {"float8_e4m3fn": "fp8_e4m3", "float8_e4m3": "fp8_e4m3", "fp8": "fp8_e4m3",
                  "float8_e5m2": "fp8_e5m2", "bf16": "bfloat16", "fp16": "float16", "half": "float16",
                  "fp32": "float32", "float": "float32"}


def normalize_dtype(dtype: Any) -> str:
    name = str(dtype).strip().lower().removeprefix("torch.")
    return _DTYPE_ALIASES.get(name, name)


def kv_pool_dtype_mismatch(pools: list[dict[str, Any]], layout: str | None,
                           expected: Iterable[Any]) -> dict[str, str] | None:
    """None when the pools meet `expected`; else the table row's cells: `measured`, `expected` and
    `layout` (the sentence naming the layout the log shows)."""
    seen = [normalize_dtype(p.get("dtype")) for p in pools]
    want = sorted({normalize_dtype(d) for d in expected})
    row = {"measured": ", ".join(seen) or "(no KV pool line in the boot log)", "expected": ", ".join(want),
           "layout": "layout: " + lf.LAYOUT_TEXT.get(layout or "", "no KV pool line")}
    if layout == lf.LAYOUT_ONE_POOL:
        row["expected"] = "one of " + row["expected"]
        return None if len(seen) == 1 and seen[0] in want else row
    return None if sorted(set(seen)) == want else row
