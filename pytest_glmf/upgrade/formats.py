"""Format strings as written in the released source: every expression becomes `{}`.

`skeletons(path)` walks a Python file's AST and yields (line, skeleton) for every f-string and every
string literal in it (%-format specifiers become `{}` too) (adjacent literals are one node after parsing, as Python joins them):

    f"KV Cache {'VA' if x else 'is allocated'}. dtype: {self.dtype}, #tokens: {n}"
        -> "KV Cache {}. dtype: {}, #tokens: {}"
    "max_running_requests is capped to %d by the mamba state "   (implicit concatenation)
        -> "max_running_requests is capped to {} by the mamba state ..."

Literal text inside a replacement field (e.g. the two branches above) is not kept: the skeleton
is what every rendering of the line shares.

`logged_formats(path)` yields the format string of every logging call instead (the boot-line census,
tests/contract/boot_census.py): `logger.info(...)` and its levels, `log_info_on_rank0(logger, ...)`,
`print_warning_once(...)`; the message may be a literal, an f-string, `"..." % args`, `"...".format()`,
a `+` of those, or a name assigned one of those in the same function.
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


def _literal(text: str) -> str:
    return _PERCENT.sub("{}", text.replace("{", "{{").replace("}", "}}"))


def skeletons(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, _joined(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, _literal(node.value)


_LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "fatal",
                     "info_once", "warning_once", "debug_once"})
_FIELD = re.compile(r"(?<!\{)\{[^{}]*\}(?!\})")


def _skeleton(node: ast.AST, names: dict[str, list[ast.AST]]) -> list[str]:
    """The skeletons a message expression can print (several when a name is assigned more than once)."""
    if isinstance(node, ast.JoinedStr):
        return [_joined(node)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [_literal(node.value)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _skeleton(node.left, names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _skeleton(node.left, names) or ["{}"], _skeleton(node.right, names) or ["{}"]
        return [a + b for a in left for b in right if (a, b) != ("{}", "{}")]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
        return [_FIELD.sub("{}", node.func.value.value)]
    if isinstance(node, ast.Name):
        return [sk for value in names.get(node.id, []) for sk in _skeleton(value, {})]
    return []


def _message(call: ast.Call) -> ast.AST | None:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _LEVELS and "log" in ast.unparse(func.value).lower():
        return call.args[0] if call.args else None
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name == "log_info_on_rank0" and len(call.args) >= 2:
        return call.args[1]
    if name in ("print_warning_once", "print_info_once") and call.args:
        return call.args[0]
    return None


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a module or function, not descending into the functions defined inside it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(ast.iter_child_nodes(node))


def logged_formats(path: Path) -> Iterator[tuple[int, str]]:
    """(line of the call, skeleton) for every logging call of `path` whose message is a format string,
    in line order."""
    tree = ast.parse(path.read_text())
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    found: set[tuple[int, str]] = set()
    for scope in scopes:
        nodes = list(_own_nodes(scope))
        names: dict[str, list[ast.AST]] = {}
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                names.setdefault(node.targets[0].id, []).append(node.value)
        for node in nodes:
            if isinstance(node, ast.Call) and (message := _message(node)) is not None:
                found.update((node.lineno, sk) for sk in _skeleton(message, names))
    yield from sorted(found)


def find(path: Path, anchor: str) -> list[tuple[int, str]]:
    """The skeletons of `path` that contain `anchor` (literal text)."""
    return [(line, sk) for line, sk in skeletons(path) if anchor in sk]


def skeleton_regex(skeleton: str) -> re.Pattern[str]:
    """A line rendered from the skeleton matches this (each `{}` is any text)."""
    parts = re.split(r"(?<!\{)\{\}(?!\})", skeleton)
    body = ".*?".join(re.escape(p.replace("{{", "{").replace("}}", "}")) for p in parts)
    return re.compile(body + r"\Z", re.S)
