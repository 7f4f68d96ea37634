"""`glmf accept`: acceptance per prompt class from a shell."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_glmf.cli import interrupted
from pytest_glmf.engine.client import Client
from pytest_glmf.engine.introspect import EngineUnknown, detect_engine
from pytest_glmf.gates.acceptance.probe import AcceptRecord, load_prompt_classes, probe, probe_result
from pytest_glmf.gates.acceptance.spec import DEFAULTS, TEMPLATES
from pytest_glmf.gates.acceptance.table import render_result


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="glmf accept", description="Speculative acceptance per prompt class, single stream.")
    ap.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    ap.add_argument("--engine", choices=("sglang", "vllm"), help="default: detected from the server")
    ap.add_argument("--classes", help="comma-separated class names (default: all)")
    ap.add_argument("--prompt-classes", help="YAML file of prompt classes (default: the packaged set)")
    ap.add_argument("--prompts-per-class", type=int, help="use only the first N prompts of each class")
    ap.add_argument("--max-tokens-scale", type=float, default=DEFAULTS.max_tokens_scale,
                    help="scale each class's target length")
    ap.add_argument("--template", default=DEFAULTS.template, choices=TEMPLATES,
                    help=f"chat template for SGLang /generate text (default {DEFAULTS.template})")
    ap.add_argument("--json", dest="json_out", help="write the result JSON here")
    args = ap.parse_args(argv)
    classes = load_prompt_classes(args.prompt_classes)
    if args.classes:
        wanted = args.classes.split(",")
        unknown = set(wanted) - {c.name for c in classes}
        if unknown:
            ap.error(f"unknown class(es) {sorted(unknown)}; known: {[c.name for c in classes]}")
        classes = [c for c in classes if c.name in wanted]
    finished: list[AcceptRecord] = []
    with Client(args.url) as client:
        try:
            engine = args.engine or detect_engine(client)
        except EngineUnknown as exc:
            ap.error(f"{exc} (--engine sglang|vllm)")
        try:
            result = probe(client, engine, classes, prompts_per_class=args.prompts_per_class,
                           max_tokens_scale=args.max_tokens_scale, template=args.template, on_record=finished.append)
        except KeyboardInterrupt:
            done = probe_result(engine, classes, finished, args.template)
            if finished:
                print(render_result(done))
            return interrupted("accept", Path(args.json_out) if args.json_out else None, done,
                               f"{len(finished)} request(s)")
    print(render_result(result))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    if any(r["errors"] for r in result["classes"]):
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
