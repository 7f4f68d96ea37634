"""The one place that loads matplotlib (an optional extra) and writes a figure as PNG, for the
report's curve plot and the history's trend plot."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend; RuntimeError saying how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install 'pytest-glmf[plot]'") from None
    return plt


def save_png(fig: Any, out: str | Path) -> Path:
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    pyplot().close(fig)
    return out
