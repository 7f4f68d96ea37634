"""One document per measurement (issue 41 item 4): every `glmf <gate> --json` writes a result
document, the shape a pytest session's result file has, its gate named by its `gates` key and its
entries shaped as the suite's fixture records them; `glmf report` renders it and `glmf compare`
takes it. Each gate command runs as a user runs it: against the simulator's daily lane (capacity
against a server whose truth is known), then a pytest session measures the same gates on the same
server and its result file's entries have the same keys. Files of older versions (the command's
own shape at top level) are still read, their gate guessed from their keys, and an interrupted
one says INCOMPLETE first (issue 40 item 4)."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.cli import main
from pytest_glmf.gates.registry import gate_title
from pytest_glmf.testing.truth_server import TruthServer

GATES = ["boot", "curve", "drift", "acceptance", "tools", "capacity", "template", "agents"]
CAPACITY = ["--slo", "per_user_tok_s=26.88,ttft_s=1.0", "--prompt-tokens", "0", "--max-tokens", "60", "--runs", "1",
            "--resolution-users", "2", "--start", "22"]


def glmf(*argv: str) -> tuple[int, str]:
    """`glmf ARGV`: its exit status and stdout."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def outputs(daily_sim, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """gate -> the file its command's --json wrote (bootlog and drift compare print it: redirected)."""
    tmp, url = tmp_path_factory.mktemp("gate-json"), daily_sim.base_url
    out = {gate: tmp / f"{gate}.json" for gate in GATES}
    small = ["--max-tokens", "8", "--template", "sim", "--score-concurrency", "2"]
    runs = {
        "curve": ["curve", "--url", url, "--users", "1,2", "--runs", "1", "--no-warmup", "--max-tokens", "16"],
        "acceptance": ["accept", "--url", url, "--max-tokens-scale", "0.05", "--prompts-per-class", "1"],
        "tools": ["tools", "--url", url],
        "agents": ["agents", "--url", url, "--sessions", "2", "--turns", "2", "--system-tokens", "100",
                   "--user-tokens", "20", "--max-tokens", "8", "--think-time", "0.1", "--time-scale", "0.02"],
    }
    for gate, argv in runs.items():
        glmf(*argv, "--json", str(out[gate]))
    ref = tmp / "template-ref.json"
    assert glmf("template", "reference", "--url", url, "--out", str(ref))[0] == 0
    glmf("template", "check", "--url", url, "--reference", str(ref), "--json", str(out["template"]))
    code, printed = glmf("bootlog", str(daily_sim.boot_log_path), "--json")
    assert code == 0
    out["boot"].write_text(printed)
    drift_ref, cand = tmp / "drift-ref.json", tmp / "cand.json"
    assert glmf("drift", "reference", "--url", url, "--out", str(drift_ref), "--prompts", "2", "--k", "5", *small)[0] == 0
    assert glmf("drift", "score", "--url", url, "--reference", str(drift_ref), "--out", str(cand), "--label", "sim",
                "--template", "sim", "--score-concurrency", "2")[0] == 0
    code, printed = glmf("drift", "compare", str(drift_ref), str(cand), "--json", "--resamples", "50")
    assert code == 0
    out["drift"].write_text(printed)
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8) as truth:
        glmf("capacity", "--url", truth.url, *CAPACITY, "--json", str(out["capacity"]))
    return out


@pytest.mark.parametrize("gate", GATES)
def test_glmf_report_reads_every_gate_commands_json(gate: str, outputs: dict[str, Path]) -> None:
    doc = json.loads(outputs[gate].read_text())
    # the document names its gate: no key guessing; the command and when beside it
    assert list(doc["gates"]) == [gate] and doc["gates"][gate], doc.keys()
    assert doc["provenance"]["written_by"].startswith("glmf ") and doc["provenance"]["started_at"]
    assert doc["session_id"] and "incomplete" not in doc
    code, text = glmf("report", str(outputs[gate]))
    assert code == 0, text
    assert text.startswith(f"pytest-glmf results: lane {gate}"), text        # the lane named after the file
    assert f"\n{gate_title(gate)}\n" in text, text


def test_the_reports_of_curve_template_boot_and_capacity_show_what_the_commands_printed(outputs, daily_sim) -> None:
    curve = glmf("report", str(outputs["curve"]))[1]
    assert "\nusers | seats | aggregate |" in curve and "\n1     | " in curve and "\n2     | " in curve
    text = glmf("report", str(outputs["template"]))[1]   # one result: its header (on one or two lines), the rule, its row
    lines = text.split(f"\n{gate_title('template')}\n", 1)[1].split("\n\n")[0].splitlines()
    rule = next(i for i, ln in enumerate(lines) if "-+-" in ln)
    names = ["_".join(p for p in parts if p) for parts in zip(*([c.strip() for c in ln.split("|")]
                                                                 for ln in lines[:rule]))]
    rows = dict(zip(names, (c.strip() for c in lines[rule + 1].split("|"))))
    assert int(rows["conversations"]) > 0 and rows["matched"] == rows["conversations"] and rows["mismatched"] == "0", text
    # glmf bootlog --json says the engine's version (null: SGLang prints none at boot), where a session's file keeps it
    boot = json.loads(outputs["boot"].read_text())
    assert boot["provenance"]["engine"] == "sglang" and "engine_version" in boot["provenance"]
    assert "\nBoot facts\nkey   | max_running | kv " in glmf("report", str(outputs["boot"]))[1]
    vllm = Path(__file__).parents[1] / "gates" / "boot" / "bootlogs" / "vllm_cpu_smollm2_boot.log"
    (outputs["boot"].parent / "vllm-boot.json").write_text(glmf("bootlog", str(vllm), "--json")[1])
    assert "engine_version 0.32.0" in glmf("report", str(outputs["boot"].parent / "vllm-boot.json"))[1]


def test_glmf_report_of_capacity_shows_the_answer_boundary_interval_and_probes(tmp_path: Path, unfold) -> None:
    """Issue 40 item 2: `glmf report cap.json` showed users, stopped_by and a probe count; now the
    sentence and the probes' tables `glmf capacity` printed, from the document alone."""
    out = tmp_path / "cap.json"
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8) as truth:
        code, printed = glmf("capacity", "--url", truth.url, *CAPACITY, "--json", str(out))
    assert code == 0, printed
    code, text = glmf("report", str(out))
    assert code == 0 and "\nCapacity under the service level\n" in text and "users@file+60 |" in text
    assert printed.strip() in unfold(text), (printed, text)     # every line the command printed, in order
    assert max(map(len, text.splitlines())) <= 120              # the sentence folded as the report's lines are
    assert "; the boundary (a fit of the probes' margins) at " in unfold(text) and "| pass (last pass)" in text


def test_two_curve_outputs_compare_like_two_lanes(outputs, tmp_path: Path) -> None:
    again = tmp_path / "again.json"
    again.write_text(outputs["curve"].read_text())
    code, text = glmf("compare", str(outputs["curve"]), str(again))
    assert code == 0 and "users | curve (" in text


# ---------------------------------------------------------------------------- the same shape as the result file

SESSION = """
from pytest_glmf.gates.capacity import SLO


def test_gates(glmf_curve, glmf_tools, glmf_agents, glmf_acceptance, glmf_capacity, glmf_template, glmf_boot_facts,
               glmf_results, tmp_path):
    glmf_curve([1, 2], runs=1, warmup=False, max_tokens=16)
    glmf_tools()
    glmf_agents(sessions=2, turns=2, system_tokens=100, user_tokens=20, max_tokens=8, think_time_s=0.1)
    glmf_acceptance(max_tokens_scale=0.05, prompts_per_class=1)
    glmf_capacity.measure(SLO(per_user_tok_s=1e6), prompt_tokens=None, max_tokens=8, runs=1, start_users=1,
                          max_users=2)
    glmf_template(reference={reference!r})
    glmf_results.record("boot", "facts", glmf_boot_facts.to_dict())     # as the boot suite records it
"""


def shape(entry: Any) -> Any:
    """An entry's keys (a list of entries: its type), what a reader of either document relies on."""
    return sorted(entry) if isinstance(entry, dict) else type(entry).__name__


def test_a_commands_entries_have_the_result_files_shape(pytester: pytest.Pytester, daily_sim, outputs) -> None:
    ref = outputs["template"].parent / "template-ref.json"
    pytester.makepyfile(test_mine=SESSION.format(reference=str(ref)))
    result = pytester.runpytest("--glmf-lane", "daily", "--glmf-url", daily_sim.base_url, "--glmf-results", "results",
                                "--glmf-allow-unverified", "-p", "no:cacheprovider", "-p", "no:randomly", "test_mine.py")
    result.assert_outcomes(passed=1)
    session = json.loads((pytester.path / "results" / "daily-latest.json").read_text())["gates"]
    for gate in ("curve", "tools", "agents", "acceptance", "capacity", "template", "boot"):
        mine = json.loads(outputs[gate].read_text())["gates"][gate]
        theirs = session[gate]
        if gate == "boot":      # an attached server has no boot log: the suite then records only the facts
            mine = {"facts": mine["facts"]}
        # the suite keys by test name, the command by what it measured: the entries' shapes must agree
        assert {json.dumps(shape(e)) for e in mine.values()} == {json.dumps(shape(e)) for e in theirs.values()}, gate
    # drift: each candidate as DriftResult.to_record() (the suite's record) of the same files
    from pytest_glmf.gates.drift.api import result_of

    drift = json.loads(outputs["drift"].read_text())["gates"]["drift"]
    tmp = outputs["drift"].parent
    record = result_of(json.loads((tmp / "drift-ref.json").read_text()), json.loads((tmp / "cand.json").read_text()))
    assert shape(drift["sim"]) == shape(record.to_record())


# ---------------------------------------------------------------------------- older files, incomplete ones

def old_shape(gate: str, doc: dict[str, Any]) -> dict[str, Any]:
    """What the command wrote before this version: its own output at top level (now `command_output`)."""
    (entry, *_) = doc["gates"][gate].values()
    if gate in ("tools", "template"):
        return entry                                    # their summary was the whole output
    if gate == "boot":
        return doc["gates"]["boot"]["facts"]            # BootFacts.to_dict()
    if gate == "agents":
        return {"agents": entry, **doc["command_output"]}
    return doc["command_output"]


def test_an_interrupted_file_of_an_older_version_reads_incomplete_first(outputs, tmp_path: Path) -> None:
    """Issue 40 item 4: `glmf report` of an interrupted `glmf curve --json` printed its rows, no
    INCOMPLETE line, exit 0 (the guess kept the rows and dropped `incomplete`)."""
    whole = old_shape("curve", json.loads(outputs["curve"].read_text()))
    old = tmp_path / "curve.json"
    old.write_text(json.dumps({**whole, "rows": whole["rows"][:1],
                               "incomplete": ["interrupted (Ctrl-C / SIGINT) before the end"]}))
    code, text = glmf("report", str(old))
    assert code == 1
    assert text.splitlines()[:2] == ["INCOMPLETE: interrupted (Ctrl-C / SIGINT) before the end",
                                     "pytest-glmf results: lane curve"]
    assert "\nusers | seats | aggregate |" in text and "\n1     | " in text and "\n2     | " not in text
    # glmf compare says which lane is incomplete; the history stores the run as incomplete
    (tmp_path / "whole.json").write_text(json.dumps(whole))
    code, text = glmf("compare", str(old), str(tmp_path / "whole.json"))
    assert code == 0 and "curve (session curve) INCOMPLETE; whole (session whole)" in text.splitlines()[0], text
    store = tmp_path / "h.sqlite"
    code, text = glmf("history", "import", str(old), "--store", str(store))
    assert code == 0 and text == f"imported 1 run(s) into {store} (1 incomplete)\n"


def test_glmf_report_help_says_what_its_exit_status_means(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1 when it was rendered but is INCOMPLETE" in text


@pytest.mark.parametrize("gate", GATES)
def test_files_of_older_versions_are_read_by_their_keys(gate: str, outputs, tmp_path: Path) -> None:
    """The fallback for files older versions wrote: the gate guessed from the keys, its table shown."""
    old = tmp_path / f"old-{gate}.json"
    old.write_text(json.dumps(old_shape(gate, json.loads(outputs[gate].read_text()))))
    code, text = glmf("report", str(old))
    assert code == 0 and f"\n{gate_title(gate)}\n" in text, text


def test_a_json_that_is_no_result_is_refused_naming_the_file(tmp_path: Path, capsys) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"hello": 1}))
    assert main(["report", str(odd)]) == 2
    assert capsys.readouterr().err == (f"glmf report: {odd}: neither a pytest-glmf result file (no 'gates' section) "
                                       "nor the --json output of a glmf gate command (boot, curve, drift, acceptance, "
                                       "tools, capacity, template, agents)\n")
