"""vLLM 0.33.0's released code as the oracle (tests/contract/setup-vllm: the wheel's pure-Python files
ahead of the real-engine venv's CPU torch). vLLM 0.32.0 stays the engine CI serves.

- its own parser (what `vllm serve` builds) on every vLLM lane the project ships, through preflight;
- the census of the boot gate's vLLM patterns: each pinned to the 0.33 file and line whose format
  string prints it (pytest_glmf/upgrade/surface.py); a moved file is tolerated (a warning naming
  both places), a vanished format fails naming it, a pattern the gate adds without a pin fails;
- every `vllm:` metric name the gates read is in 0.33's source;
- every request body the gates send to vLLM (tests/contract/vllm_bodies.py) validated by the request
  model of its route in 0.33 (chat, completions, tokenize, detokenize), with no key the model drops.

One worker process (tests/contract/oracle/vllm_worker.py) imports vLLM once (~10-20 s) for the
parser and the models; one lane also goes through preflight itself (a process lane whose
interpreter is the overlay's python), as a user's lane would.
"""
from __future__ import annotations

import json
import os
import subprocess
import warnings
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from oracle_env import REPO, in_ci

from pytest_glmf.config.lanes import build_server_argv, load_lanes
from pytest_glmf.launch import preflight
from pytest_glmf.upgrade.surface import (
    VLLM_PINS,
    declared_vllm_lines,
    metric_names,
    render,
    source_has,
    source_mentions,
    vllm_boot_formats,
)

pytestmark = pytest.mark.contract
SETUP = Path(__file__).resolve().parent / "setup-vllm"


@pytest.fixture(scope="module")
def vllm033() -> Path:
    proc = subprocess.run(["bash", str(SETUP), "--check"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        msg = f"vLLM 0.33 oracle not set up ({proc.stdout.strip()}); run tests/contract/setup-vllm (~40 s + download)"
        if in_ci():
            pytest.fail(f"CI=true and {msg}", pytrace=False)
        pytest.skip(msg)
    return Path(subprocess.run(["bash", str(SETUP), "--python"], capture_output=True, text=True).stdout.strip())


HERE = Path(__file__).resolve().parent
PROBE = REPO / "pytest_glmf" / "launch" / "preflight" / "probe.py"


@pytest.fixture(scope="module")
def oracle(vllm033: Path) -> dict:
    """vLLM 0.33's verdicts on every lane's flags and every gate body, in one run of the worker."""
    from vllm_bodies import gate_bodies

    request = {"argvs": [flags(lane) for _, lane in LANES], "bodies": gate_bodies()}
    proc = subprocess.run([str(vllm033), "-W", "ignore", str(HERE / "oracle" / "vllm_worker.py"), str(PROBE)],
                          input=json.dumps(request), capture_output=True, text=True, timeout=600, cwd=str(HERE))
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answer["version"] == "0.33.0", answer["version"]
    answer["sent"] = request["bodies"]
    return answer


@pytest.fixture(scope="module")
def package_parent(oracle: dict) -> Path:
    return Path(oracle["package_dir"]).parent


def flags(lane) -> list[str]:  # noqa: ANN001
    argv = build_server_argv(replace(lane, executable="python3"))
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"], argv
    return argv[3:]


def vllm_lanes() -> list[tuple[str, object]]:
    dirs = {"GLMF_REAL_ENGINE_DIR": os.environ.get("GLMF_REAL_ENGINE_DIR", "/real-engine"),
            "GLMF_REAL_SGLANG_DIR": os.environ.get("GLMF_REAL_SGLANG_DIR", "/real-sglang")}
    out = []
    with mock.patch.dict(os.environ, dirs):
        for path in sorted((REPO / "examples").glob("*-lanes.yaml")):
            out += [(f"{path.relative_to(REPO)}:{n}", ln) for n, ln in load_lanes(path).items()
                    if ln.engine == "vllm" and ln.launcher != "attach" and not ln.command]
    return out


LANES = vllm_lanes()


def test_the_project_ships_vllm_lanes() -> None:
    assert len(LANES) >= 5, LANES


@pytest.mark.parametrize("i", range(len(LANES)), ids=[w for w, _ in LANES])
def test_vllm_0_33_parses_the_lane(oracle: dict, i: int) -> None:
    where, _ = LANES[i]
    verdict = oracle["verdicts"][i]
    problems = [f"{p['flag']}: {p['message']}" for p in verdict["problems"]]
    assert not problems, f"vLLM 0.33.0 ({oracle['parser']}) rejects {where}: {problems}"
    assert not verdict["abbreviations"], (where, verdict["abbreviations"])


def test_a_lanes_preflight_under_vllm_0_33_answers_ok(vllm033: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(tmp_path / "cache"))
    where, lane = LANES[0]
    lane = replace(lane, launcher="process", executable=str(vllm033), env={})
    result = preflight.check(lane, build_server_argv(lane))
    assert (result.status, result.engine, result.version, result.problems) == ("ok", "vllm", "0.33.0", []), where
    bad = replace(lane, extra=[*lane.extra, "--mamba-cache-mode", "all"])
    with pytest.raises(preflight.PreflightError, match=r"vLLM 0\.33\.0 .* --mamba-cache-mode \(lane key extra\) is "
                                                       r"rejected: invalid choice: 'all'"):
        preflight.check(bad, build_server_argv(bad))


# keys a gate sends on purpose for the other engine, in the one body it sends to both
FOR_SGLANG = {
    ("/v1/chat/completions", "return_prompt_token_ids"): "the template gate asks SGLang's spelling beside vLLM's "
                                                          "return_token_ids (gates/template/served.py)",
    ("/detokenize", "skip_special_tokens"): "SGLang's field; vLLM's DetokenizeRequest has none and decodes with "
                                            "special tokens kept, which is what the gate asks for",
}


def test_every_body_the_gates_send_passes_vllm_0_33s_request_models(oracle: dict) -> None:
    bad, dropped, seen = [], [], {}
    for sent, verdict in zip(oracle["sent"], oracle["bodies"], strict=True):
        path, body = sent["path"], sent["body"]
        seen[path] = seen.get(path, 0) + 1
        if path == "/detokenize" and any(isinstance(t, list) for t in body["tokens"]):
            # the batched form is SGLang's; vLLM refuses it and the template gate asks one id at a time
            assert not verdict["ok"], "vLLM 0.33 takes batched /detokenize: the per-id fallback can go"
            continue
        if not verdict["ok"]:
            bad.append(f"{path} {sorted(body)}: {verdict['errors'][:2]}")
        elif [k for k in verdict["unknown_keys"] if (path, k) not in FOR_SGLANG]:
            dropped.append(f"{path} ({verdict['model']}) drops {verdict['unknown_keys']}")
    assert (bad, sorted(set(dropped))) == ([], [])
    assert {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"} <= set(seen), seen
    assert seen["/v1/chat/completions"] >= 100


def test_every_line_the_boot_gate_declares_with_a_format_is_pinned() -> None:
    declared = declared_vllm_lines()
    missing = [name for name, has_format in declared.items() if has_format and name not in VLLM_PINS]
    assert not missing, (f"boot gate lines (gates/boot/vllm.py VLLM_LINES) with no pin: {missing}: add each to "
                         "VLLM_PINS (pytest_glmf/upgrade/surface.py) with its 0.33 line and sample values")
    gone = sorted(set(VLLM_PINS) - {name for name, has_format in declared.items() if has_format})
    assert not gone, f"pins for lines the boot gate no longer declares with a format: {gone}"
    assert declared["active_seqs_override"] and len(VLLM_PINS) >= 10


FORMATS = vllm_boot_formats()


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_the_pinned_format_is_in_vllm_0_33_and_the_gate_reads_it(package_parent: Path, fmt) -> None:  # noqa: ANN001
    from pytest_glmf.upgrade.formats import logged_formats

    where = source_has(package_parent, fmt.source, fmt.skeleton)
    assert where is not None, f"{fmt.name}: vLLM 0.33.0 no longer prints {fmt.skeleton!r} (was {fmt.source}:{fmt.line})"
    lines = [ln for ln, sk in logged_formats(package_parent / where) if sk == fmt.skeleton] or [0]
    if (where, fmt.line) != (fmt.source, lines[0]):
        warnings.warn(f"{fmt.name}: {fmt.skeleton!r} moved from {fmt.source}:{fmt.line} to {where}:{lines[0]}",
                      stacklevel=1)
    assert fmt.pattern.search(render(fmt)), (fmt.name, render(fmt))


def test_every_vllm_metric_the_gates_read_is_in_0_33(package_parent: Path) -> None:
    names = metric_names("vllm")
    assert len(names) >= 6
    stems = {n: n.removesuffix("_total") for n in names}
    seen = source_mentions(package_parent, "vllm", sorted({*names, *stems.values()}))
    assert [n for n in names if not (seen[n] or seen[stems[n]])] == []
