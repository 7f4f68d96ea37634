"""The one YAML loader for every file the plugin reads (lanes, thresholds, prompt classes, tool
scenarios): errors name the file and line, and what would otherwise pass silently is refused.

* A key written twice in one mapping, at any depth, is an error naming both lines. Plain YAML
  keeps the last one, so a copied lane block or a second `boot:` section quietly replaced the
  first (a gate went from `min: 8` to `min: 1`). Merge keys (`<<: *defaults` then an override)
  are not duplicates.
* `${NAME}` in any string becomes the environment variable's value; an unset NAME is an error
  naming it (a literal `${UNSET}/GLM` model path would reach the server). `${NAME:-default}`
  gives an intended default (used when NAME is unset or empty), `$${` is a literal `${`.
  An unquoted value that was only references is typed after expansion, as if written there
  (`port: ${PORT}` is an integer).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A lanes or thresholds file (or an option naming one) is invalid; the message is for users."""


def allowed(values: Any) -> str:
    return ", ".join(sorted(values))


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed YAML file at `path` (`what` names the kind of file in errors: "lanes", ...)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} file: {exc.strerror}") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML `text` read from `source` (a path or a packaged file's name, used in errors)."""
    loader = _Loader(text, source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicate_keys(loader, node, "", set())
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(f"{source}{line}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()


# ---------------------------------------------------------------------------- ${VAR}

_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_SYNTAX = "${NAME}, or ${NAME:-default} for an intended default ($${ is a literal ${)"


def expand_env(text: str, where: str) -> str:
    """`text` with every `${NAME}` / `${NAME:-default}` replaced from the environment; raises
    ConfigError naming `where` (file:line) and the variable when it is unset or malformed."""
    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$${":
            return "${"
        body = m.group(1)
        name, sep, default = body.partition(":-")
        if not m.group(0).endswith("}") or not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: {m.group(0)!r} is not a variable reference; write {ENV_SYNTAX}")
        value = os.environ.get(name)
        if sep:
            return value if value else default
        if value is None:
            raise ConfigError(f"{where}: ${{{name}}} is not set in the environment; set {name}, "
                              f"or write ${{{name}:-default}} for an intended default")
        return value
    return _REF.sub(one, text)


class _Loader(yaml.SafeLoader):
    """SafeLoader whose strings are expanded from the environment (see the module docstring)."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self.source = source

    def where(self, node: yaml.Node, column: bool = False) -> str:
        col = f":{node.start_mark.column + 1}" if column else ""
        return f"{self.source}:{node.start_mark.line + 1}{col}"


def _construct_str(loader: _Loader, node: yaml.ScalarNode) -> Any:
    raw = loader.construct_scalar(node)
    if "${" not in raw:
        return raw
    value = expand_env(raw, loader.where(node))
    if node.style is None and _REF.sub("", raw).strip() == "":
        # an unquoted value made only of references: typed like the text it stands for
        tag = loader.resolve(yaml.ScalarNode, value, (True, False))
        if tag != "tag:yaml.org,2002:str":
            return loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, value, node.start_mark, node.end_mark))
    return value


_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)


# ---------------------------------------------------------------------------- duplicate keys

_MERGE = "tag:yaml.org,2002:merge"


def _refuse_duplicate_keys(loader: _Loader, node: yaml.Node, path: str, seen: set[int]) -> None:
    if id(node) in seen:   # an alias of a node already checked (and no recursion through anchors)
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(loader, item, f"{path}[{i}]", seen)
    elif isinstance(node, yaml.MappingNode):
        first: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                _refuse_duplicate_keys(loader, value_node, path, seen)
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                earlier = first.setdefault(key, key_node)
            except TypeError:      # an unhashable key: construction reports it with its line
                earlier = key_node
            if earlier is not key_node:
                inside = f" in {path}" if path else ""
                same_line = earlier.start_mark.line == key_node.start_mark.line
                second, first_at = (loader.where(n, column=same_line) for n in (key_node, earlier))
                raise ConfigError(f"{second}: duplicate key {key!r}{inside} (first at {first_at}); YAML would keep only the last one and "
                                  "silently drop the first: remove or merge one of them")
            _refuse_duplicate_keys(loader, value_node, f"{path}.{key}" if path else str(key), seen)
