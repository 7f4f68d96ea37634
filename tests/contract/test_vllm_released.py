"""The released vLLM's code as the oracle, for every release of pytest_glmf/upgrade/releases.py
`VLLM_RELEASES` (tests/contract/setup-vllm: each wheel's pure-Python files ahead of the real-engine
venv's CPU torch). vLLM 0.32.0 stays the engine CI serves. Per release:

- its own parser (what `vllm serve` builds) on every vLLM lane the project ships, through preflight;
- the census of the boot gate's vLLM patterns: each line the gate expects the release to print
  (gates/boot/vllm.py `since`/`until`) pinned to the file and line whose format string prints it
  (pytest_glmf/upgrade/surface.py `VLLM_PINS`); a moved line warns naming both places, a vanished
  format fails naming it, a line the release prints that the gate says it no longer does fails, an
  unpinned line fails naming the line to pin;
- every `vllm:` metric name the gates read is in the release's source;
- every request body the gates send to vLLM (tests/contract/vllm_bodies.py) validated by the request
  model of its route (chat, completions, tokenize, detokenize), with no key the model drops.

One worker process per release (tests/contract/oracle/vllm_worker.py) imports vLLM once (~10-30 s) for
the parser and the models; one lane also goes through preflight itself (a process lane whose
interpreter is the overlay's python), as a user's lane would.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import warnings
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from oracle_env import REPO, in_ci

from pytest_glmf.config.lanes import build_server_argv, load_lanes
from pytest_glmf.gates.boot.vllm import VLLM_LINES
from pytest_glmf.launch import preflight
from pytest_glmf.upgrade.formats import logged_formats, skeletons
from pytest_glmf.upgrade.releases import VLLM_RELEASES, release_key
from pytest_glmf.upgrade.surface import (
    VLLM_PINS,
    declared_vllm_lines,
    expected_vllm_lines,
    metric_names,
    render,
    skeleton_of,
    source_has,
    source_mentions,
    vllm_boot_formats,
)

pytestmark = pytest.mark.contract
SETUP = Path(__file__).resolve().parent / "setup-vllm"
HERE = Path(__file__).resolve().parent
PROBE = REPO / "pytest_glmf" / "launch" / "preflight" / "probe.py"


def oracle_python(release: str) -> Path:
    proc = subprocess.run(["bash", str(SETUP), "--check", release], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        msg = (f"vLLM {release} oracle not set up ({(proc.stdout + proc.stderr).strip()}); run tests/contract/setup-vllm "
               "(~30 s a release + its download)")
        if in_ci():
            pytest.fail(f"CI=true and {msg}", pytrace=False)
        pytest.skip(msg)
    return Path(subprocess.run(["bash", str(SETUP), "--python", release], capture_output=True, text=True,
                               check=True).stdout.strip())


class Oracles:
    """Each release's oracle, asked once (one worker run per release, whatever order the tests run in)."""

    def __init__(self) -> None:
        self.pythons: dict[str, Path] = {}
        self.answers: dict[str, dict] = {}
        self.sites: dict[str, Path] = {}

    def python(self, release: str) -> Path:
        if release not in self.pythons:
            self.pythons[release] = oracle_python(release)
        return self.pythons[release]

    def answer(self, release: str) -> dict:
        """The release's verdicts on every lane's flags and every gate body, in one run of the worker."""
        from vllm_bodies import gate_bodies

        if release not in self.answers:
            request = {"argvs": [flags(lane) for _, lane in LANES], "bodies": gate_bodies()}
            proc = subprocess.run([str(self.python(release)), "-W", "ignore", str(HERE / "oracle" / "vllm_worker.py"),
                                   str(PROBE)], input=json.dumps(request), capture_output=True, text=True, timeout=600,
                                  cwd=str(HERE))
            assert proc.returncode == 0, proc.stderr[-2000:]
            answer = json.loads(proc.stdout.strip().splitlines()[-1])
            assert answer["version"] == release, answer["version"]
            answer["sent"] = request["bodies"]
            self.answers[release] = answer
        return self.answers[release]

    def package_parent(self, release: str) -> Path:
        """Where the release's `vllm` package is (its site-packages; no vLLM import)."""
        if release not in self.sites:
            self.sites[release] = Path(subprocess.run(
                [str(self.python(release)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                capture_output=True, text=True, check=True).stdout.strip())
        return self.sites[release]


@pytest.fixture(scope="module")
def oracles() -> Oracles:
    return Oracles()


RELEASES = pytest.mark.parametrize("release", VLLM_RELEASES)


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


@RELEASES
@pytest.mark.parametrize("i", range(len(LANES)), ids=[w for w, _ in LANES])
def test_the_release_parses_the_lane(oracles: Oracles, release: str, i: int) -> None:
    oracle = oracles.answer(release)
    where, _ = LANES[i]
    verdict = oracle["verdicts"][i]
    problems = [f"{p['flag']}: {p['message']}" for p in verdict["problems"]]
    assert not problems, f"vLLM {release} ({oracle['parser']}) rejects {where}: {problems}"
    assert not verdict["abbreviations"], (where, verdict["abbreviations"])


def lane_parsers(lane) -> dict[str, str]:  # noqa: ANN001
    """kind -> the parser name a lane passes (`--tool-call-parser`, `--reasoning-parser`)."""
    argv = flags(lane)
    return {kind: argv[argv.index(flag) + 1] for kind, flag in (("tool", "--tool-call-parser"),
                                                                 ("reasoning", "--reasoning-parser"))
            if flag in argv[:-1]}


@RELEASES
def test_every_parser_a_lane_names_is_registered_in_the_release(oracles: Oracles, release: str) -> None:
    """argparse takes any name; the registries refuse an unknown one at startup (0.34 renamed musespark1x)."""
    oracle = oracles.answer(release)
    named = [(where, kind, name) for where, lane in LANES for kind, name in lane_parsers(lane).items()]
    assert named, "no vLLM lane names a tool-call parser: nothing checked"
    unknown = [f"{where}: --{kind.replace('tool', 'tool-call')}-parser {name}" for where, kind, name in named
               if name not in oracle["parsers"][kind]]
    assert not unknown, f"vLLM {release} has no such parser: {unknown}"


@RELEASES
def test_the_gates_read_the_releases_chat_answers(oracles: Oracles, release: str) -> None:
    """The tool gate's and the template gate's readers on answers the release's own models serialize;
    0.34 omits `annotations` and `prompt_tokens_details` when null (0.33 sent null) and takes `tools: []`
    (the gates send no empty `tools`: tools/harness.py and template/conversations.py drop it)."""
    from pytest_glmf.gates.template.conversations import Conversation
    from pytest_glmf.gates.template.served import served_prompt_ids
    from pytest_glmf.gates.tools.harness import answer_from_response

    answers = oracles.answer(release)["answers"]
    call = answer_from_response(answers["tool_call"])
    assert (call.calls, call.finish_reason, call.completion_tokens, call.content) == (
        [{"name": "get_weather", "arguments": '{"city": "Paris"}'}], "tool_calls", 7, "")
    text = answer_from_response(answers["text"])
    assert (text.calls, text.content, text.finish_reason) == ([], "Hello.", "stop")
    message, usage = answers["text"]["choices"][0]["message"], answers["text"]["usage"]
    null_keys_sent = release_key(release) < release_key("0.34.0")
    assert ("annotations" in message, "prompt_tokens_details" in usage) == (null_keys_sent, null_keys_sent)
    assert "tool_calls" not in message     # dropped when empty, in both

    class Client:                                                   # the chat route's answer, as served
        def post_json(self, path: str, body: dict) -> dict:
            assert path == "/v1/chat/completions" and body["return_token_ids"] is True
            return answers["text"]

    conv = Conversation("hello", [{"role": "user", "content": "Hi"}], [], {})
    assert served_prompt_ids(Client(), conv, via="chat") == [1, 2, 3]


@RELEASES
def test_a_lanes_preflight_under_the_release_answers_ok(oracles: Oracles, release: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    vllm_python = oracles.python(release)
    monkeypatch.setenv("GLMF_PREFLIGHT_CACHE", str(tmp_path / "cache"))
    where, lane = LANES[0]
    lane = replace(lane, launcher="process", executable=str(vllm_python), env={})
    result = preflight.check(lane, build_server_argv(lane))
    assert (result.status, result.engine, result.version, result.problems) == ("ok", "vllm", release, []), where
    bad = replace(lane, extra=[*lane.extra, "--mamba-cache-mode", "all"])
    with pytest.raises(preflight.PreflightError, match=rf"vLLM {re.escape(release)} .* --mamba-cache-mode \(lane key "
                                                       r"extra\) is rejected: invalid choice: 'all'"):
        preflight.check(bad, build_server_argv(bad))


# keys a gate sends on purpose for the other engine, in the one body it sends to both
FOR_SGLANG = {
    ("/v1/chat/completions", "return_prompt_token_ids"): "the template gate asks SGLang's spelling beside vLLM's "
                                                          "return_token_ids (gates/template/served.py)",
    ("/detokenize", "skip_special_tokens"): "SGLang's field; vLLM's DetokenizeRequest has none and decodes with "
                                            "special tokens kept, which is what the gate asks for",
}


@RELEASES
def test_every_body_the_gates_send_passes_the_releases_request_models(oracles: Oracles, release: str) -> None:
    oracle = oracles.answer(release)
    bad, dropped, seen = [], [], {}
    for sent, verdict in zip(oracle["sent"], oracle["bodies"], strict=True):
        path, body = sent["path"], sent["body"]
        seen[path] = seen.get(path, 0) + 1
        if path == "/detokenize" and any(isinstance(t, list) for t in body["tokens"]):
            # the batched form is SGLang's; vLLM refuses it and the template gate asks one id at a time
            assert not verdict["ok"], f"vLLM {release} takes batched /detokenize: the per-id fallback can go"
            continue
        if not verdict["ok"]:
            bad.append(f"{path} {sorted(body)}: {verdict['errors'][:2]}")
        elif [k for k in verdict["unknown_keys"] if (path, k) not in FOR_SGLANG]:
            dropped.append(f"{path} ({verdict['model']}) drops {verdict['unknown_keys']}")
    assert (bad, sorted(set(dropped))) == ([], [])
    assert {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"} <= set(seen), seen
    assert seen["/v1/chat/completions"] >= 100


def test_every_line_a_tracked_release_prints_is_pinned_for_it() -> None:
    """Every (release, line) the gate expects has a pin, and every pin is for such a pair: a release
    added to VLLM_RELEASES, or a line added to VLLM_LINES, fails here until pinned."""
    missing = {r: [name for name, printed in expected_vllm_lines(r).items() if printed and name not in VLLM_PINS.get(r, {})]
               for r in VLLM_RELEASES}
    missing = {r: names for r, names in missing.items() if names}
    assert not missing, (f"boot gate lines (gates/boot/vllm.py VLLM_LINES) with no pin for the release: {missing}: "
                         "add each to VLLM_PINS[release] (pytest_glmf/upgrade/surface.py) with its logging call's line "
                         "(test_the_pinned_format_is_in_the_release_and_the_gate_reads_it prints the lines found)")
    stray = {r: sorted(set(pins) - {n for n, printed in expected_vllm_lines(r).items() if printed})
             for r, pins in VLLM_PINS.items()}
    stray = {r: names for r, names in stray.items() if names}
    assert not stray and set(VLLM_PINS) <= set(VLLM_RELEASES), (
        f"pins for lines the gate does not expect in the release, or for untracked releases: {stray}, "
        f"{sorted(set(VLLM_PINS) - set(VLLM_RELEASES))}")
    assert declared_vllm_lines()["active_seqs_override_fit"] and len(VLLM_PINS[VLLM_RELEASES[-1]]) >= 10


CENSUS = [(r, f) for r in VLLM_RELEASES for f in vllm_boot_formats(r)]


@pytest.mark.parametrize(("release", "fmt"), CENSUS, ids=[f"{r}-{f.name}" for r, f in CENSUS])
def test_the_pinned_format_is_in_the_release_and_the_gate_reads_it(oracles: Oracles, release: str,
                                                                   fmt) -> None:  # noqa: ANN001
    package_parent = oracles.package_parent(release)
    where = source_has(package_parent, fmt.source, fmt.skeleton)
    assert where is not None, (f"{fmt.name}: vLLM {release} no longer prints {fmt.skeleton!r} (gates/boot/vllm.py "
                               f"says {fmt.source} prints it): give the line until={release!r} and declare the "
                               "release's wording beside it")
    lines = [ln for ln, sk in logged_formats(package_parent / where) if sk == fmt.skeleton] or [0]
    assert fmt.line is not None, f"{fmt.name}: no pin for vLLM {release}: VLLM_PINS[{release!r}][{fmt.name!r}] = {lines[0]}"
    if (where, fmt.line) != (fmt.source, lines[0]):
        warnings.warn(f"vLLM {release} {fmt.name}: {fmt.skeleton!r} moved from {fmt.source}:{fmt.line} to "
                      f"{where}:{lines[0]}", stacklevel=1)
    assert fmt.pattern.search(render(fmt)), (fmt.name, render(fmt))


@RELEASES
def test_a_line_the_gate_retired_is_gone_from_the_release(oracles: Oracles, release: str) -> None:
    """`until` is true: a wording the gate says the release no longer prints is not in its source (else the
    census would stop checking a line the release still prints)."""
    package_parent = oracles.package_parent(release)
    retired = [(name, x) for name, x in VLLM_LINES.items()
               if x.fmt and x.source and not expected_vllm_lines(release)[name]]
    # the declared file only: a walk of the whole package per retired line costs minutes
    still = [f"{name} ({x.source})" for name, x in retired if (package_parent / x.source).is_file()
             and any(sk == skeleton_of(x.fmt) for _, sk in skeletons(package_parent / x.source))]
    assert not still, f"vLLM {release} still prints {still}: fix `since`/`until` in gates/boot/vllm.py"


@RELEASES
def test_every_vllm_metric_the_gates_read_is_in_the_release(oracles: Oracles, release: str) -> None:
    package_parent = oracles.package_parent(release)
    names = metric_names("vllm")
    assert len(names) >= 6
    stems = {n: n.removesuffix("_total") for n in names}
    seen = source_mentions(package_parent, "vllm", sorted({*names, *stems.values()}))
    assert [n for n in names if not (seen[n] or seen[stems[n]])] == []
