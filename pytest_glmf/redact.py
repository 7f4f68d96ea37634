"""Secrets never reach a log, a header, a result file or a report.

A lane's environment is passed to the server as it is; everything the plugin *writes* goes through
`Redactor`: values of variables whose names look secret are replaced by `***` wherever they
appear, and `--flag VALUE` / `FLAG=VALUE` pairs with such names are masked in command lines. A name
looks secret when one of its words (split at `_`, `-`, `.`) is, or ends with, TOKEN or KEY, or is
SECRET, PASSWORD, PASSWD, CREDENTIAL(S): HF_TOKEN, OPENAI_API_KEY, --api-key, --hf-token, apikey.
Counts and tools named after tokens are not secrets: `--max-total-tokens 32768` (SGLang prints that
number in its own boot log), `tokenizer_path`, `max_prefill_tokens` stay readable.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_NAME = re.compile(r"(?:^|[_.\-])(?:[a-z]*token|[a-z]*key|secret|password|passwd|credentials?)(?:$|[_.\-])",
                         re.IGNORECASE)
MASK = "***"
_MIN_SECRET_LEN = 4  # shorter values ("1", "yes") would mask ordinary text everywhere


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name.lstrip("-")))


class Redactor:
    def __init__(self, env: Mapping[str, str] | None = None, extra_values: Iterable[str] = ()):
        values = {v for k, v in (env or {}).items() if is_secret_name(k) and v}
        values |= {v for v in extra_values if v}
        # Longest first so a secret containing another is masked whole.
        self.values = sorted((v for v in values if len(v) >= _MIN_SECRET_LEN), key=len, reverse=True)

    @classmethod
    def from_environment(cls, lane_env: Mapping[str, str] | None = None,
                         argv: Iterable[str] = ()) -> "Redactor":
        """Secrets of the process env, the lane's env, and values of secret-named flags in argv
        (`--api-key sk-...`: the engine may echo it in its own server_args dump)."""
        return cls({**os.environ, **(lane_env or {})}, secret_flag_values(list(argv)))

    def text(self, s: str) -> str:
        for v in self.values:
            if v in s:
                s = s.replace(v, MASK)
        return s

    def argv(self, argv: list[str]) -> list[str]:
        out, mask_next = [], False
        for a in argv:
            if mask_next:
                out.append(MASK)
                mask_next = False
                continue
            if a.startswith("-") and "=" in a and is_secret_name(a.split("=", 1)[0]):
                out.append(a.split("=", 1)[0] + "=" + MASK)
            elif a.startswith("--") and is_secret_name(a):
                out.append(a)
                mask_next = True
            else:
                out.append(self.text(a))
        return out

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        return {k: (MASK if is_secret_name(k) else self.text(v)) for k, v in env.items()}

    def data(self, obj: Any) -> Any:
        """Deep copy of JSON-like data with secrets masked (values of secret-named keys too)."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {k: (MASK if isinstance(k, str) and is_secret_name(k) and isinstance(v, str) and v
                        else self.data(v)) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.data(v) for v in obj]
        return obj


def secret_flag_values(argv: list[str]) -> list[str]:
    """Values of `--api-key X` / `--hf-token=X` style flags (secret-looking flag names)."""
    out = []
    for i, a in enumerate(argv):
        if a.startswith("--") and "=" in a and is_secret_name(a.split("=", 1)[0]):
            out.append(a.split("=", 1)[1])
        elif a.startswith("--") and is_secret_name(a) and i + 1 < len(argv):
            out.append(argv[i + 1])
    return out
