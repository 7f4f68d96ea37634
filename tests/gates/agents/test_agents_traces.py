"""Trace replay: the readers (the Azure LLM inference CSV, Mooncake JSONL, our JSONL) with their
errors, prompts that share exactly the prefixes the trace says, and the replay against the truth
server (every request received at its trace time, x the speedup) and the simulator's daily lane
(the shipped Azure slice: arrivals kept, output tokens exact, prompt tokens close)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.agents.traces import Trace, TraceRequest, load_trace, prompt_for, replay_trace
from pytest_glmf.sim.process import SimProcess
from pytest_glmf.testing.truth_server import TruthServer

sys.path.insert(0, str(Path(__file__).parent))
from test_agents_sim import DAILY, SCALE  # noqa: E402


def test_the_shipped_azure_slice_reads_with_its_times_and_counts():
    trace = load_trace("azure_llm_conv_2023_5min.csv")
    assert len(trace.requests) == 1441
    first, second = trace.requests[:2]
    # 2023-11-16 18:15:46.6805900,374,44 and 18:15:50.9951690,396,109
    assert (first.t_s, first.input_tokens, first.output_tokens) == (0.0, 374, 44)
    assert second.t_s == pytest.approx(4.314579, abs=1e-6) and (second.input_tokens, second.output_tokens) == (396, 109)
    assert 298 < trace.duration_s < 300
    window = trace.window(60, 90)
    assert all(0 <= r.t_s < 30 for r in window.requests) and len(window.requests) > 50
    attribution = Path(load_trace.__code__.co_filename).parents[2] / "data" / "traces" / "ATTRIBUTION.md"
    assert "CC BY 4.0" in attribution.read_text() and "Splitwise" in attribution.read_text()


@pytest.mark.parametrize("text, message", [
    ("TIMESTAMP,Tokens\n", ":1: expected the header TIMESTAMP,ContextTokens,GeneratedTokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374\n", ":2: expected 3 fields"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,374,4\n", ":2: TIMESTAMP 'yesterday' is not"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,many,4\n", ":2: ContextTokens must be an integer"),
    ('{"t_s": 0, "input_tokens": 10}\n', ":1: missing 'output_tokens'; a row needs t_s, input_tokens, output_tokens"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": ["a"]}\n', ":1: hash_ids must be a list"),
    ('{"t_s": 0, "input_tokens": 10, "output_tokens": 2}\n{oops\n', ":2: not JSON"),
    ("t,in,out\n", ":1: not a trace"),
])
def test_a_bad_trace_names_file_and_line(tmp_path, text, message):
    path = tmp_path / "trace.txt"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_trace(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_mooncake_rows_and_ours_read_with_their_prefix_blocks(tmp_path):
    moon = tmp_path / "mooncake.jsonl"
    moon.write_text("\n".join(json.dumps(r) for r in [
        {"timestamp": 1000, "input_length": 1100, "output_length": 10, "hash_ids": [1, 2, 3]},
        {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 4]}]) + "\n")
    trace = load_trace(moon)
    assert [(r.t_s, r.input_tokens, r.hash_ids) for r in trace.requests] == [(0.0, 600, (1, 4)), (1.0, 1100, (1, 2, 3))]
    ours = tmp_path / "ours.jsonl"
    ours.write_text('{"t_s": 2.5, "input_tokens": 50, "output_tokens": 3, "session": "a"}\n'
                    '{"t_s": 0.5, "input_tokens": 40, "output_tokens": 3, "session": 7}\n')
    trace = load_trace(ours, session_prefix_tokens=20)
    assert [(r.t_s, r.session) for r in trace.requests] == [(0.0, "7"), (2.0, "a")]


def test_prompts_share_exactly_the_blocks_the_trace_says():
    trace = Trace((TraceRequest(0, 1100, 1, (1, 2, 3)), TraceRequest(1, 1100, 1, (1, 2, 9)),
                   TraceRequest(2, 1100, 1, (5, 2, 3)), TraceRequest(3, 300, 1)), "t", block_tokens=512)
    a, b, c, d = (prompt_for(trace, i, 1.0).split() for i in range(4))
    assert a[:1024] == b[:1024] and a[1024:] != b[1024:]      # two shared 512-token blocks, then not
    assert a[:512] != c[:512]                                  # a different first block: nothing shared
    assert len(a) == 1100 and len(d) == 300 + 2                # "request 3:" leads a request without blocks
    assert prompt_for(trace, 0, 2.0).split()[:10] == a[:10] and len(prompt_for(trace, 0, 2.0).split()) == 550


def test_replay_keeps_the_traces_arrival_times_and_output_tokens():
    trace = Trace(tuple(TraceRequest(t, 20, n) for t, n in [(0.0, 5), (0.1, 3), (0.15, 8), (0.6, 2), (1.3, 4)]), "t")
    with TruthServer(ttft_ms=10, itl_ms=2) as ts:
        result = replay_trace(ts.url, trace, speedup=2.0)
        jobs = sorted(ts.truth(), key=lambda j: int(j["request_tag"].split("-")[1]))
    s = result.summary
    assert s["requests"] == 5 and s["failed_requests"] == 0 and s["output_tokens_exact_pct"] == 100.0
    received = [j["t_recv_s"] - jobs[0]["t_recv_s"] for j in jobs]
    # twice as fast: every gap halved, as the server received them
    assert received == pytest.approx([0.0, 0.05, 0.075, 0.3, 0.65], abs=0.02)
    assert [j["max_tokens"] for j in jobs] == [5, 3, 8, 2, 4]
    assert s["send_lateness_p99_s"] < 0.02 and s["wall_s"] == pytest.approx(0.65)


def test_the_shipped_slice_replays_on_the_daily_lane():
    trace = load_trace("azure_llm_conv_2023_5min.csv").window(0, 20)
    with SimProcess(DAILY, time_scale=SCALE) as sim:
        result = replay_trace(sim.url, trace, time_scale=SCALE)
    s = result.summary
    assert s["requests"] == len(trace.requests) > 30 and s["failed_requests"] == 0, s["error_examples"]
    assert s["send_lateness_p99_s"] < 0.05                     # the arrivals kept, within 50 ms
    assert s["output_tokens_exact_pct"] == 100.0
    assert s["prompt_tokens_error_p50_pct"] < 10
    assert "send_lateness_p99_s" in result.table()
