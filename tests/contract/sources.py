"""Format strings as written in the released source: every expression becomes `{}`.

`skeletons(path)` walks a Python file's AST and yields (line, skeleton) for every f-string and every
string literal in it (%-format specifiers become `{}` too) (adjacent literals are one node after parsing, as Python joins them):

    f"KV Cache {'VA' if x else 'is allocated'}. dtype: {self.dtype}, #tokens: {n}"
        -> "KV Cache {}. dtype: {}, #tokens: {}"
    "max_running_requests is capped to %d by the mamba state "   (implicit concatenation)
        -> "max_running_requests is capped to {} by the mamba state ..."

Literal text inside a replacement field (e.g. the two branches above) is not kept: the skeleton
is what every rendering of the line shares.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

_PERCENT = re.compile(r"%[-+ 0#]*\d*(?:\.\d+)?[sdifrgeEx]")


def _joined(node: ast.JoinedStr) -> str:
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            out.append(part.value.replace("{", "{{").replace("}", "}}"))
        else:
            out.append("{}")
    return "".join(out)


def skeletons(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, _joined(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, _PERCENT.sub("{}", node.value.replace("{", "{{").replace("}", "}}"))


def find(path: Path, anchor: str) -> list[tuple[int, str]]:
    """The skeletons of `path` that contain `anchor` (literal text)."""
    return [(line, sk) for line, sk in skeletons(path) if anchor in sk]


def skeleton_regex(skeleton: str) -> re.Pattern[str]:
    """A line rendered from the skeleton matches this (each `{}` is any text)."""
    parts = re.split(r"(?<!\{)\{\}(?!\})", skeleton)
    body = ".*?".join(re.escape(p.replace("{{", "{").replace("}}", "}")) for p in parts)
    return re.compile(body + r"\Z", re.S)
