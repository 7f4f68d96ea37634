"""`glmf accept`: acceptance per prompt class from a shell, through `measure_acceptance` (the API the suite uses)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_glmf.cli import interrupted
from pytest_glmf.engine.introspect import EngineUnknown
from pytest_glmf.gates.acceptance.api import AcceptanceResult, measure_acceptance
from pytest_glmf.gates.acceptance.probe import LoadNeedsPerRequest, load_prompt_classes
from pytest_glmf.gates.acceptance.spec import AcceptanceSettings
from pytest_glmf.gates.flags import SettingFlags
from pytest_glmf.results.gatejson import command_document, write_document

# The acceptance settings (spec.py) as flags of their names (gates/flags.py).
FLAGS = SettingFlags(AcceptanceSettings)


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="glmf accept", description="Speculative acceptance per prompt class, single stream.")
    ap.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    ap.add_argument("--engine", choices=("sglang", "vllm"), help="default: detected from the server")
    ap.add_argument("--classes", help="comma-separated class names (default: all)")
    ap.add_argument("--prompt-classes", help="YAML file of prompt classes (default: the packaged set)")
    ap.add_argument("--json", dest="json_out", help="write the result JSON here")
    FLAGS.add(ap, "the acceptance settings (gates/acceptance/spec.py)")
    args = ap.parse_args(argv)
    settings: AcceptanceSettings = FLAGS.settings(ap, args)
    classes = load_prompt_classes(args.prompt_classes)
    if args.classes:
        wanted = args.classes.split(",")
        unknown = set(wanted) - {c.name for c in classes}
        if unknown:
            ap.error(f"unknown class(es) {sorted(unknown)}; known: {[c.name for c in classes]}")
        classes = [c for c in classes if c.name in wanted]
    so_far: list[AcceptanceResult] = []      # the result of the requests done, after each one
    try:
        result = measure_acceptance(args.url, classes, engine=args.engine, prompts_per_class=settings.prompts_per_class,
                                    max_tokens_scale=settings.max_tokens_scale, template=settings.template,
                                    users=settings.users, on_record=so_far.append)
    except EngineUnknown as exc:
        ap.error(f"{exc} (--engine sglang|vllm)")
    except LoadNeedsPerRequest as exc:
        ap.error(f"--users {settings.users}: {exc}")
    except KeyboardInterrupt:
        if so_far:
            print(so_far[-1].table())
        return interrupted("accept", Path(args.json_out) if args.json_out else None,
                           document(args.url, so_far[-1] if so_far else None),
                           f"{len(so_far[-1].records) if so_far else 0} request(s)")
    print(result.table())
    code = 1 if any(c.errors for c in result.classes) else 0
    if args.json_out:
        write_document(args.json_out, document(args.url, result, code))
    return code


def document(url: str, result: AcceptanceResult | None, code: int | None = None) -> dict[str, Any]:
    """The result document (results/gatejson.py): the classes as the suite records them, everything
    measured (per class and per request) as the command's own output."""
    return command_document("accept", {"acceptance": result.entries() if result else {}}, url=url, exitstatus=code,
                            output=result.to_json() if result else {})


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
