"""The load engine: streamed requests at N concurrent users (or an open-loop rate), read by lean
readers with kernel timestamps, in worker processes past what one core reads, into one typed
record per request, with the client's self-check of its own error. The curve, capacity and agents
gates measure through it as peers; bench scripts and truth servers use it the same way.

Public API (import it from here; the modules behind it may move, and no other part of pytest_glmf
imports them: tests/test_layout.py; the load engine's own tests, tests/load, read its modules):

    settings = LoadSettings(users=[1, 8], runs=3)          # or LoadSettings.of(a gate's settings, users)
    rows = run_rows(url, settings.workload(load_prompt_variants()), settings)

    LoadSettings, LOAD_DEFAULTS, Workload       one run's settings (their defaults, written once) and
                                                what every user sends
    run_rows, run_row, measure_run, ClientCost  the curve (sync), one row, one run (async)
    RequestRecord, run_metrics, ...             one record per request; metrics are pure functions
    workers_check, advice_text, ...             the client's self-check
    Endpoints, Target, server_endpoints         where the streams go (one server, or replicas)

The names are loaded on first use: the gates' specs read `LOAD_DEFAULTS` on every pytest run, and
the measuring code (httpx, multiprocessing workers) must not come along.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.lazy import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.load.endpoints import (
        GEN_TOKENS,
        QUEUED,
        RUNNING,
        Endpoints,
        Target,
        replica_facts,
        server_endpoints,
    )
    from pytest_glmf.load.flags import describe_flags, lane_name
    from pytest_glmf.load.http import build_request, decode_reads, kernel_stamps_available, open_stream
    from pytest_glmf.load.records import (
        RequestRecord,
        knee,
        median,
        per_user_tok_s,
        percentile,
        record_from_lines,
        run_metrics,
        send_lateness_s,
        spread_pct,
        token_count_check,
        ttft_first_chunk_s,
        ttft_s,
    )
    from pytest_glmf.load.run import ClientCost, Progress, measure_run, run_row, run_rows, strip_records
    from pytest_glmf.load.seats import memory_check, seat_check
    from pytest_glmf.load.selfcheck import FLAG_OF as ADVICE_FLAGS
    from pytest_glmf.load.selfcheck import advice_text, client_check, workers_check
    from pytest_glmf.load.settings import DEFAULTS as LOAD_DEFAULTS
    from pytest_glmf.load.settings import LoadSettings, Workload
    from pytest_glmf.load.sockstamp import Sender as StampedSender
    from pytest_glmf.load.sockstamp import enable as enable_kernel_stamps
    from pytest_glmf.load.sockstamp import recv as recv_stamped
    from pytest_glmf.load.streams import LagProbe, ShardJob, StreamJob, event_loop_factory, stream_shard, wait_all
    from pytest_glmf.load.workers import WorkerError, WorkerPool, available_cores
    from pytest_glmf.load.workload import (
        ContextTooShort,
        context_check,
        count_tokens,
        fit_prompts,
        load_prompt_variants,
    )

__all__ = [
    "ADVICE_FLAGS", "ClientCost", "ContextTooShort", "Endpoints", "GEN_TOKENS", "LOAD_DEFAULTS", "LagProbe", "LoadSettings",
    "Progress", "QUEUED", "RUNNING", "RequestRecord", "ShardJob", "StampedSender", "StreamJob", "Target",
    "WorkerError", "WorkerPool", "Workload", "advice_text", "available_cores", "build_request",
    "client_check", "context_check", "count_tokens", "decode_reads", "describe_flags", "enable_kernel_stamps",
    "event_loop_factory", "fit_prompts", "kernel_stamps_available", "knee", "lane_name", "load_prompt_variants",
    "measure_run", "median", "memory_check", "open_stream", "per_user_tok_s", "percentile", "record_from_lines",
    "recv_stamped", "replica_facts", "run_metrics", "run_row", "run_rows", "seat_check", "send_lateness_s",
    "server_endpoints", "spread_pct", "stream_shard", "strip_records", "token_count_check", "ttft_first_chunk_s",
    "ttft_s", "wait_all", "workers_check",
]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
