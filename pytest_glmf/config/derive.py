"""Lanes derived from lanes: `base:` inherits a lane and changes some keys, `matrix:` generates one
lane per value (or pair of values) of one or two keys or engine flags.

    lanes:
      daily: {engine: sglang, launcher: sim, spec: dflash, extra: [--max-mamba-cache-size, "48"]}
      daily-b8:
        base: daily
        --speculative-dflash-block-size: 8      # a flag key sets (or adds) that flag in `extra`
      slots:
        base: daily
        matrix:
          --max-mamba-cache-size: [38, 48, 120]  # -> slots-38, slots-48, slots-120
      modes:
        base: daily
        matrix: {--max-mamba-cache-size: [48, 120], spec: [dflash, none]}   # -> modes-48-dflash, ...

Derivation works on the file's raw mappings, before any lane is validated, so a derived lane is
checked exactly like a written one (lanes.lane_from_mapping) and its errors name the file and the
generated lane. A flag key's value replaces the flag's value in `extra` (`--flag value` or
`--flag=value`), `true` writes the bare flag, `null` or `false` removes it; `spec: none` over a
speculative lane drops its `draft` too (autoregressive has no drafter). A matrix lane is a
template: only the lanes it generates exist (each remembers its origin for `glmf lanes` and the
comparison report). `base:` may name a lane of the same file or a built-in one, never a matrix.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError

MAX_MATRIX_KEYS = 2


def is_flag(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("--") and len(key) > 2


def set_flag(extra: list[str], flag: str, value: Any) -> list[str]:
    """`extra` with `flag` set to `value` (replacing `--flag v` or `--flag=v`), added at the end when
    absent; True: the bare flag; None/False: the flag removed."""
    out: list[str] = []
    i = 0
    while i < len(extra):
        word = extra[i]
        if word == flag:
            i += 2 if i + 1 < len(extra) and not extra[i + 1].startswith("--") else 1
            continue
        if word.startswith(flag + "="):
            i += 1
            continue
        out.append(word)
        i += 1
    if value is None or value is False:
        return out
    return out + ([flag] if value is True else [flag, str(value)])


def argv_words(v: Any) -> list[str]:
    """An argv from a lanes file: a list of words, or one string split like a shell command line;
    TypeError saying what is allowed (lanes.py's validators turn it into the file's error)."""
    if v is None:
        return []
    if isinstance(v, str):
        return shlex.split(v)
    if isinstance(v, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
        return [str(x) for x in v]
    raise TypeError("a list of strings or one string (split like a shell command line)")


def _argv(value: Any, where: str) -> list[str]:
    try:
        return argv_words(value)
    except TypeError as exc:
        raise ConfigError(f"{where}: extra: expected {exc}, got {value!r}") from None


def _apply(mapping: dict[str, Any], changes: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`changes` (lane keys and flag keys) over `mapping`; flag keys edit `extra`."""
    out = dict(mapping)
    # plain keys first: a lane's own `extra:` is the list its flag keys then edit
    for key, value in sorted(changes.items(), key=lambda kv: is_flag(kv[0])):
        if is_flag(key):
            if isinstance(value, (list, dict)):
                raise ConfigError(f"{where}: {key}: a flag takes one value (a string or number, true for a "
                                  f"bare flag, null to remove it), got {value!r}")
            out["extra"] = set_flag(_argv(out.get("extra"), where), key, value)
        else:
            out[key] = value
    if "spec" in changes and _autoregressive(changes["spec"]) and "draft" not in changes:
        out.pop("draft", None)      # `spec: none` over a speculative lane means autoregressive: no drafter
    return out


def _autoregressive(spec: Any) -> bool:
    return spec is None or (isinstance(spec, str) and spec.strip().lower() in ("", "none", "off"))


def _resolve_base(name: str, raw: Mapping[str, Any], builtins: Mapping[str, dict[str, Any]], source: str,
                  chain: tuple[str, ...] = ()) -> dict[str, Any]:
    """The lane's mapping with its base chain applied (base first), without base/matrix keys."""
    where = f"{source}: lane {name!r}"
    own = raw[name]
    if not isinstance(own, dict):
        return own      # lane_from_mapping says what a lane must be
    base = own.get("base")
    body = {k: v for k, v in own.items() if k not in ("base", "matrix")}
    if base is None:
        return _apply({}, body, where)
    if not isinstance(base, str):
        raise ConfigError(f"{where}: base: expected a lane name, got {base!r}")
    if base in chain or base == name:
        raise ConfigError(f"{where}: base: {' -> '.join((*chain, name, base))} is a cycle")
    if base in raw:
        if isinstance(raw[base], dict) and "matrix" in raw[base]:
            raise ConfigError(f"{where}: base: {base!r} is a matrix (a template of lanes, not a lane); "
                              f"base a lane it generates instead")
        inherited = _resolve_base(base, raw, builtins, source, (*chain, name))
    elif base in builtins:
        inherited = dict(builtins[base])
    else:
        known = sorted(set(raw) | set(builtins))
        raise ConfigError(f"{where}: base: unknown lane {base!r}; known lanes: {', '.join(known)}")
    return _apply(inherited, body, where)


def _slug(value: Any) -> str:
    text = "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-") or "x"


def _matrix(name: str, matrix: Any, source: str) -> list[tuple[str, dict[str, Any]]]:
    """(generated name, {key: value}) for every combination, first key slowest."""
    where = f"{source}: lane {name!r}: matrix"
    if not isinstance(matrix, dict) or not 1 <= len(matrix) <= MAX_MATRIX_KEYS:
        raise ConfigError(f"{where}: expected a mapping of one or two keys (lane keys or --flags) to lists "
                          f"of values, e.g. {{--max-mamba-cache-size: [38, 48, 120], spec: [dflash, none]}}; "
                          f"got {matrix!r}")
    axes = []
    for key, values in matrix.items():
        if key in ("base", "matrix", "name"):
            raise ConfigError(f"{where}: {key!r} cannot vary in a matrix")
        if not isinstance(values, list) or not values or any(isinstance(v, (list, dict)) for v in values):
            raise ConfigError(f"{where}: {key}: expected a non-empty list of values, got {values!r}")
        if len({_slug(v) for v in values}) != len(values):
            raise ConfigError(f"{where}: {key}: values {values!r} repeat (or name the same lane)")
        axes.append((key, values))
    combos: list[tuple[str, dict[str, Any]]] = [(name, {})]
    for key, values in axes:
        combos = [(f"{n}-{_slug(v)}", {**c, key: v}) for n, c in combos for v in values]
    return combos


def describe_origin(base: str | None, matrix_values: Mapping[str, Any] | None) -> str | None:
    """`slots: --max-mamba-cache-size=38, spec=none` (matrix) or `base daily`; None for a written lane."""
    if matrix_values:
        return f"{base}: " + ", ".join(f"{k}={'none' if v is None else v}" for k, v in matrix_values.items())
    return f"base {base}" if base else None


def expand_lanes(raw: Mapping[str, Any], source: str,
                 builtins: Mapping[str, dict[str, Any]] | None = None) -> dict[str, tuple[Any, str | None]]:
    """The file's lanes with bases applied and matrices expanded: name -> (mapping, origin). The
    mappings hold only lane keys (flags merged into `extra`); `builtins` are the lanes `base:` may
    name besides the file's own (their mappings, as `lane_from_mapping` takes them)."""
    builtins = builtins or {}
    out: dict[str, tuple[Any, str | None]] = {}
    for name, own in raw.items():
        mapping = _resolve_base(name, raw, builtins, source)
        if isinstance(own, dict) and "matrix" in own:
            for gen_name, values in _matrix(name, own["matrix"], source):
                if gen_name in raw or gen_name in out:
                    raise ConfigError(f"{source}: lane {name!r}: matrix generates lane {gen_name!r}, which "
                                      "is already a lane of this file; rename one of them")
                lane_map = _apply(mapping, values, f"{source}: lane {gen_name!r} (matrix of {name!r})")
                out[gen_name] = (lane_map, describe_origin(name, values))
        else:
            if name in out:
                raise ConfigError(f"{source}: lane {name!r} is also generated by a matrix; rename one of them")
            base = own.get("base") if isinstance(own, dict) else None
            out[name] = (mapping, describe_origin(base, None))
    return out
