"""`glmf report` reads what every `glmf <gate> --json` writes (it refused `glmf curve --json`'s own
output with "no curve rows"): each gate command runs against the simulator's daily lane (capacity
against a server whose truth is known), and its JSON is rendered as that gate's table; `glmf
compare` takes two curve outputs; a JSON that is neither is refused naming the file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_glmf.cli import main
from pytest_glmf.results.report import TITLES
from pytest_glmf.testing.truth_server import TruthServer


def report(path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = main(["report", str(path), *args])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return printed.out


def test_every_gate_commands_json_through_glmf_report(daily_sim, tmp_path: Path, capsys) -> None:
    url = daily_sim.base_url
    runs = {
        "curve": ["curve", "--url", url, "--users", "1,2", "--runs", "1", "--no-warmup", "--max-tokens", "16"],
        "accept": ["accept", "--url", url, "--max-tokens-scale", "0.05", "--prompts-per-class", "1"],
        "tools": ["tools", "--url", url],
        "agents": ["agents", "--url", url, "--sessions", "2", "--turns", "2", "--system-tokens", "100",
                   "--user-tokens", "20", "--max-tokens", "8", "--think-time", "0.1", "--time-scale", "0.02"],
    }
    titles = {"curve": TITLES["curve"], "accept": TITLES["acceptance"], "tools": TITLES["tools"],
              "agents": TITLES["agents"]}
    for name, argv in runs.items():
        out = tmp_path / f"{name}.json"
        main([*argv, "--json", str(out)])
        text = report(out, capsys)
        assert text.startswith(f"pytest-glmf results: lane {name}"), text
        assert f"\n{titles[name]}\n" in text, text
    curve = report(tmp_path / "curve.json", capsys)
    assert "\nusers | seats | aggregate |" in curve and "\n1     | " in curve and "\n2     | " in curve
    ref = tmp_path / "ref.json"
    assert main(["template", "reference", "--url", url, "--out", str(ref)]) == 0
    assert main(["template", "check", "--url", url, "--reference", str(ref), "--json", str(tmp_path / "t.json")]) == 0
    text = report(tmp_path / "t.json", capsys)   # one result: its header (on one or two lines), the rule, its row
    lines = text.split(f"\n{TITLES['template']}\n", 1)[1].split("\n\n")[0].splitlines()
    rule = next(i for i, ln in enumerate(lines) if "-+-" in ln)
    names = ["_".join(p for p in parts if p) for parts in zip(*([c.strip() for c in ln.split("|")]
                                                                 for ln in lines[:rule]))]
    rows = dict(zip(names, (c.strip() for c in lines[rule + 1].split("|"))))
    assert int(rows["conversations"]) > 0 and rows["matched"] == rows["conversations"] and rows["mismatched"] == "0", text
    log = daily_sim.boot_log_path
    assert main(["bootlog", str(log), "--json"]) == 0
    (tmp_path / "boot.json").write_text(capsys.readouterr().out)
    assert "\nBoot facts\nkey   | max_running | kv " in report(tmp_path / "boot.json", capsys)
    # two curve outputs compare like two lanes' result files
    (tmp_path / "again.json").write_text((tmp_path / "curve.json").read_text())
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "curve.json"), str(tmp_path / "again.json")]) == 0
    assert "users | curve (" in capsys.readouterr().out


def test_capacity_json_through_glmf_report(tmp_path: Path, capsys) -> None:
    out = tmp_path / "capacity.json"
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8) as truth:
        main(["capacity", "--url", truth.url, "--slo", "per_user_tok_s=26.88,ttft_s=1.0", "--prompt-tokens", "0",
              "--max-tokens", "60", "--runs", "1", "--resolution-users", "2", "--start", "22", "--json", str(out)])
    text = report(out, capsys)
    assert "\nCapacity under the service level\n" in text
    assert "users@file+60 |" in text


def test_a_json_that_is_no_result_is_refused_naming_the_file(tmp_path: Path, capsys) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"hello": 1}))
    assert main(["report", str(odd)]) == 2
    assert capsys.readouterr().err == (f"glmf report: {odd}: neither a pytest-glmf result file (no 'gates' section) "
                                       "nor the --json output of a glmf gate command (boot, curve, drift, acceptance, "
                                       "tools, capacity, template, agents)\n")
