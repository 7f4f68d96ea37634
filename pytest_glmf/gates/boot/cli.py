"""`glmf bootlog FILE [--json]`: a boot log's facts from a shell."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_glmf.gates.boot.parse import engine_version, parse_boot_log
from pytest_glmf.gates.boot.table import render_facts


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="glmf bootlog", description=(
        "Read an SGLang or vLLM boot log and print what it says: the effective concurrency cap and "
        "its reason, KV pools, context length, CUDA-graph sizes, readiness and fatal problems."))
    parser.add_argument("file", metavar="FILE", help="boot log file")
    parser.add_argument("--json", action="store_true", help="print the BootFacts dict as JSON")
    ns = parser.parse_args(argv)
    path = Path(ns.file)
    if not path.is_file():
        print(f"glmf bootlog: no such file: {ns.file}", file=sys.stderr)
        return 2
    text = path.read_text(errors="replace")
    facts = parse_boot_log(text)
    if ns.json:
        print(json.dumps(facts.to_dict(), indent=2))
    else:
        print(render_facts(facts, engine_version(text)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
