"""The comparison report from result documents whose numbers are written down (the recipe's round 2),
`glmf compare` on result files (its errors name the file or option), and the state pool's bytes
per seat read from the simulator's boot log (the recipe: 120 DFlash2 slots cost 41 GB)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.cli import main
from pytest_glmf.compare.report import comparison_markdown, comparison_report
from pytest_glmf.gates.boot.parse import parse_boot_log
from pytest_glmf.gates.boot.sglang import state_pool


def doc(lane: str, seats: int, rows: list[tuple[int, float, float]], **gates: Any) -> dict[str, Any]:
    curve = {f"users={u}": {"users": u, "seats": seats, "aggregate_tok_s": agg, "per_user_tok_s": pu,
                            "ttft_p95_s": 0.5, "spread_pct": 2.0, "valid": True,
                            "seat": {"seats": seats, "shared": u > seats}} for u, agg, pu in rows}
    boot = {"facts": {"max_running_requests": seats, "cap_reason": f"max_running_requests capped to {seats} by the "
                      "mamba state cache (max_mamba_cache_size=38, 5 state slots per request): increase it"}}
    return {"schema": 1, "session_id": f"s-{lane}", "lane": {"name": lane, "origin": None},
            "provenance": {"engine": "sglang"}, "gates": {"curve": curve, "boot": boot, **gates}}


# the recipe's round-2 table (aggregate, per user); the 7-slot lane's per-user numbers are aggregate / users
ROUND1 = doc("dflash2-7", 7, [(8, 491, 61.4), (16, 503, 31.4)])
SLOTS120 = doc("dflash2-120", 24, [(8, 743, 106), (16, 1180, 86), (24, 1482, 72)],
               acceptance={"prose": {"class": "prose", "accept_rate": 0.29, "tok_s": 185}})
AR = doc("ar", 128, [(8, 668, 90), (16, 1075, 72), (24, 1350, 56)],
         capacity={"users@2400+384": {"users": 48, "stopped_by": "slo"}})


def test_the_recipe_table_shape_with_the_over_seat_rows_flagged() -> None:
    text = comparison_report([ROUND1, SLOTS120, AR])
    assert "users | dflash2-7 (7 seats)" in text and "| dflash2-120 (24 seats)" in text and "| ar (128 seats)" in text
    # the table fits 120 columns: the longest flag goes under the table as a numbered note
    assert "16    | 503 · 31.4/user · p95 0.5 s note 1" in text and "\nnote 1: 16 users on 7 seats\n" in text
    assert max(map(len, text.splitlines())) <= 120
    assert "24    | -" in text     # round 1 had no 24-user row
    assert "dflash2-120 beats ar per user at every valid users value (8-24)" in text
    assert "excluded: dflash2-7 @ 16 users: seat-starved: 16 users on 7 seats" in text
    assert "prose | -" in text and "0.29 (185 tok/s)" in text
    assert "users@2400+384 | -" in text and "48 (stopped by slo)" in text
    assert "why capped                   | note 1    | note 2      | note 3" in text   # numbered per table
    assert "note 1: max_running_requests capped to 7 by the mamba state cache (max_mamba_cache_size=38, 5 state slots " \
           "per request)" in text
    assert "8     | 491 · 61.4/user · p95 0.5 s [8 users on 7 seats] | 743 · 106/user · p95 0.5 s" in text


def test_markdown_for_a_pr_comment() -> None:
    md = comparison_markdown([SLOTS120, AR])
    assert md.startswith("## pytest-glmf comparison: dflash2-120 (session s-dflash2-120, sglang); ar (session s-ar")
    assert "| users | dflash2-120 (24 seats) | ar (128 seats) |" in md
    assert "| 16 | 1,180 · 86.0/user · p95 0.5 s | 1,075 · 72.0/user · p95 0.5 s |" in md
    assert "- dflash2-120 beats ar per user at every valid users value (8-24)" in md


def test_state_pool_and_bytes_per_seat_from_the_boot_log() -> None:
    from pytest_glmf.config.lanes import build_server_argv, builtin_lanes
    from pytest_glmf.sim.boot import boot_log_text

    text = boot_log_text(build_server_argv(builtin_lanes()["batch"])[3:])
    pool = state_pool(text, parse_boot_log(text).state_slots_per_request)
    # 640 bf16 slots in 43 GB (the recipe), 5 slots per request: 128 seats, 0.34 GB each
    assert pool["slots"] == 640 and pool["total_gb"] == pytest.approx(43.0, abs=0.1)
    assert pool["gb_per_seat"] == pytest.approx(43.0 / 128, abs=0.002)
    assert state_pool("no such line", 5) is None
    with_pool = json.loads(json.dumps(AR))
    with_pool["gates"]["boot"]["state_pool"] = pool
    line = next(x for x in comparison_report([SLOTS120, with_pool]).splitlines() if x.startswith("state pool GiB per seat"))
    assert line.split("|")[1].strip() == "-" and line.split("|")[2].strip() == "0.336"


def test_glmf_compare_on_files_and_its_errors(tmp_path: Path, capsys) -> None:
    paths = []
    for d in (SLOTS120, AR):
        paths.append(tmp_path / f"{d['lane']['name']}.json")
        paths[-1].write_text(json.dumps(d))
    md = tmp_path / "c.md"
    assert main(["compare", *map(str, paths), "--markdown", str(md), "--crossover", "ar,dflash2-120"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(comparison_report([SLOTS120, AR]))
    assert "\ndflash2-120 beats ar per user at every valid users value (8-24)\n" in out
    assert md.read_text() == comparison_markdown([SLOTS120, AR])
    assert main(["compare", str(paths[0])]) == 2
    assert "give two result files at least" in capsys.readouterr().err
    assert main(["compare", str(paths[0]), str(tmp_path / "nope.json")]) == 2
    assert f"{tmp_path / 'nope.json'}: cannot read the result file" in capsys.readouterr().err
    assert main(["compare", *map(str, paths), "--metric", "speed"]) == 2
    assert "metric 'speed' is not a curve metric; allowed: aggregate_tok_s" in capsys.readouterr().err
    assert main(["compare", *map(str, paths), "--crossover", "ar"]) == 2
    assert "--crossover takes two lane names of the results, A,B; lanes: dflash2-120, ar" in capsys.readouterr().err


def test_glmf_compare_says_why_a_lane_is_incomplete(tmp_path: Path, capsys) -> None:
    """An incomplete lane's reasons under the headline, as `glmf report` leads with them (the
    comparison said INCOMPLETE and not why); the Markdown says them too."""
    stopped = {**AR, "incomplete": ["interrupted (Ctrl-C / SIGINT) before the end", "the server died at 24 users"]}
    paths = [tmp_path / "slots.json", tmp_path / "ar.json"]
    for path, d in zip(paths, (SLOTS120, stopped)):
        path.write_text(json.dumps(d))
    assert main(["compare", *map(str, paths), "--markdown", str(tmp_path / "c.md")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("; ar (session s-ar, sglang) INCOMPLETE")
    assert lines[1] == ("INCOMPLETE ar: interrupted (Ctrl-C / SIGINT) before the end; the server died at 24 users")
    assert lines[2] == ""
    md = (tmp_path / "c.md").read_text()
    assert ("INCOMPLETE\n\n**INCOMPLETE ar: interrupted (Ctrl-C / SIGINT) before the end; the server died at 24 "
            "users**\n\n### ") in md
    assert "INCOMPLETE dflash2-120" not in md and comparison_report([SLOTS120, AR]).splitlines()[1] == ""


def test_glmf_compare_plot(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    paths = []
    for d in (ROUND1, AR):
        paths.append(tmp_path / f"{d['lane']['name']}.json")
        paths[-1].write_text(json.dumps(d))
    png = tmp_path / "c.png"
    assert main(["compare", *map(str, paths), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rows_of_different_workloads_are_flagged_and_not_compared(tmp_path: Path, capsys) -> None:
    """max_tokens 384 on one lane and 128 on the other measure different things: the row says which
    setting differs, the crossover leaves it out, and `glmf compare` warns first."""
    a = doc("long", 128, [(8, 700, 90), (16, 1100, 70)])
    b = doc("short", 128, [(8, 600, 80), (16, 1000, 60)])
    for d, max_tokens, prompt in ((a, 384, 2432), (b, 128, 2400)):
        for row in d["gates"]["curve"].values():
            row.update(max_tokens=max_tokens, prompt_tokens_p50=prompt, shared_prefix=False)
    b["gates"]["curve"]["users=16"]["max_tokens"] = 384           # 16 users: the same workload
    b["gates"]["curve"]["users=16"]["shared_prefix"] = True       # ... but for the shared prefix
    text = comparison_report([a, b])
    assert "WARNING: the lanes ran different workloads at 8, 16 users" in text
    assert "note 1: workloads differ: max_tokens 384 (long) vs 128 (short)" in text   # 2,432 vs 2,400: within 5 %
    assert "note 2: workloads differ: shared_prefix False (long) vs True (short)" in text
    assert ("long vs short per user: no users value with a valid row on both lanes; not compared at 8 users: "
            "the workloads differ (max_tokens 384 (long) vs 128 (short)); not compared at 16 users: the "
            "workloads differ (shared_prefix False (long) vs True (short))") in text.replace("\n    ", " ")
    b["gates"]["curve"]["users=16"]["shared_prefix"] = False
    b["gates"]["curve"]["users=16"]["prompt_tokens_p50"] = 1200
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for p, d in zip(paths, (a, b)):
        p.write_text(json.dumps(d))
    assert main(["compare", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    assert "prompt tokens (p50) 2432 (long) vs 1200 (short)" in out
    same = doc("same", 128, [(8, 600, 80)])
    assert "WARNING" not in comparison_report([doc("other", 128, [(8, 700, 90)]), same])


def test_the_lanes_picture_labels_from_the_metric_definitions_and_marks_shared_prefix_rows(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from unittest import mock

    from pytest_glmf.compare import report
    from pytest_glmf.results import plotting

    a, b = doc("a", 128, [(8, 700, 90), (48, 2400, 50), (96, 3800, 40)]), doc("b", 128, [(8, 600, 80), (48, 2200, 45)])
    a["gates"]["curve"]["users=96"]["shared_prefix"] = True
    a["provenance"].update(image="sglang:new", started_at="2026-12-02T13:34:51+00:00")
    a["exitstatus"] = 0
    with mock.patch.object(report, "save_png", lambda fig, out: fig):
        fig = report.plot_lanes([a, b], tmp_path / "x.png")
    tok, ttft = fig.get_axes()
    assert tok.get_ylabel() == "per-user decode rate (tok/s)" and ttft.get_ylabel() == "TTFT p95 (s)"
    assert tok.get_title() == ("Lanes compared: a (image sglang:new, 2026-12-02 13:34, passed); "
                               "b (image -, date unknown, verdict not recorded)")
    assert [t.get_text() for t in ttft.get_legend().get_texts()] == [
        "prefix shared by all users: a prefix cache computes it once (TTFT not comparable)"]
    joined = [list(line.get_xdata()) for line in ttft.get_lines() if line.get_linestyle() in ("-", "--")]
    assert [8, 48] in joined and [96] in joined and [8, 48, 96] not in joined   # no line into the shared row
    plotting.pyplot().close(fig)
