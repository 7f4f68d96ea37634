"""The curve's prompts: the recipe's briefing in rotated variants, or the user's file; fitted to N tokens of the served model's own tokenizer."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_glmf.data import read_text as read_data_file


def load_prompt_variants(ref: str | Path | None = None) -> list[str]:
    """The curve's prompts: variants of one briefing file that rotate its '## ' sections (so no two
    share a prefix), the task paragraph last. `ref`: a path, or a packaged fixture by name (e.g.
    "briefing_history_essay.md"); None: the recipe's workload, a ~2,400-token briefing and a
    400-word synthesis task (pytest_glmf/data/briefing.md)."""
    return prompts_from_text(read_data_file(ref, "briefing.md"))


def count_tokens(base_url: str, text: str, model: str | None = None, timeout_s: float = 10.0) -> int | None:
    """The server's own token count of `text` (SGLang and vLLM `/tokenize`); None when the server
    has no tokenize endpoint."""
    import httpx

    body: dict[str, Any] = {"prompt": text, "add_special_tokens": False}
    if model:
        body["model"] = model
    try:
        r = httpx.post(base_url.rstrip("/") + "/tokenize", json=body, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    data = r.json()
    count = data.get("count")
    return int(count) if isinstance(count, int) else len(data.get("tokens") or []) or None


def fit_prompts(base_url: str, prompts: list[str], target_tokens: int,
                model: str | None = None) -> tuple[list[str], list[int]]:
    """Trim each prompt's body (never its last paragraph: the task) to at most `target_tokens`
    of the server's own tokenizer, so "a 2,400-token briefing" means 2,400 tokens on whichever
    tokenizer the lane serves. Raises ValueError when the server cannot count tokens."""
    fitted, counts = [], []
    for prompt in prompts:
        n = count_tokens(base_url, prompt, model)
        if n is None:
            raise ValueError(f"{base_url} has no /tokenize endpoint: settings.prompt_tokens needs one "
                             "(drop the setting to send the prompt file as it is)")
        if n <= target_tokens:
            fitted.append(prompt)
            counts.append(n)
            continue
        body, _, task = prompt.rpartition("\n\n")
        words = body.split(" ")
        lo, hi, best = 0, len(words), (task, count_tokens(base_url, task, model) or 0)
        while lo <= hi:   # the longest body prefix (in words) that keeps the whole prompt within target
            mid = (lo + hi) // 2
            cand = " ".join(words[:mid]) + "\n\n" + task
            c = count_tokens(base_url, cand, model) or 0
            if c <= target_tokens:
                best, lo = (cand, c), mid + 1
            else:
                hi = mid - 1
        fitted.append(best[0])
        counts.append(best[1])
    return fitted, counts


def prompts_from_text(text: str) -> list[str]:
    """Split a briefing file into variants: sections start with '## '; the last one is the task and
    stays last. A file without sections is one prompt."""
    parts = [p.strip() for p in ("\n" + text).split("\n## ") if p.strip()]
    if len(parts) < 3:
        return [text.strip()]
    head, sections, task = parts[0], parts[1:-1], parts[-1]
    head = head.lstrip("# ").strip()
    out = []
    for shift in range(len(sections)):
        order = sections[shift:] + sections[:shift]
        out.append("\n\n".join([head] + [f"## {s}" for s in order] + [f"## {task}"]))
    return out
