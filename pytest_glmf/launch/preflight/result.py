"""A preflight verdict: what the engine's own parser said about a lane's command line."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Preflight:
    status: str                                   # "ok" | "rejected" | "not run"
    why: str | None = None                        # not run: the reason
    engine: str | None = None
    version: str | None = None
    where: str | None = None                      # "image X" | "executable Y"
    cached: bool = False
    seconds: float | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)
    abbreviations: list[list[str]] = field(default_factory=list)
    options: list[str] = field(default_factory=list)   # every flag the parser knows (the served surface)

    def to_dict(self, with_options: bool = False) -> dict[str, Any]:
        out = asdict(self)
        if not with_options:
            out["options"] = len(self.options)
        return out
