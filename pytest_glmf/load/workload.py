"""The curve's prompts: the recipe's briefing in rotated variants, or the user's file; fitted to N tokens of the served model's own tokenizer."""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

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
                model: str | None = None, *, lengthen: bool = False) -> tuple[list[str], list[int]]:
    """Trim each prompt's body (never its last paragraph: the task) to at most `target_tokens`
    of the server's own tokenizer, so "a 2,400-token briefing" means 2,400 tokens on whichever
    tokenizer the lane serves. With `lengthen`, a shorter prompt's body is first repeated past
    the target (a long context made of the same briefing). Raises ValueError when the server
    cannot count tokens."""
    def count(text: str) -> int:
        n = count_tokens(base_url, text, model)
        if n is None:
            raise ValueError(f"{base_url} has no /tokenize endpoint: settings.prompt_tokens needs one "
                             "(drop the setting to send the prompt file as it is)")
        return n

    fitted, counts = [], []
    for prompt in prompts:
        n = count(prompt)
        body, _, task = prompt.rpartition("\n\n")
        if lengthen and n < target_tokens and body:
            body = "\n\n".join([body] * math.ceil(target_tokens / max(1, n) * 1.05))
            prompt = body + "\n\n" + task
            n = count(prompt)
        if n <= target_tokens:
            fitted.append(prompt)
            counts.append(n)
            continue
        text, c = _longest_fitting(body.split(" "), task, target_tokens, n, count)
        fitted.append(text)
        counts.append(c)
    return fitted, counts


def _longest_fitting(words: list[str], task: str, target: int, full_count: int,
                     count: Callable[[str], int]) -> tuple[str, int]:
    """The longest prefix of `words` (then the task) within `target` tokens. Token counts grow
    almost linearly with words, so each guess interpolates between the longest prefix known to
    fit and the shortest known not to (a few /tokenize calls for 2K or 60K tokens alike); a guess
    that lands on the same side twice running is replaced by the midpoint, so it always ends.
    A prefix within 0.1 % (at least 2 tokens) of the target is taken as it is."""
    good, good_c, best = 0, count(task), task          # words[:good] + task fits
    bad, bad_c = len(words), full_count                # words[:bad] + task does not
    sides: list[bool] = []                             # whether each guess fitted
    slack = max(2, target // 1000)
    while bad - good > 1 and target - good_c > slack:
        mid = good + int((target - good_c) * (bad - good) / max(1, bad_c - good_c))
        if len(sides) >= 2 and sides[-1] == sides[-2]:
            mid = (good + bad) // 2
        mid = min(max(mid, good + 1), bad - 1)
        cand = " ".join(words[:mid]) + "\n\n" + task
        c = count(cand)
        sides.append(c <= target)
        if sides[-1]:
            good, good_c, best = mid, c, cand
        else:
            bad, bad_c = mid, c
    return best, good_c


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


# an estimate not fitted with /tokenize (~4 characters a token) refuses only a request this far over
ESTIMATE_SLACK = 1.10
LONGER_CONTEXT = "serve a longer context (vLLM --max-model-len, SGLang --context-length)"


class ContextTooShort(ValueError):
    """A request of the workload cannot fit the server's context: refused before anything is sent.
    `str()` names the gate's settings as a thresholds file sets them; `text("flags")` as a shell
    sets them (`--prompt-tokens`/`--max-tokens`). `gate`: whose settings (a gate measuring through
    run_row names itself by setting it on the way up)."""

    def __init__(self, gate: str, prompt_tokens: int, max_tokens: int, context: int, fitted: bool):
        self.gate, self.prompt_tokens, self.max_tokens = gate, prompt_tokens, max_tokens
        self.context, self.fitted = context, fitted
        super().__init__(gate, prompt_tokens, max_tokens, context, fitted)

    def __str__(self) -> str:
        return self.text()

    def text(self, names: str = "settings") -> str:
        fix = ("--prompt-tokens/--max-tokens" if names == "flags"
               else f"{self.gate}.settings.prompt_tokens / max_tokens (thresholds.yaml)")
        how = "counted with /tokenize" if self.fitted else "estimated at ~4 characters a token"
        return (f"{self.gate}: a request needs ~{self.prompt_tokens + self.max_tokens:,} tokens (prompt "
                f"~{self.prompt_tokens:,}, {how}, + max_tokens {self.max_tokens:,}) but the server's context is "
                f"{self.context:,}: lower {fix}, or {LONGER_CONTEXT}")


def context_check(prompt_tokens: int | None, estimated_tokens: int, max_tokens: int, context: Any,
                  gate: str = "curve") -> ContextTooShort | None:
    """The refusal of a workload whose requests cannot fit the server's `context` (the boot facts'
    context_len; None: unknown, nothing refused). `prompt_tokens`: the longest prompt counted by
    the server's /tokenize (a floor: the session line and the chat template only add), refused as
    soon as it and max_tokens exceed the context (SGLang refuses past it; vLLM refuses a prompt
    past it); else the estimate, refused only when over by more than ESTIMATE_SLACK."""
    if not isinstance(context, int) or isinstance(context, bool) or context < 1:
        return None
    fitted = prompt_tokens is not None
    tokens = prompt_tokens if prompt_tokens is not None else estimated_tokens
    limit = context if fitted else context * ESTIMATE_SLACK
    if tokens + max_tokens <= limit:
        return None
    return ContextTooShort(gate, tokens, max_tokens, context, fitted)
