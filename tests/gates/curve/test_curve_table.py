"""The curve's table: the recipe's columns, a flag under the table, 120 columns."""
from __future__ import annotations

from pytest_glmf.gates.curve.table import curve_table


def test_curve_table_pins_the_recipe_columns():
    row = {"users": 16, "seats": 7, "aggregate_tok_s": 503.0, "per_user_tok_s": 70.2, "per_user_tok_s_p5": 60.0,
           "ttft_p50_s": 0.37, "ttft_p95_s": 0.52, "spread_pct": 1.5, "valid": True,
           "seat": {"notes": ["16 clients sharing 7 seats"]}, "memory": {"notes": []}, "per_run": []}
    table = curve_table([row]).splitlines()
    assert table[0].split(" | ")[:7] == ["users", "aggregate tok/s", "per-user tok/s", "p5 tok/s", "TTFT p50 s",
                                         "TTFT p95 s", "spread"]
    # 124 columns with the flag in its cell: the flag goes under the table (fits 120 columns)
    assert table[2].endswith("| 7 (shared) | note 1") and table[3] == "note 1: 16 clients sharing 7 seats"
    assert max(map(len, table)) <= 120
