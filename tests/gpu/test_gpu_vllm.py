"""The plugin against vLLM on a GPU (docs/gpu.md has the numbers): the curve's rows valid with the
default client plan, beside `vllm bench serve` on the same server, runs interleaved; the burst
against bench's refilled concurrency; the seats from /server_info; capacity with its interval; the
ready-made suites attached to the server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_glmf.gates.boot.told import shell_facts
from pytest_glmf.gates.curve.cli import cli as curve_cli
from pytest_glmf.load import median, spread_pct

USERS = [1, 8, 32, 128]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def curve(url: str, users: list[int], out: Path, *extra: str) -> dict:
    rc = curve_cli(["--url", url, "--users", ",".join(map(str, users)), "--json", str(out), *extra])
    data = json.loads(out.read_text())["command_output"]    # the runner's rows with their records
    data["rc"] = rc
    return data


def bench(url: str, users: int, prompts: int, input_len: int, out: Path, output_len: int = 384) -> dict:
    """`vllm bench serve` on the same server with the curve's prompt and output lengths."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "openai-chat",
           "--endpoint", "/v1/chat/completions", "--base-url", url, "--model", os.environ["GLMF_GPU_MODEL"],
           "--served-model-name", os.environ["GLMF_GPU_SERVED"], "--dataset-name", "random",
           "--random-input-len", str(input_len), "--random-output-len", str(output_len), "--ignore-eos",
           "--max-concurrency", str(users), "--num-prompts", str(prompts), "--percentile-metrics", "ttft,tpot,itl",
           "--metric-percentiles", "50,95", "--save-result", "--result-dir", str(out.parent),
           "--result-filename", out.name, "--seed", str(int(time.time()) % 10000)]
    try:   # in this process: vLLM's import (~20 s) once for every bench run of the stage
        _bench_here(cmd[cmd.index("serve") + 1:])
    except ImportError:
        subprocess.run(cmd, check=True, capture_output=True, timeout=180)
    r = json.loads(out.read_text())
    return {"users": users, "prompts": prompts, "per_user_tok_s": 1e3 / r["median_tpot_ms"],
            "ttft_p50_s": r["median_ttft_ms"] / 1e3, "ttft_p95_s": r.get("p95_ttft_ms", 0) / 1e3,
            "output_tok_s": r["output_throughput"], "itl_p50_ms": r.get("median_itl_ms")}


def _bench_here(argv: list[str]) -> None:
    import argparse

    from vllm.benchmarks.serve import add_cli_args, main
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser as Parser
    except ImportError:
        try:
            from vllm.utils import FlexibleArgumentParser as Parser  # type: ignore[no-redef]
        except ImportError:
            Parser = argparse.ArgumentParser  # type: ignore[assignment,misc]
    parser = Parser()
    add_cli_args(parser)
    main(parser.parse_args(argv))


def test_curve_rows_are_valid_with_the_default_client_plan(gpu_url, gpu_out, record):
    data = curve(gpu_url, USERS, gpu_out / "curve.json")
    rows = data["rows"]
    summary = [{k: r.get(k) for k in ("users", "valid", "per_user_tok_s", "aggregate_tok_s", "ttft_p50_s",
                                      "ttft_p95_s", "itl_p95_s", "spread_pct", "seats", "workers", "client_bound",
                                      "client_error")} for r in rows]
    record({"load": load(), "rows": summary,
            "flags": {r["users"]: [n for x in r["per_run"] for n in x["client"]["notes"]] for r in rows}})
    assert [r["users"] for r in rows] == USERS
    for r in rows:
        assert not r["client_bound"], (r["users"], [x["client"]["notes"] for x in r["per_run"]])
        assert r["seats"] == 1024


def test_curve_beside_vllm_bench_interleaved(gpu_url, gpu_out, record):
    """Per-user tok/s and TTFT p50 at 1 and 32 users: the curve and the bench, one after the other,
    three rounds on the same server; both tools' spreads over the rounds are the yardstick."""
    out: dict = {"load_before": load(), "rounds": []}
    prompt_tokens = None
    for rnd in range(3):
        for users in (1, 32):
            c = curve(gpu_url, [users], gpu_out / f"c{users}_{rnd}.json", "--runs", "1")["rows"][0]
            prompt_tokens = prompt_tokens or int(c["prompt_tokens_p50"])
            b = bench(gpu_url, users, users, prompt_tokens, gpu_out / f"b{users}_{rnd}.json")
            out["rounds"].append({"round": rnd + 1, "users": users,
                                  "curve": {k: c[k] for k in ("per_user_tok_s", "ttft_p50_s", "ttft_p95_s",
                                                              "aggregate_tok_s", "valid")}, "bench": b})
    out["prompt_tokens"] = prompt_tokens
    out["load_after"] = load()
    verdicts = {}
    for users in (1, 32):
        rs = [r for r in out["rounds"] if r["users"] == users]
        for key in ("per_user_tok_s", "ttft_p50_s"):
            cv, bv = [r["curve"][key] for r in rs], [r["bench"][key] for r in rs]
            gap = abs(median(cv) - median(bv)) / median(bv) * 100
            allowed = max(spread_pct(cv), spread_pct(bv))
            verdicts[f"{key}@{users}"] = {"curve": cv, "bench": bv, "gap_pct": gap, "spread_pct": allowed}
    out["verdicts"] = verdicts
    record(out)
    for name, v in verdicts.items():
        assert v["gap_pct"] <= v["spread_pct"] + 5, (name, v)


def test_burst_against_bench_refilled_concurrency(gpu_url, gpu_out, record):
    """The recipe's burst (all users start together, one request each) against bench's refilled
    concurrency (4 x users requests, a new one as each ends) at 32 and 128 users."""
    pt = json.loads((gpu_out / "curve.json").read_text())["command_output"]["rows"][0]["prompt_tokens_p50"] if (
        gpu_out / "curve.json").exists() else 2169
    rows = []
    for users in (32, 128):
        rows.append({"users": users, "burst": bench(gpu_url, users, users, int(pt), gpu_out / f"burst{users}.json"),
                     "refilled": bench(gpu_url, users, 4 * users, int(pt), gpu_out / f"refill{users}.json")})
    record({"load": load(), "rows": rows})


def test_seats_from_server_info(gpu_url, record):
    facts, said = shell_facts(gpu_url, None)
    record({"facts": facts, "said": said})
    assert facts and facts["max_running_requests"] == 1024 and "/server_info" in said


def test_capacity_answers_with_an_interval(gpu_url, gpu_out, record):
    out = gpu_out / "capacity.json"
    proc = subprocess.run([sys.executable, "-m", "pytest_glmf.cli", "capacity", "--url", gpu_url, "--slo",
                           "per_user_tok_s=150,ttft_s=2", "--runs", "1", "--max-users", "512", "--json", str(out)],
                          capture_output=True, text=True, timeout=280)
    record({"load": load(), "rc": proc.returncode, "stdout": proc.stdout[-4000:], "stderr": proc.stderr[-6000:]})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "none: even 1 users missed" not in proc.stdout


def test_ready_made_suites_attached(gpu_url, gpu_out, tmp_path, record):
    lanes = tmp_path / "lanes.yaml"
    log = os.environ.get("GLMF_GPU_BOOT_LOG", "")
    lanes.write_text(f"schema: 1\nlanes:\n  gpu: {{launcher: attach, engine: vllm, url: '{gpu_url}', boot_log: '{log}'}}\n")
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text("schema: 1\nlanes:\n  gpu:\n    curve:\n      rows:\n"
                          + "".join(f"        - {{users: {u}, per_user_tok_s: {{min: 100}}}}\n" for u in USERS))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "pytest_glmf.plugin", "--glmf-lanes", str(lanes),
                           "--glmf-lane", "gpu", "--glmf-thresholds", str(thresholds), "--glmf-results",
                           str(tmp_path / "results"), "-k", os.environ.get("GLMF_GPU_SUITES", "boot or curve or seats"), "-rA", "-q", "-p",
                           "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True, timeout=280)
    record({"load": load(), "rc": proc.returncode, "stdout": proc.stdout[-12000:]})
    assert proc.returncode == 0, proc.stdout[-3000:]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-v"]))
