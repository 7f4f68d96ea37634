"""The frontier as a PNG: users at the service level against context per user, the KV pool's and
the seats' bounds beside it (matplotlib: `pip install 'pytest-glmf[plot]'`)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_glmf.gates.capacity.measure import FrontierResult
from pytest_glmf.gates.capacity.table import frontier_rows
from pytest_glmf.results.plotting import pyplot, save_png


def plot_frontier(frontier: FrontierResult, out: str | Path, *, title: str = "",
                  facts: Mapping[str, Any] | None = None) -> Path:
    """Log-log: measured users per context, the KV pool's bound (squares, dashed), the seats (dotted)."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    rows = frontier_rows(frontier, facts)
    xs = [r["context_tokens"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    measured = [(r["context_tokens"], r["users"]) for r in rows if r["users"]]
    if measured:
        ax.plot(*zip(*measured), "o-", color="tab:blue", label="users at the service level (measured)")
        for x, y in measured:
            ax.annotate(str(y), (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    kv = [(r["context_tokens"], max(r["kv_bound_users"], 0.5)) for r in rows if r["kv_bound_users"] is not None]
    if kv:
        ax.plot(*zip(*kv), "s--", color="tab:orange", label=f"KV pool bound ({frontier.kv_tokens:,} tokens)")
        for x, y in kv:
            ax.annotate(f"{y:g}", (x, y), textcoords="offset points", xytext=(8, 2), fontsize=8, color="tab:orange")
    if frontier.seats:
        ax.axhline(frontier.seats, color="tab:gray", linestyle=":", label=f"seats ({frontier.seats})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:,}" for x in xs])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_xlabel("context per user (prompt tokens)")
    ax.set_ylabel("concurrent users")
    ax.set_title((title + "\n" if title else "") + frontier.slo.describe(), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_png(fig, path)
