"""`glmf drift reference|score|compare`: the two phases and the comparison from a shell."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_glmf.gates.drift.adapters import ScoringError, make_adapter
from pytest_glmf.gates.drift.prompts import load_chat_prompts
from pytest_glmf.gates.drift.reference import (
    DriftFileError,
    check_reference,
    compare,
    make_reference,
    pick_template,
    score_candidate,
    sim_template,
)
from pytest_glmf.gates.drift.spec import DriftSettings
from pytest_glmf.gates.drift.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from pytest_glmf.gates.drift.table import noise_text, render_table
from pytest_glmf.gates.flags import Alias, SettingFlags


def _read(path: str) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise DriftFileError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise DriftFileError(f"{path}: not JSON ({exc})") from None


def _write(path: str, data: dict[str, Any]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")


def compare_document(ref: dict[str, Any], cands: list[dict[str, Any]], res: dict[str, Any],
                     self_check: str) -> dict[str, Any]:
    """`glmf drift compare --json`: a result document (results/gatejson.py), each candidate as the
    suite records it (DriftResult.to_record, keyed by its label) and the pair as test_drift_not_worse_than
    does (`B vs A`); the statistics as compare printed them under `command_output`."""
    from pytest_glmf.gates.drift.api import result_from
    from pytest_glmf.results.gatejson import command_document

    entries: dict[str, Any] = {label: result_from(ref, cand, res, label, self_check=self_check).to_record()
                               for label, cand in zip(res["candidates"], cands)}
    if isinstance(res.get("pair"), dict):
        entries[f"{res['pair']['b']} vs {res['pair']['a']}"] = dict(res["pair"])
    return command_document("drift compare", {"drift": entries}, exitstatus=0, output=res)


def _kv(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items:
        key, sep, val = it.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"--provenance {it!r}: expected KEY=VALUE")
        out[key] = val
    return out


def _provenance(a: argparse.Namespace, lane_key: str) -> dict[str, Any]:
    """The provenance flags: lane, image, model revision and bytes (None when not given)."""
    out: dict[str, Any] = {lane_key: a.lane, "image": a.image, "model_revision": a.model_revision,
                           "model_bytes": None}
    if a.model_dir:
        from pytest_glmf.launch.modeldir import model_dir_provenance

        model = model_dir_provenance(Path(a.model_dir), declared=a.model_dir, lane_revision=a.model_revision)
        out.update(model_revision=model["revision"], model_bytes=model["weight_bytes"], model_dir=model)
    return {**out, **_kv(a.provenance)}


# The drift settings (spec.py) each phase takes as flags of their names (gates/flags.py); what
# no phase takes is the suite's (NOT_FLAGS says why).
REFERENCE_FLAGS = SettingFlags(DriftSettings, only=("prompt_file", "prompts", "max_tokens", "k", "score_concurrency",
                                                    "answer_max_tokens", "answer_prompts"),
                               help={"prompts": "first N prompts of the set (default: all 40)",
                                     "prompt_file": "a prompt set JSON (default: the packaged one)"})
SCORE_FLAGS = SettingFlags(DriftSettings, only=("score_concurrency", "check_tokenizer"),
                           aliases={"check_tokenizer": Alias("--no-tokenizer-check", const=False,
                                                             help="the same as --no-check-tokenizer")})
COMPARE_FLAGS = SettingFlags(DriftSettings, only=("agreement_tokens",))
NOT_FLAGS = {
    "reference": "the suite's stored reference: `glmf drift score --reference FILE` names it",
    "oracle_url": "the suite's oracle: `glmf drift reference --url` names it",
    "oracle_engine": "`--engine` of each phase",
    "regenerate": "the suite's choice: `glmf drift reference` always makes one",
    "self_check": "how the suite judges the noise floor: `glmf drift compare` shows every mode's numbers "
                  "(`--no-self-check` skips the second scoring)",
    "not_worse_than": "the suite's paired comparison: `glmf drift compare REF A B` compares two candidates",
}


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="glmf drift", description="Teacher-forced log-prob drift against an oracle.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reference", help="phase 1: greedy continuations + scores on the oracle")
    r.add_argument("--url", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--concurrency", type=int, default=4, help="parallel greedy generations (and chat answers)")
    REFERENCE_FLAGS.add(r, "the drift settings (gates/drift/spec.py)")
    s = sub.add_parser("score", help="phase 2: score the reference tokens on a candidate")
    s.add_argument("--url", required=True)
    s.add_argument("--reference", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--label", default=None, help="name of the candidate in tables (default: model/checkpoint)")
    SCORE_FLAGS.add(s, "the drift settings (gates/drift/spec.py)")
    s.add_argument("--no-answers", action="store_true",
                   help="do not answer the reference's chat prompts (when it holds the oracle's answers)")
    for p in (r, s):
        p.add_argument("--template", choices=["server", "sim"], default="server",
                       help="chat template: the server's own (default), or the built-in simulator's applied "
                            "here when the simulator cannot return templated ids")
        p.add_argument("--engine", choices=["sglang", "vllm"], default=None, help="default: detected")
        p.add_argument("--no-self-check", action="store_true", help="do not score everything a second time")
        p.add_argument("--lane", default=None, help="lane name recorded in the provenance")
        p.add_argument("--image", default=None, help="engine image (tag or digest) recorded in the provenance")
        p.add_argument("--model-dir", default=None,
                       help="the served weights' directory, if readable here: revision, bytes, config hash")
        p.add_argument("--model-revision", default=None, help="model revision, when --model-dir cannot tell")
        p.add_argument("--provenance", action="append", default=[], metavar="KEY=VALUE",
                       help="any other provenance to record")
    c = sub.add_parser("compare", help="statistics of one or two candidates against the reference")
    c.add_argument("reference")
    c.add_argument("candidates", nargs="+")
    c.add_argument("--json", action="store_true", help="print the statistics as JSON")
    c.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    c.add_argument("--seed", type=int, default=DEFAULT_SEED)
    COMPARE_FLAGS.add(c, "the drift settings (gates/drift/spec.py)")
    a = ap.parse_args(argv)
    parser, flags = {"reference": (r, REFERENCE_FLAGS), "score": (s, SCORE_FLAGS), "compare": (c, COMPARE_FLAGS)}[a.cmd]
    settings: DriftSettings = flags.settings(parser, a)
    try:
        if a.cmd == "reference":
            adapter = make_adapter(a.url, a.engine)
            try:
                ref = make_reference(adapter, load_chat_prompts(settings.prompt_file, settings.prompts),
                                     max_tokens=settings.max_tokens, k=settings.k, concurrency=a.concurrency,
                                     provenance=_provenance(a, "oracle_lane"), run_self_check=not a.no_self_check,
                                     template=pick_template(adapter, sim_template() if a.template == "sim" else None),
                                     score_concurrency=settings.score_concurrency,
                                     answer_max_tokens=settings.answer_max_tokens,
                                     answer_prompts=settings.answer_prompts)
            finally:
                adapter.close()
            _write(a.out, ref)
            print(f"reference: {len(ref['prompts'])} prompts, "
                  f"{sum(len(p['output_ids']) for p in ref['prompts'])} tokens, k={ref['k']}, "
                  f"self-check {noise_text(ref.get('self_check'))} -> {a.out}")
        elif a.cmd == "score":
            ref = _read(a.reference)
            check_reference(ref, source=a.reference)
            adapter = make_adapter(a.url, a.engine)
            try:
                cand = score_candidate(adapter, ref, label=a.label, check_tokenizer=settings.check_tokenizer,
                                       run_self_check=not a.no_self_check, provenance=_provenance(a, "lane"),
                                       template=pick_template(adapter, sim_template() if a.template == "sim" else None),
                                       score_concurrency=settings.score_concurrency, answers=not a.no_answers)
            finally:
                adapter.close()
            _write(a.out, cand)
            print(f"scored {cand['label']!r}: self-check {noise_text(cand.get('self_check'))} -> {a.out}")
        else:
            if len(a.candidates) > 2:
                ap.error("compare takes one or two candidate files")
            ref = _read(a.reference)
            check_reference(ref, source=a.reference)
            cands = [_read(x) for x in a.candidates]
            res = compare(ref, cands, sources=a.candidates, n_resamples=a.resamples, seed=a.seed,
                          agreement_tokens=settings.agreement_tokens)
            doc = compare_document(ref, cands, res, settings.self_check) if a.json else None
            print(json.dumps(doc, indent=1, default=str) if doc else render_table(res))
    except (DriftFileError, ScoringError, ValueError) as exc:
        print(f"glmf drift {a.cmd}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli())
