"""`python -m pytest_glmf.sim [flags]` / `glmf sim [flags]`: boot log, then serve until killed.

Exit codes: 0 after a clean shutdown (SIGINT/SIGTERM), 1 when boot fails (out of memory, port in
use; the log says why), 2 for bad flags (argparse's message names the flag).
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import time

import uvicorn

from pytest_glmf.engine.logformats import render
from pytest_glmf.sim import boot
from pytest_glmf.sim.app import SimApp
from pytest_glmf.sim.args import SimArgError, SimConfig, parse_args
from pytest_glmf.sim.http import StreamCut
from pytest_glmf.sim.memory import DRAFTER_GB, WEIGHTS_GB, BootOOM, plan
from pytest_glmf.sim.tokenizer import apply_chat_template

# GLM-5.3's NextN (MTP) path crashes on the first request on the recipe's SGLang build (#37548),
# and so does DFlash2 with --mamba-ssm-dtype bfloat16 (its verify kernel); both boot fine.
CRASHING_SPEC = ("NEXTN", "MTP")


class _DropStreamCuts(logging.Filter):
    """A deliberately cut stream (fault) is not an application error worth a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, StreamCut)


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted sockets inherit it: uvicorn writes headers and body separately, and Nagle plus the
    # client's delayed ACK would add 40 ms to every JSON response on a kept-alive connection
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1" if host == "localhost" else host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(cfg: SimConfig, log: boot.BootLog) -> int:
    weights = WEIGHTS_GB[cfg.checkpoint]
    drafter = DRAFTER_GB if cfg.spec is not None else 0.0
    boot.print_until_weights(log, cfg, weights, drafter)
    if cfg.faults.boot_hang:
        log.tp(render(cfg.log_format, "graph_begin", capture_name="target decode", backend="full", tokens_per_req=1,
                      avail_gb=cfg.gpu_mem_gib - weights))
        while True:  # hangs like a stuck graph capture; the launcher's boot timeout has to catch it
            time.sleep(3600)
    if cfg.faults.boot_oom:
        boot.print_scheduler_exception(log, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
        return 1
    try:
        p = plan(cfg)
    except BootOOM as exc:
        boot.print_scheduler_exception(log, str(exc))
        return 1
    boot.print_pools_and_graphs(log, cfg, p)
    if cfg.boot_s > 0:
        time.sleep(cfg.boot_s * cfg.time_scale)
    try:
        sock = _bind(cfg.host, cfg.port)
    except OSError as exc:
        log.http(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address ('{cfg.host}', {cfg.port}): "
                 f"{exc.strerror.lower() if exc.strerror else exc}")
        return 1
    app = SimApp(cfg, p, log)
    _warm_up(app)
    logging.getLogger("uvicorn.error").addFilter(_DropStreamCuts())
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", http="httptools",
                            timeout_keep_alive=60, timeout_graceful_shutdown=1, backlog=2048)
    server = uvicorn.Server(config)

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started:
            await app.warm_up()       # /health answers 503 until it has run (SGLang's ServerStatus.Starting)
            boot.print_http_ready(log, cfg.host, cfg.port, os.getpid())
        await task

    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())
    return 0


def _warm_up(app: SimApp) -> None:
    """Import and run the request path once, so the first request is not the slow one (SGLang
    runs a warmup request before it prints ready)."""

    ids = apply_chat_template([{"role": "user", "content": "warm up"}])
    app.model.dist(app.context(ids)).top(5)


def cli(argv: list[str] | None = None, prog: str = "glmf sim") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = parse_args(argv, prog=prog)
    except SystemExit as exc:  # argparse: --help (0) or a bad flag (2), message already printed
        return int(exc.code or 0)
    except SimArgError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    # the recipe: the bf16 state option crashes the DFlash2 verify kernel on this build
    dflash_bf16 = cfg.spec == "DFLASH" and cfg.mamba_ssm_dtype != "float32"
    if (cfg.spec in CRASHING_SPEC or dflash_bf16) and cfg.faults.crash_after_requests is None:
        cfg.faults.apply(["crash-first-request"])
    if cfg.nice:
        os.nice(cfg.nice)
    return serve(cfg, boot.BootLog())


if __name__ == "__main__":
    sys.exit(cli(prog="python -m pytest_glmf.sim"))
