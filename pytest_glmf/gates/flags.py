"""A gate's settings as command-line flags: the spec's declaration is their only home.

    flags = SettingFlags(CurveRowSettings, aliases={"spread_max_pct": "--spread-max"},
                         skip={"prompt_file": "--prompt-file is a flag of its own"})
    flags.add(parser)                       # --max-tokens, --runs, --warmup/--no-warmup, ...
    a = parser.parse_args(argv)
    settings = flags.settings(parser, a)    # a CurveRowSettings, checked like a thresholds file's

Each setting `name` of the dataclass becomes `--name-with-dashes`: its type, its choices (a
Literal), its help (the declaration's `doc`, the default, the range) and its checks are the
declaration's. A bool is `--name` / `--no-name`; a list takes comma-separated values; a nested
settings dataclass gives one flag per field (`rate.requests`: `--rate-requests`). A value out
of range is one argparse error naming the flag as typed and what it allows
(`glmf curve: error: --runs: expected an integer >= 1, got 0`). Flags not given leave the
declaration's default, so the suite, the API and the CLI share one set of defaults.

`aliases` keeps the names users already know (`--spread-max` for `--spread-max-pct`); an `Alias`
may scale the value into the setting's unit (`--lag-p99-max-ms`) or set a constant (`--bisect`:
guided false). `skip` names the settings a CLI does not take as flags, each with its reason.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.spec import build_settings, describe_type, num_text, unwrap_optional

_SETTINGS = "_glmf_settings"   # the namespace attribute the given settings are kept in
_NO_CONST: Any = object()      # an Alias that takes a value (not a switch)


@dataclass(frozen=True)
class Alias:
    """Another flag for a setting: `scale` multiplies the value given (ms -> s: 1e-3), `const`
    makes it a switch that sets that value."""

    flag: str
    scale: float | None = None
    const: Any = _NO_CONST
    help: str | None = None


AliasSpec = str | Alias


@dataclass(frozen=True)
class _Setting:
    path: str                   # "runs", or "rate.requests" for a nested settings dataclass
    tp: Any                     # the declared type, Optional unwrapped
    optional: bool
    meta: Mapping[str, Any]
    default: Any

    @property
    def flag(self) -> str:
        return "--" + self.path.replace(".", "-").replace("_", "-")


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def settings_of(cls: type, prefix: str = "") -> list[_Setting]:
    """Every setting of `cls`, nested settings dataclasses expanded to their fields."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp, optional = unwrap_optional(hints[f.name])
        path = prefix + f.name
        if dataclasses.is_dataclass(tp) and not optional:
            out.extend(settings_of(typing.cast(type, tp), path + "."))
        else:
            out.append(_Setting(path, tp, optional, f.metadata, _default(f)))
    return out


def _scalar_type(tp: Any) -> Callable[[str], Any]:
    if tp is int:
        return int
    if tp is float:
        return float
    return str


_PLURAL = {int: "integers", float: "numbers", str: "strings"}


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return num_text(value)
    if isinstance(value, list):
        return ",".join(str(x) for x in value) or "none"
    return "none" if value is None else str(value)


def _scaled_meta(meta: Mapping[str, Any], scale: float | None) -> dict[str, Any]:
    """The range of a setting in the units of a scaled alias (--lag-p99-max-ms: the seconds' range x 1000)."""
    if not scale:
        return dict(meta)
    return {**meta, **{k: meta[k] / scale for k in ("min", "max", "above") if meta.get(k) is not None}}


class _SettingAction(argparse.Action):
    """Keeps the value in the namespace's settings, checked against the declaration's type and range."""

    def __init__(self, option_strings: list[str], dest: str, setting: _Setting, scale: float | None = None,
                 const: Any = _NO_CONST, **kw: Any) -> None:
        self.setting, self.scale, self.fixed = setting, scale, const
        switch = const is not _NO_CONST or setting.tp is bool
        super().__init__(option_strings, dest, nargs=0 if switch else None, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        s, flag = self.setting, option_string or self.option_strings[0]
        if self.fixed is not _NO_CONST:
            value = self.fixed
        elif s.tp is bool:
            value = not flag.startswith("--no-")
        else:
            value = values
            if typing.get_origin(s.tp) is list and isinstance(value, str):
                value = self.items(parser, flag, value)
            if self.scale and value is not None:
                value = value * self.scale
            if value is not None:
                self.check(parser, flag, values, value)
        given = dict(getattr(namespace, _SETTINGS, {}))
        given[s.path] = (value, flag)
        setattr(namespace, _SETTINGS, given)

    def items(self, parser: argparse.ArgumentParser, flag: str, text: str) -> list[Any]:
        inner = typing.get_args(self.setting.tp)[0]
        try:
            return [_scalar_type(inner)(x.strip()) for x in text.split(",") if x.strip()]
        except ValueError:
            parser.error(f"{flag} takes comma-separated {_PLURAL.get(inner, 'values')}, got {text!r}")
        return []

    def check(self, parser: argparse.ArgumentParser, flag: str, typed: Any, value: Any) -> None:
        s = self.setting
        meta = s.meta
        bad = isinstance(value, str) and not value.strip()
        values = value if isinstance(value, list) else [value]
        for x in values:
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                lo, hi, above = meta.get("min"), meta.get("max"), meta.get("above")
                bad = bad or math.isnan(x) or (lo is not None and x < lo) or (hi is not None and x > hi) \
                    or (above is not None and x <= above)
        if bad:
            what = describe_type(s.tp, _scaled_meta(meta, self.scale))
            parser.error(f"{flag}: expected {what}, got {typed!r}")


@dataclass
class SettingFlags:
    """The flags of a settings dataclass (see the module's doc)."""

    cls: type
    aliases: Mapping[str, AliasSpec | tuple[AliasSpec, ...]] = dataclasses.field(default_factory=dict)
    skip: Mapping[str, str] = dataclasses.field(default_factory=dict)      # setting -> why no flag
    types: Mapping[str, Callable[[str], Any]] = dataclasses.field(default_factory=dict)   # own parsers
    help: Mapping[str, str] = dataclasses.field(default_factory=dict)      # setting -> help, instead of doc
    only: tuple[str, ...] | None = None     # these settings only (a subcommand's share); the rest: defaults

    def __post_init__(self) -> None:
        known = {s.path for s in settings_of(self.cls)}
        for name in (*self.aliases, *self.skip, *self.types, *self.help, *(self.only or ())):
            if name not in known:
                raise ValueError(f"{self.cls.__name__} has no setting {name!r}")

    def settings_list(self) -> list[_Setting]:
        return [s for s in settings_of(self.cls) if s.path not in self.skip
                and (self.only is None or s.path in self.only)]

    def flags(self) -> dict[str, str]:
        """flag -> setting, every name a flag takes (the aliases too)."""
        out = {}
        for s in self.settings_list():
            out[s.flag] = s.path
            if s.tp is bool:
                out["--no-" + s.flag[2:]] = s.path
            for alias in self._aliases(s.path):
                out[alias.flag] = s.path
        return out

    def _aliases(self, path: str) -> tuple[Alias, ...]:
        given = self.aliases.get(path, ())
        given = given if isinstance(given, tuple) else (given,)
        return tuple(a if isinstance(a, Alias) else Alias(a) for a in given)

    def add(self, p: argparse.ArgumentParser | Any, title: str | None = None) -> None:
        """Add the flags to `p` (a parser or an argument group)."""
        group = p.add_argument_group(title) if title else p
        for s in self.settings_list():
            self._add(group, s)

    def _help(self, s: _Setting, scale: float | None = None) -> str:
        text = self.help.get(s.path) or s.meta.get("doc") or s.path
        if scale:
            text = f"the same setting as {s.flag}, times {num_text(1 / scale)}"
        default = s.default
        if scale and isinstance(default, (int, float)) and not isinstance(default, bool):
            default = default / scale
        extra = [f"setting {s.path}"]
        if default not in (dataclasses.MISSING, None, []):
            extra.append(f"default {_shown(default)}")
        if s.tp in (int, float) and any(s.meta.get(k) is not None for k in ("min", "max", "above")):
            extra.append(describe_type(s.tp, _scaled_meta(s.meta, scale)))
        return f"{text} [{'; '.join(extra)}]".replace("%", "%%")

    def _add(self, group: Any, s: _Setting) -> None:
        kw: dict[str, Any] = {"setting": s, "help": self._help(s)}
        names = [s.flag]
        if s.tp is bool:
            names.append("--no-" + s.flag[2:])
        else:
            if s.path in self.types or typing.get_origin(s.tp) is not list:
                kw["type"] = self.types.get(s.path) or _scalar_type(s.tp)
            if typing.get_origin(s.tp) is list:
                kw["metavar"] = "A,B,..."
            if typing.get_origin(s.tp) is Literal:
                kw["choices"] = typing.get_args(s.tp)
            if s.tp in (int, float):
                kw["metavar"] = "N" if s.tp is int else "X"
            elif s.tp is str:
                kw["metavar"] = s.path.rsplit(".", 1)[-1].upper()
        plain = [a for a in self._aliases(s.path) if a.scale is None and a.const is _NO_CONST
                 and a.help is None]
        names += [a.flag for a in plain]
        group.add_argument(*names, action=_SettingAction, dest=f"{_SETTINGS}_{s.path}", **kw)
        for a in self._aliases(s.path):
            if a in plain:
                continue
            akw = dict(kw)
            if a.const is not _NO_CONST:
                akw = {"setting": s, "const": a.const}
            else:
                akw["scale"] = a.scale
            akw["help"] = a.help.replace("%", "%%") if a.help else self._help(s, a.scale)
            group.add_argument(a.flag, action=_SettingAction, dest=f"{_SETTINGS}_{s.path}", **akw)

    def settings(self, p: argparse.ArgumentParser, a: argparse.Namespace) -> Any:
        """The settings object: the declaration's defaults with the flags given on top, built and
        checked by the spec (`build_settings`); a ConfigError is `p.error` naming the flag."""
        given = getattr(a, _SETTINGS, {})
        data: dict[str, Any] = {}
        for path, (value, _) in given.items():
            head, _, tail = path.partition(".")
            if tail:
                data.setdefault(head, {})[tail] = value
            else:
                data[head] = value
        try:
            return build_settings(self.cls, data, "settings")
        except ConfigError as exc:
            text = str(exc)
            for path, (_, flag) in given.items():
                text = text.replace(f"settings.{path}:", f"{flag}:", 1)
            p.error(text)
