"""`glmf history` (list, trend, export, import) and `glmf report --history K`, through the real
command entry point, on both dialects where a store is involved."""
from __future__ import annotations

import csv
import io
import json

import pytest

from pytest_glmf.cli import main
from pytest_glmf.results.history import open_store, parse_location


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def filled(location, make_doc) -> str:
    """Six nightly runs of lane batch (tok/s 50, 49, ...; the 4th failed) and one of lane daily."""
    with open_store(location) as store:
        for i in range(6):
            store.add_run(make_doc(i, {"per_user_tok_s": 50.0 - i, "ttft_p95_s": 0.7 + i / 100},
                                   exitstatus=1 if i == 3 else 0, image=f"sglang:n{i}"))
        store.add_run(make_doc(2, lane="daily", key="users=1", session_id="20261103-030000-da11"))
    return location.target


def test_list_shows_runs_per_lane_newest_first(capsys, filled, make_doc) -> None:
    code, out, _ = run(capsys, "history", "--store", filled)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "lane batch (6 run(s), newest first)"
    assert [c.strip() for c in lines[1].split(" | ")] == ["started", "session", "image", "engine", "model revision",
                                                          "gpu", "verdict"]
    assert [c.strip() for c in lines[3].split(" | ")] == ["2026-11-06T02:00:00Z", make_doc(5)["session_id"], "sglang:n5",
                                                          "sglang 0.5.5", "rev1", "NVIDIA GB300 x1", "passed"]
    assert [c.strip() for c in lines[5].split(" | ")][-1] == "failed"
    assert "lane daily (1 run(s), newest first)" in lines
    code, out, _ = run(capsys, "history", "list", "--store", filled, "--lane", "batch", "--last", "2")
    assert out.count("\n") == 5 and "lane daily" not in out    # title, header, rule, 2 runs


def test_trend_table_per_key_and_plot(capsys, filled, tmp_path) -> None:
    png = tmp_path / "trend.png"
    code, out, _ = run(capsys, "history", "trend", "curve.per_user_tok_s", "--store", filled, "--lane", "batch",
                       "--plot", str(png))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "curve.per_user_tok_s on lane batch (oldest first)"
    assert [c.strip() for c in lines[1].split(" | ")] == ["started", "session", "image", "verdict", "users=48"]
    assert [[c.strip() for c in ln.split(" | ")][-2:] for ln in lines[3:9]] == [
        ["passed", "50.0"], ["passed", "49.0"], ["passed", "48.0"], ["failed", "47.0"], ["passed", "46.0"],
        ["passed", "45.0"]]
    assert lines[-1] == f"plot written to {png}" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_trend_errors_are_one_line(capsys, filled) -> None:
    code, _, err = run(capsys, "history", "trend", "curve.tok_per_s", "--store", filled)
    assert code == 2 and err.startswith("glmf history: unknown metric 'curve.tok_per_s'; known: boot.max_running_requests")
    code, _, err = run(capsys, "history", "trend", "drift.kl_topk", "--store", filled)
    assert code == 2 and err == "glmf history: no stored run recorded drift.kl_topk\n"


def test_export_csv_one_row_per_run_and_metric(capsys, filled, tmp_path, make_doc) -> None:
    out_csv = tmp_path / "runs.csv"
    code, out, _ = run(capsys, "history", "export", str(out_csv), "--store", filled, "--lane", "batch")
    assert code == 0 and out == f"18 row(s) written to {out_csv}\n"
    with out_csv.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 18 and rows[0]["session_id"] == make_doc(0)["session_id"]
    first = {r["metric"]: r for r in rows[:3]}
    assert first["per_user_tok_s"]["value"] == "50.0" and first["per_user_tok_s"]["spread_pct"] == "1.0"
    assert first["ttft_p95_s"]["gpu"] == "NVIDIA GB300 x1" and first["ttft_p95_s"]["image"] == "sglang:n0"
    code, out, _ = run(capsys, "history", "export", "-", "--store", filled)
    assert len(list(csv.reader(io.StringIO(out)))) == 1 + 21


def test_import_a_results_directory_is_idempotent_and_skips_what_is_not_a_result(capsys, tmp_path, make_doc) -> None:
    results = tmp_path / "glmf-results"
    (results / "old").mkdir(parents=True)
    for i in range(3):
        (results / f"batch-{make_doc(i)['session_id']}.json").write_text(json.dumps(make_doc(i)))
    (results / "old" / "batch-x.json").write_text(json.dumps(make_doc(7, incomplete=["killed"])))
    (results / "batch-latest.json").write_text(json.dumps(make_doc(2)))       # a copy: not read
    (results / "thresholds.json").write_text('{"schema": 1}')
    (results / "broken.json").write_text("{not json")
    store = str(tmp_path / "h.sqlite")
    code, out, err = run(capsys, "history", "import", str(results), "--store", store)
    assert code == 0
    assert out == f"imported 4 run(s) into {store} (1 incomplete, 3 passed); 2 file(s) skipped (not pytest-glmf result files)\n"
    assert err.splitlines() == [f"skipped {results / 'broken.json'}: Expecting property name enclosed in double quotes: "
                                "line 1 column 2 (char 1)",
                                f"skipped {results / 'thresholds.json'}: neither a pytest-glmf result file (no 'gates' "
                                "section) nor the --json output of a glmf gate command (boot, curve, drift, "
                                "acceptance, tools, capacity, template, agents)"]
    run(capsys, "history", "import", str(results), "--store", store)
    with open_store(parse_location(store, tmp_path, tmp_path)) as s:
        assert len(s.runs()) == 4


def test_a_store_fault_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch) -> None:
    bad = tmp_path / "history.sqlite"
    bad.write_text("junk " * 1000)
    code, out, err = run(capsys, "history", "--store", str(bad))
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"glmf history: history store {bad}: opening: not a readable SQLite database")
    code, _, err = run(capsys, "history", "--store", str(tmp_path / "none.sqlite"))
    assert code == 2 and err == (f"glmf history: no history store at {tmp_path / 'none.sqlite'} yet (sessions create "
                                 "it; `glmf history import DIR` fills it from result files)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GLMF_HISTORY", "mysql://x/y")
    code, _, err = run(capsys, "history")
    assert code == 2 and err.startswith("glmf history: 'mysql' is not a store this plugin knows")


def test_report_shows_the_last_k_runs_beside_this_one(capsys, filled, tmp_path, make_doc) -> None:
    this = make_doc(9, {"per_user_tok_s": 44.0})
    result = tmp_path / "batch-this.json"
    result.write_text(json.dumps(this))
    code, out, _ = run(capsys, "report", str(result), "--history", "3", "--store", filled)
    assert code == 0
    section = out[out.index("History:"):].splitlines()
    assert section[0] == "History: this run beside the last 3 on its lane (oldest first)"
    assert [c.strip() for c in section[1].split(" | ")] == ["metric", "#1", "#2", "#3", "this run"]
    rows = {ln.split(" | ")[0].strip(): [c.strip() for c in ln.split(" | ")[1:]] for ln in section[3:6]}
    assert rows["curve.per_user_tok_s [users=48]"] == ["47.0", "46.0", "45.0", "44.0"]
    assert section[6] == f"  #1: {make_doc(3)['session_id']} 2026-11-04T02:00:00Z failed image sglang:n3"
    code, _, err = run(capsys, "report", str(result), "--history", "3", "--store", str(tmp_path / "no.sqlite"))
    assert code == 2 and err == f"glmf report: no history store at {tmp_path / 'no.sqlite'}\n"


def test_history_is_a_glmf_command(capsys) -> None:
    code, out, _ = run(capsys, "--help")
    assert "  history     stored runs per lane, metric trends, CSV export, re-import" in out.splitlines()
    with pytest.raises(SystemExit):
        main(["history", "--help"])
    assert "export" in capsys.readouterr().out


@pytest.mark.postgres
def test_the_password_in_a_postgres_store_url_is_printed_masked(capsys, pg_url) -> None:
    from urllib.parse import urlsplit

    password = urlsplit(pg_url).password
    code, out, err = run(capsys, "history", "--store", pg_url)
    assert code == 0 and password and password not in out + err
    assert out == f"no runs stored in {pg_url.replace(':' + password + '@', ':***@')}\n"
