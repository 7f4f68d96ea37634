"""Reading the plugin's YAML files: file:line errors, `${VAR}` from the environment."""
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


def read_yaml(path: Path, what: str) -> Any:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} file: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(f"{path}{line}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: Any) -> Any:
    """`${NAME}` in any string of a lane becomes the environment variable's value (an unset
    variable stays as written, so the error shows up where the path is used, naming it)."""
    if isinstance(value, str):
        return _ENV_REF.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [expand_env(x) for x in value]
    if isinstance(value, dict):
        return {expand_env(k): expand_env(x) for k, x in value.items()}
    return value
