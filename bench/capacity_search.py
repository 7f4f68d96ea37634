"""The capacity search measured (issue 24): on servers whose capacity is known, the answer's error,
the 95 % interval's coverage over seeds and the probes used, for our search (model-guided, and
bracket-and-bisect alone) and for AIPerf's own SLA search planners, on the same servers in one run.

    .venv/bin/python bench/capacity_search.py [--seeds 200] [--truth-server]
        [--peer-python /tmp/aiperf-venv/bin/python]       # AIPerf's venv: pip install aiperf

Servers (pytest_glmf/testing/capacity_model.py): a function users -> per-request records, a
known curve with log-normal noise of a stated size per request and per run, 3 runs of `users`
requests per probe, judged by the plugin's own judge (slo.judge). AIPerf's planners get the same
probe's runs as trials (its p95 ITL per run: 1 / per-user tok/s per request). Service level: 95
% of users at >= 45 tok/s; our resolution 10 % (the default), start 8 (the default); AIPerf's
recipe defaults (concurrency 1-1000). `--truth-server` adds the issue curve served over HTTP by
the truth server (pytest_glmf/testing/truth_server.py, time per token 20 ms + 0.8 ms per running
request: 22 users at 26.88 tok/s), measured by our load generator for both searches.

Columns: error = answer - truth (users; mean of |error| and the worst); within res. = the share
of answers in [truth - step, truth] (the stated resolution, below or at the truth); high = the
share above the truth (a capacity the server does not have); CI covers =
the share of seeds whose 95 % interval holds the truth (AIPerf: its boundary_ci is a CI of the
mean margin at its candidate, in margin units, not of users: "-"); probes and requests per search.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_glmf.gates.capacity.interval import capacity_interval
from pytest_glmf.gates.capacity.search import Bound, search, users_step
from pytest_glmf.gates.capacity.slo import judge
from pytest_glmf.gates.capacity.spec import SLO
from pytest_glmf.gates.capacity.table import interval_text
from pytest_glmf.load import RequestRecord, per_user_tok_s, percentile
from pytest_glmf.testing.capacity_model import CURVES, ModelServer

SLO45 = SLO(per_user_tok_s=45)
STEP = users_step(None, 10)
DRIVER = Path(__file__).with_name("aiperf_search_driver.py")

# name, curve, per-request sigma, per-run sigma
SERVERS = [("smooth", "smooth", 0.0, 0.0), ("steep", "steep", 0.0, 0.0), ("cliff", "cliff", 0.0, 0.0),
           ("smooth, noise 5 % / 2 %", "smooth", 0.05, 0.02), ("smooth, noise 10 % / 3 %", "smooth", 0.10, 0.03),
           ("steep, noise 5 % / 2 %", "steep", 0.05, 0.02), ("cliff, noise 5 % / 2 %", "cliff", 0.05, 0.02)]


@dataclass
class Tally:
    errors: list[float] = field(default_factory=list)
    within: int = 0
    high: int = 0              # answers above the truth: a capacity the server does not have
    covered: int | None = None
    probes: list[int] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    failed: int = 0            # no answer

    def add(self, answer: float | None, truth: int, probes: int, requests: int, ci: list[float] | None = None,
            with_ci: bool = False) -> None:
        self.probes.append(probes)
        self.requests.append(requests)
        if answer is None:
            self.failed += 1
            return
        self.errors.append(answer - truth)
        self.within += truth - STEP(truth) <= answer <= truth
        self.high += answer > truth
        if with_ci:
            # the boundary (fractional) of an integer truth T lies in [T, T + 1): covered when the interval meets it
            self.covered = (self.covered or 0) + bool(ci and ci[0] < truth + 1 and ci[1] >= truth)

    def row(self, name: str, who: str, n: int) -> str:
        abs_err = [abs(e) for e in self.errors]
        cov = "-" if self.covered is None else f"{100 * self.covered / n:.0f} %"
        mean = f"{sum(abs_err) / len(abs_err):.2f}" if abs_err else "-"
        worst = f"{max(self.errors, key=abs):+.0f}" if self.errors else "-"
        return (f"| {name} | {who} | {mean} / {worst} | {100 * self.within / n:.0f} % | {100 * self.high / n:.0f} % | "
                f"{cov} | "
                f"{sum(self.probes) / n:.1f} / {max(self.probes)} | {sum(self.requests) / n:,.0f}"
                + (f" ({self.failed} without an answer) |" if self.failed else " |"))


def itl_runs(row: dict[str, Any]) -> list[dict[str, float]]:
    """A probe's runs as AIPerf reads them: per run the p95 and mean ITL (ms) and its tok/s."""
    out = []
    for run in row["per_run"]:
        records = [r if isinstance(r, RequestRecord) else RequestRecord(**r) for r in run["records"]]
        speeds = [s for s in (per_user_tok_s(r) for r in records) if s]
        itl = [1000.0 / s for s in speeds]
        out.append({"itl_p95_ms": percentile(itl, 95), "itl_avg_ms": sum(itl) / len(itl),
                    "tok_s": sum(speeds)})
    return out


class Peer:
    """AIPerf's planners (its own code, in its venv, bench/aiperf_search_driver.py) asking, our
    `measure(users) -> row` answering; one process for every search."""

    def __init__(self, python: str) -> None:
        self.proc = subprocess.Popen([python, str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)

    def _send(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{DRIVER.name} ended (exit {self.proc.wait()})")
        return json.loads(line)

    def search(self, style: str, measure, slo: SLO = SLO45, lo: int = 1,
               hi: int = 1000) -> tuple[int | None, int, int, dict[str, Any]]:
        """(answer: feasible_max, probes, measured requests, boundary_summary)."""
        msg = self._send({"search": [style, lo, hi, 1000.0 / slo.per_user_tok_s]})
        probes = requests = 0
        while "done" not in msg:
            row = measure(int(msg["ask"]))
            probes += 1
            requests += sum(len(r["records"]) for r in row["per_run"])
            msg = self._send({"runs": itl_runs(row)})
        summary = msg["done"] or {}
        return (summary.get("feasible_max") or {}).get("value"), probes, requests, summary

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def ours(server: ModelServer, guided: bool):
    r = search(lambda x: judge(x, server.row(int(x)), SLO45), start=8, floor=1, bound=Bound(1024, "max_users", "c"),
               step=STEP, guided=guided)
    return r, capacity_interval(r, SLO45)


def model_rows(seeds: int, peer: Peer | None) -> list[str]:
    rows = []
    for name, curve, req_sigma, run_sigma in SERVERS:
        n = seeds if req_sigma or run_sigma else 1
        tallies = {k: Tally() for k in ("glmf guided", "glmf bisect", "aiperf smooth_isotonic", "aiperf monotonic")}
        truth = ModelServer(CURVES[curve], req_sigma, run_sigma).true_capacity(SLO45.per_user_tok_s)
        for seed in range(n):
            for guided, key in ((True, "glmf guided"), (False, "glmf bisect")):
                r, ci = ours(ModelServer(CURVES[curve], req_sigma, run_sigma, seed=seed), guided)
                tallies[key].add(r.value, truth, len(r.probes), r.requests, ci, with_ci=True)
            if peer:
                for style in ("smooth_isotonic", "monotonic"):
                    server = ModelServer(CURVES[curve], req_sigma, run_sigma, seed=seed)
                    best, probes, requests, _ = peer.search(style, server.row)
                    tallies[f"aiperf {style}"].add(best, truth, probes, requests)
        label = f"{name} (truth {truth}, {n} seed{'s' if n > 1 else ''})"
        rows += [t.row(label, who, n) for who, t in tallies.items() if t.probes]
    return rows


def truth_server_rows(peer: Peer | None) -> list[str]:
    """The issue curve's shape over HTTP: the truth server, our load generator, both searches."""
    from pytest_glmf.gates.capacity.measure import _Session
    from pytest_glmf.gates.capacity.spec import CapacitySettings
    from pytest_glmf.testing.truth_server import TruthServer

    slo = SLO(per_user_tok_s=26.88)
    settings = CapacitySettings(prompt_tokens=None, max_tokens=60, runs=2, resolution_users=1)
    rows = []
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8) as ts, _Session(ts.url, settings, slo) as session:
        t0 = time.perf_counter()
        r = session.capacity(settings)
        ci = interval_text(r.boundary_ci95)
        rows.append(f"| truth server (truth 22) | glmf guided | {abs(r.users - 22)} / {r.users - 22:+d} | - | - | "
                    f"{ci} | {len(r.probes)} | {r.search.requests:,} (wall {time.perf_counter() - t0:.0f} s) |")
        if peer:
            from pytest_glmf.load import run_row

            def measure(users: int) -> dict[str, Any]:
                wl = session.workload(settings)
                return session.runner.run(run_row(session.target, users, wl, session.load_settings(settings, users),
                                                  None, None, run_offset=users * 1000 + 7, cost=session.cost))

            t0 = time.perf_counter()
            best, probes, requests, _ = peer.search("smooth_isotonic", measure, slo)
            err = "-" if best is None else f"{abs(best - 22)} / {best - 22:+d}"
            rows.append(f"| truth server (truth 22) | aiperf smooth_isotonic | {err} | - | - | - | {probes} | "
                        f"{requests:,} (wall {time.perf_counter() - t0:.0f} s) |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--peer-python", help="python of a venv with aiperf installed (pip install aiperf)")
    ap.add_argument("--truth-server", action="store_true", help="add the row over HTTP against the truth server")
    a = ap.parse_args()
    peer = None
    if a.peer_python:
        version = subprocess.run([a.peer_python, "-c", "import importlib.metadata as m; print(m.version('aiperf'))"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        print(f"aiperf {version} ({a.peer_python})")
        peer = Peer(a.peer_python)
    t0 = time.perf_counter()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; seeds {a.seeds}")
    print("| server | search | abs error mean / worst (users) | within res. | high | CI covers | probes mean / max | "
          "requests mean |")
    print("|---|---|---|---|---|---|---|---|")
    for row in model_rows(a.seeds, peer):
        print(row, flush=True)
    if a.truth_server:
        for row in truth_server_rows(peer):
            print(row, flush=True)
    if peer:
        peer.close()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {time.perf_counter() - t0:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
