"""The drift prompt set: chat prompts with ids and classes, and the hashes that tie a reference to them."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_glmf.data import read_text as read_data_file


@dataclass
class Prompt:
    id: str
    messages: list[dict[str, Any]]
    cls: str = ""


def load_chat_prompts(path: str | Path | None = None, n: int | None = None) -> list[Prompt]:
    """The drift prompt set as chat prompts with ids and classes (default: the packaged
    pytest_glmf/data/drift_prompts.json), its first `n`."""
    text = read_data_file(path, "drift_prompts.json")
    data = json.loads(text)
    prompts = [Prompt(p["id"], p["messages"], p.get("class", "")) for p in data["prompts"]]
    if n is not None:
        if n < 1 or n > len(prompts):
            raise ValueError(f"prompts {n}: the prompt set has {len(prompts)} prompts")
        prompts = prompts[:n]
    return prompts


def content_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def prompt_set_hash(prompts: Sequence[Prompt]) -> str:
    return content_hash([[p.id, p.messages] for p in prompts])


def tokenizer_fingerprint(prompt_ids: Sequence[Sequence[int]]) -> str:
    """The templated ids of the whole prompt set: equal ids <=> same tokenizer AND chat template
    as far as this prompt set can tell."""
    return content_hash([list(x) for x in prompt_ids])[:16]
