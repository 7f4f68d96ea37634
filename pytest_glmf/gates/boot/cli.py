"""`glmf bootlog FILE [--json]`: a boot log's facts from a shell."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_glmf.gates.boot.facts import BootFacts
from pytest_glmf.gates.boot.parse import engine_version, parse_boot_log
from pytest_glmf.gates.boot.sglang import state_pool
from pytest_glmf.gates.boot.table import render_facts
from pytest_glmf.results.gatejson import command_document


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="glmf bootlog", description=(
        "Read an SGLang or vLLM boot log and print what it says: the effective concurrency cap and "
        "its reason, KV pools, context length, CUDA-graph sizes, readiness and fatal problems."))
    parser.add_argument("file", metavar="FILE", help="boot log file")
    parser.add_argument("--json", action="store_true", help="print a result document as JSON: gates.boot.facts the "
                        "BootFacts dict (and state_pool), provenance the engine and engine_version")
    ns = parser.parse_args(argv)
    path = Path(ns.file)
    if not path.is_file():
        print(f"glmf bootlog: no such file: {ns.file}", file=sys.stderr)
        return 2
    text = path.read_text(errors="replace")
    facts = parse_boot_log(text)
    version = engine_version(text)
    if ns.json:
        print(json.dumps(document(facts, version, text, path), indent=2))
    else:
        print(render_facts(facts, version))
    return 0


def document(facts: BootFacts, version: str | None, text: str, path: Path) -> dict[str, Any]:
    """The result document (results/gatejson.py): the entries test_boot records (`facts`, and an
    SGLang mamba state pool's `state_pool`), the engine and the version the log prints in the
    provenance, where a session's result file keeps them."""
    entries: dict[str, Any] = {"facts": facts.to_dict()}
    if facts.engine == "sglang" and (pool := state_pool(text, facts.state_slots_per_request)):
        entries["state_pool"] = pool
    return command_document("bootlog", {"boot": entries}, exitstatus=0,
                            provenance={"engine": facts.engine, "engine_version": version, "boot_log": str(path)})


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
