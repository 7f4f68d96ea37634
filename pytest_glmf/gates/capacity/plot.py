"""The frontier as a PNG: users at the service level against context per user, the KV pool's and
the seats' bounds beside it (matplotlib: `pip install 'pytest-glmf[plot]'`)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_glmf.gates.capacity.measure import FrontierResult
from pytest_glmf.gates.capacity.table import frontier_rows


def plot_frontier(frontier: FrontierResult, out: str | Path, *, title: str = "",
                  facts: Mapping[str, Any] | None = None) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install 'pytest-glmf[plot]'") from None
    rows = frontier_rows(frontier, facts)
    xs = [r["context_tokens"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    measured = [(r["context_tokens"], r["users"]) for r in rows if r["users"] is not None]
    if measured:
        ax.plot(*zip(*measured), "o-", color="tab:blue", label="users at the service level (measured)")
        for x, y in measured:
            ax.annotate(str(y), (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    kv = [(r["context_tokens"], max(r["kv_bound_users"], 0.5)) for r in rows if r["kv_bound_users"] is not None]
    if kv:
        ax.plot(*zip(*kv), "s--", color="tab:orange", label=f"KV pool bound ({frontier.kv_tokens:,} tokens)")
    if frontier.seats:
        ax.axhline(frontier.seats, color="tab:gray", linestyle=":", label=f"seats ({frontier.seats})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x / 1024:.3g}K" for x in xs])
    ax.set_xlabel("context per user (prompt tokens)")
    ax.set_ylabel("concurrent users")
    ax.set_title(title or f"capacity frontier: {frontier.slo.describe()}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
