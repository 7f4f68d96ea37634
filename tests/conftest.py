"""Shared helpers for the plugin's own tests: a tiny real server process for launcher tests.

`fake_server.py` behaves like an SGLang boot in miniature: prints a boot log, then either serves
HTTP on 127.0.0.1 and prints the ready line (mode ok), exits with an out-of-memory line (exit),
never becomes ready (hang), or serves /health but prints no ready line and answers /v1/models
with 503 until a delay passes (slowready). Calls of /health_generate are counted in
`generations.txt`. Each start appends its pid to
`launches.txt` in its working directory so tests can count launches.
"""
from __future__ import annotations

import contextlib
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

# A pytest started as a background job of a non-interactive shell (`cmd &` in a script, some CI
# runners) inherits SIGINT ignored, and so do the processes the tests start: the tests that press
# Ctrl-C on a run (tests/test_cli.py, tests/launch/docker, tests/reliability) then wait in vain.
# Restore what a terminal's Ctrl-C finds; the children inherit it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# In-process pytester runs drop modules first imported inside them; a later re-import makes a
# second copy of httpx/httpcore whose exception classes no longer match (ConnectError escapes
# `except httpx.HTTPError`). Import them once here so every run shares one copy. numpy refuses
# a second load in one process ("cannot load module more than once per process"): a run whose
# test first imported it (a gate's fixture calling its measuring code) would break every later one.
import httpcore  # noqa: F401  (httpx imports it lazily, on the first request)
import httpx  # noqa: F401
import numpy  # noqa: F401
import pytest

import pytest_glmf.engine.client  # noqa: F401
import pytest_glmf.gates.boot.parse  # noqa: F401
import pytest_glmf.launch.attach  # noqa: F401
import pytest_glmf.launch.process  # noqa: F401
import pytest_glmf.launch.sim  # noqa: F401
import pytest_glmf.results.recorder  # noqa: F401

if TYPE_CHECKING:
    from pytest_glmf.launch.base import Server

FAKE_SERVER = r'''
import http.server, json, os, sys, time

args = sys.argv[1:]
mode = args[args.index("--mode") + 1] if "--mode" in args else "ok"
port = int(args[args.index("--port") + 1])
with open("launches.txt", "a") as f:
    f.write(f"{os.getpid()}\n")
print("[2026-09-11 10:00:00] server_args=ServerArgs(model_path='/models/fake', max_running_requests=None)", flush=True)
print("[2026-09-11 10:00:01] Load weight end. type=FakeForCausalLM, avail mem=10.00 GB, mem usage=1.00 GB.", flush=True)
if mode == "exit":
    for i in range(60):
        print(f"[2026-09-11 10:00:02] capture step {i}", flush=True)
    print("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", flush=True)
    sys.exit(3)
if mode == "hang":
    time.sleep(3600)
started = time.monotonic()

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health_generate":  # readiness must never probe with a generation
            with open("generations.txt", "a") as f:
                f.write("1\n")
        if mode == "slowready" and self.path == "/v1/models" and time.monotonic() - started < 0.5:
            self.send_response(503); self.end_headers(); return
        body = json.dumps({"path": self.path, "pid": os.getpid()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
if mode != "slowready":
    print("[2026-09-11 10:00:03] The server is fired up and ready to roll!", flush=True)
server.serve_forever()
'''


@pytest.fixture
def fake_lanes(pytester: pytest.Pytester) -> Callable[..., Path]:
    """Write fake_server.py and a lanes file with one process lane per mode (ok, exit, hang,
    slowready); returns a function taking extra YAML per lane and giving the lanes file path."""
    pytester.makefile(".py", fake_server=FAKE_SERVER)

    def write(boot_timeout_s: float = 10.0, extra: str = "") -> Path:
        lanes = ["lanes:"]
        for mode in ("ok", "exit", "hang", "slowready"):
            lanes += [f"  {mode}:",
                      "    launcher: process",
                      f"    command: [{sys.executable!r}, fake_server.py, --port, '{{port}}', --mode, {mode}]",
                      f"    boot_timeout_s: {boot_timeout_s}"]
            if extra:
                lanes.append("\n".join("    " + line for line in extra.splitlines()))
        path = pytester.path / "lanes.yaml"
        path.write_text("\n".join(lanes) + "\n")
        return path

    return write


@pytest.fixture
def launched_pids(pytester: pytest.Pytester) -> Callable[[], list[int]]:
    """The pids of every fake server started in the pytester directory so far."""
    def read() -> list[int]:
        path = pytester.path / "launches.txt"
        return [int(x) for x in path.read_text().split()] if path.exists() else []

    return read


def _pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (exited, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture
def pid_alive() -> Callable[[int], bool]:
    return _pid_alive


@pytest.fixture
def running_fake_server(pytester: pytest.Pytester, fake_lanes: Callable[..., Path]) -> Iterator["Server"]:
    """A fake server started outside the pytest run under test (what --glmf-url attaches to)."""
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.launch import launch_lane

    fake_lanes()
    server = launch_lane(LaneConfig(name="ext", launcher="process", boot_timeout_s=10,
                                    command=[sys.executable, "fake_server.py", "--port", "{port}"]),
                         pytester.path / "ext", "ext")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def daily_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator["Server"]:
    """The built-in daily lane (DFlash2, tool parser glm47) on the simulator at 1/50 of the recipe's
    time, one per test module."""
    import dataclasses

    from pytest_glmf.config.lanes import builtin_lanes
    from pytest_glmf.launch import launch_lane

    lane = dataclasses.replace(builtin_lanes()["daily"], time_scale=0.02)
    server = launch_lane(lane, tmp_path_factory.mktemp("sim-daily"), "daily-sim")
    yield server
    server.stop()


@contextlib.contextmanager
def _glmf_sim(where: Path, *flags: str, ready_s: float = 60) -> Iterator[str]:
    """`glmf sim FLAGS` on a free port, as a user's own server: started in `where` (its output in
    `where/server.log`), its URL once /v1/models answers, stopped after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = where / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen([str(Path(sys.executable).parent / "glmf"), "sim", "--port", str(port), *flags],
                                  stdout=out, stderr=subprocess.STDOUT, cwd=where)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            assert server.poll() is None, f"the simulator exited: {log.read_text()[-2000:]}"
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the simulator did not answer /v1/models within {ready_s:g} s"
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="session")
def glmf_sim() -> Callable[..., AbstractContextManager[str]]:
    """`with glmf_sim(where, *flags, ready_s=60) as url:` the simulator as a user's own server
    (`glmf sim --port PORT FLAGS`, run in `where`), stopped after."""
    return _glmf_sim


def _unfold(text: str, width: int = 120) -> str:
    """`text` as it was before `pytest_glmf.text.wrap` folded it at `width`: a line indented by four
    spaces is joined to the line above when that line is full (its next word did not fit), the
    fold's own rule; any other indented line (a table, a traceback) stays where it is."""
    lines: list[str] = []
    above = 0                     # the printed width of the line above (not of what it was joined into)
    for line in text.splitlines():
        word = line.strip().split(" ", 1)[0]
        if lines and line.startswith("    ") and word and above + 1 + len(word) > width:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
        above = len(line)
    return "\n".join(lines)


@pytest.fixture
def unfold() -> Callable[[str], str]:
    """Printed text with its folded lines (wider than 120 columns, continued four spaces in) joined
    again, for matching a long line whole; what was printed fits 120 columns (test_widths.py)."""
    return _unfold


_NOTE = re.compile(r"^note (\d+): (.*)$")


def _inline_notes(text: str) -> str:
    """`text` unfolded, each table's numbered notes put back into the cells that point to them ("note 1"
    in a cell, "note 1: its text" under the table, as `pytest_glmf.text.fit_table` moves a long cell) and
    the note lines dropped: a row read whole, as one line, for a pin on its content. The layout
    itself (the note under the table, 120 columns) is pinned by tests/test_widths.py and the boot,
    curve and capacity suites' tests."""
    lines = _unfold(text).splitlines()
    out: list[str] = []
    table: list[int] = []          # indexes in `out` of the current table's rows
    notes: dict[str, str] = {}
    for line in [*lines, ""]:
        note = _NOTE.match(line)
        if note and table:
            notes[note.group(1)] = note.group(2)
            continue
        if notes:                  # the table's notes ended: put them back
            for i in table:
                cells = out[i].split(" | ")
                for j, cell in enumerate(cells):
                    m = re.fullmatch(r"(.*?)note (\d+)(\s*)", cell)
                    if m and m.group(2) in notes:
                        text_ = notes[m.group(2)]
                        cells[j] = (f"{m.group(1)}[{text_}]" if m.group(1) else text_) + m.group(3)
                out[i] = " | ".join(cells)
            notes = {}
        table = [*table, len(out)] if " | " in line else ([] if not line.startswith("-") or "-+-" not in line
                                                          else table)
        out.append(line)
    return "\n".join(out[:len(lines)])


@pytest.fixture
def inline_notes() -> Callable[[str], str]:
    """Printed text with each table's numbered notes back in their cells, and folded lines joined:
    a failure row read whole, as before tables fit 120 columns (the pins of its content)."""
    return _inline_notes
