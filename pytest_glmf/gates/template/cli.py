"""`glmf template reference|check`: the template gate from a shell.

    glmf template reference --url URL --out ref.json                  a stored run of the known-good image
    glmf template reference --model-dir DIR --python PY --out ref.json   transformers, under PY
    glmf template check --url URL --reference ref.json [--json OUT]
    ... [--generation-config MODEL_DIR]      record / compare the default skip_special_tokens (special.py)
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_glmf.cli import interrupted
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.flags import SettingFlags
from pytest_glmf.gates.template.spec import TemplateSettings
from pytest_glmf.gates.template.special import skip_special_default
from pytest_glmf.results.gatejson import command_document, write_document

# The template settings (spec.py) each subcommand takes, as flags of their names (gates/flags.py).
REFERENCE_FLAGS = SettingFlags(TemplateSettings, only=("python", "served_ids", "conversations"),
                               help={"python": "with --model-dir: an interpreter that has transformers (default: "
                                               "this one)"})
CHECK_FLAGS = SettingFlags(TemplateSettings, only=("served_ids", "conversations", "context_tokens"))
NOT_FLAGS = {"reference": "`glmf template check --reference FILE` (required there; the suite's may be null)"}


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="glmf template", description="Served chat template and tokenizer: prompt "
                                                                   "ids of fixed conversations against a reference.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ref = sub.add_parser("reference", help="make a reference from a known-good server or a local model directory")
    src = ref.add_mutually_exclusive_group(required=True)
    src.add_argument("--url", help="the known-good server (its served prompt ids are the reference)")
    src.add_argument("--model-dir", help="a model directory: its tokenizer and chat template, applied with transformers")
    ref.add_argument("--out", required=True, help="where to write the reference JSON")
    chk = sub.add_parser("check", help="compare a server's served prompt ids with a reference")
    chk.add_argument("--url", required=True, help="the server under test")
    chk.add_argument("--reference", required=True, help="a file from `glmf template reference`")
    chk.add_argument("--json", dest="json_out", help="write the result JSON here")
    REFERENCE_FLAGS.add(ref, "the template settings (gates/template/spec.py)")
    CHECK_FLAGS.add(chk, "the template settings (gates/template/spec.py)")
    for p in (ref, chk):
        p.add_argument("--generation-config", metavar="DIR",
                       help="the served model's local directory: its generation_config.json gives the default "
                            "skip_special_tokens a vLLM >= 0.33 server applies, recorded and compared "
                            "(reference --model-dir: that directory by default)")
    args = ap.parse_args(argv)
    settings: TemplateSettings = (REFERENCE_FLAGS.settings(ref, args) if args.cmd == "reference"
                                  else CHECK_FLAGS.settings(chk, args))
    if args.cmd == "reference" and settings.python and not args.model_dir:
        ap.error("--python goes with --model-dir")
    try:
        if args.cmd == "reference":
            return _reference(args, settings)
        return _check(args, settings)
    except (ConfigError, RuntimeError, OSError) as exc:
        print(f"glmf template {args.cmd}: {exc}")
        return 2


def _reference(args: argparse.Namespace, settings: TemplateSettings) -> int:
    from pytest_glmf.gates.template.reference import local_reference, record_reference, save_reference

    default = _default(args.generation_config or args.model_dir)
    if args.url:
        ref = record_reference(args.url, settings.conversations, served_ids=settings.served_ids,
                               skip_special_tokens_default=default)
    else:
        ref = local_reference(args.model_dir, settings.conversations, python=settings.python,
                              skip_special_tokens_default=default)
    save_reference(ref, args.out)
    sizes = ", ".join(f"{c['id']} {len(c['ids'])}" for c in ref["conversations"])
    print(f"template reference: {len(ref['conversations'])} conversations ({sizes} tokens) -> {args.out}")
    return 0


def _check(args: argparse.Namespace, settings: TemplateSettings) -> int:
    from pytest_glmf.gates.template.api import measure_template

    so_far: list[Any] = []      # the result of the conversations done, after each one
    try:
        result = measure_template(args.url, args.reference, settings.conversations, served_ids=settings.served_ids,
                                  context_tokens=settings.context_tokens,
                                  skip_special_tokens_default=_default(args.generation_config),
                                  on_conversation=so_far.append)
    except KeyboardInterrupt:
        if so_far:
            print(so_far[-1].table())
        return interrupted("template check", Path(args.json_out) if args.json_out else None,
                           _document(args, so_far[-1] if so_far else None),
                           f"{so_far[-1].conversations if so_far else 0} conversation(s)")
    print(result.table())
    code = 0 if result.matched == result.conversations and not result.default_changes else 1
    if args.json_out:
        write_document(args.json_out, _document(args, result, code))
    return code


def _document(args: argparse.Namespace, result: Any, code: int | None = None) -> dict[str, Any]:
    """The result document (results/gatejson.py): the summary as the suite records it, keyed `check`."""
    return command_document("template check", {"template": {"check": result.summary()} if result else {}},
                            url=args.url, exitstatus=code, provenance={"reference": str(args.reference)})


def _default(directory: str | None) -> dict[str, Any] | None:
    if not directory:
        return None
    if not Path(directory).is_dir():
        raise ConfigError(f"--generation-config {directory}: not a directory (the served model's local directory)")
    return skip_special_default("vllm", directory)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
