"""Pure parts of the load engine: stream decoding, metrics, seat and KV checks, the self-check, prompts."""
from __future__ import annotations

import json

import pytest

from pytest_glmf.gates.curve.table import knee_sentence
from pytest_glmf.load import decode_reads, load_prompt_variants, memory_check, seat_check
from pytest_glmf.load.records import combine_runs, interval, knee, percentile, record_from_lines, spread_pct
from pytest_glmf.load.selfcheck import advice_text, client_check


def sse(obj) -> bytes:
    data = b"data: " + json.dumps(obj).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def chunk(content=None, role=None, usage=None, choices=True):
    delta = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    obj = {"id": "x1", "choices": [{"index": 0, "delta": delta, "finish_reason": None}] if choices else []}
    if usage:
        obj["usage"] = usage
    return sse(obj)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_decode_reads_times_each_event_by_the_read_that_completed_it():
    role = chunk(role="assistant", content="")
    body = (HEAD + role + chunk("Hel") + chunk("lo")
            + chunk(usage={"completion_tokens": 2, "prompt_tokens": 5}, choices=False)
            + b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
    # split at awkward places: inside the head, the chunk-size line, a chunk's trailing CRLF,
    # the next chunk's JSON, and [DONE]
    cuts = [10, len(HEAD) + 1, len(HEAD) + len(role) - 1, len(HEAD) + len(role) + 20, len(body) - 20,
            len(body) - 12]
    reads, last = [], 0
    for i, c in enumerate(cuts + [len(body)]):
        reads.append((float(i), body[last:c]))
        last = c
    status, lines, error = decode_reads(reads)
    assert status == 200 and error is None
    rec = record_from_lines(0, -1.0, status, lines)
    assert rec.ok and rec.completion_tokens == 2 and rec.prompt_tokens == 5
    assert (rec.t_first_chunk_s, rec.t_first_token_s) == (2.0, 4.0)  # role chunk, then content
    assert len(rec.chunk_times_s) == 2 and rec.response_id == "x1"


def test_error_response_is_a_record_with_error_not_zeros():
    body = b'{"error": "model not found"}'
    reads = [(1.0, b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))]
    status, lines, error = decode_reads(reads)
    rec = record_from_lines(3, 0.5, status, lines, error)
    assert status == 404 and "model not found" in rec.error
    assert rec.t_first_token_s is None and rec.completion_tokens is None and not rec.ok


def test_stream_without_done_is_an_error():
    status, lines, error = decode_reads([(1.0, HEAD + chunk("a"))])
    assert record_from_lines(0, 0.0, status, lines, error).error == "stream ended without [DONE]"


def test_reasoning_and_tool_calls_count_as_first_token():
    for delta in ({"reasoning_content": "hmm"}, {"tool_calls": [{"index": 0, "function": {"name": "f"}}]}):
        line = "data: " + json.dumps({"choices": [{"delta": delta}]})
        rec = record_from_lines(0, 0.0, 200, [(0.1, 'data: {"choices":[{"delta":{"role":"assistant"}}]}'),
                                              (0.4, line), (0.5, "data: [DONE]")])
        assert rec.t_first_token_s == 0.4


def test_statistics():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([], 50) is None
    assert spread_pct([98, 100, 102]) == pytest.approx(4.0)
    runs = [{"aggregate_tok_s": a, "per_user_tok_s": p} for a, p in ((100, 10), (110, 10), (90, 10))]
    row = combine_runs(runs)
    assert row["aggregate_tok_s"] == 100 and row["spread_pct"] == pytest.approx(20.0)


def test_knee_says_whether_aggregate_still_climbs():
    rows = [{"users": 48, "aggregate_tok_s": 2214, "spread_pct": 1}, {"users": 96, "aggregate_tok_s": 3406},
            {"users": 128, "aggregate_tok_s": 4025, "spread_pct": 2}]
    k = knee(rows)
    assert k["still_climbing"] and k["last_gain_pct"] == pytest.approx(18.2, abs=0.1)
    flat = knee(rows[:2] + [{"users": 128, "aggregate_tok_s": 3450}])
    assert flat["still_climbing"] is False and "flat" in knee_sentence(flat)


def test_memory_check_matches_the_recipe_arithmetic():
    # 201K pool: ~4K tokens per user at 48 users, ~1.5K at 128 (the recipe's numbers)
    assert memory_check(48, 201_000, 2400, 384)["tokens_per_user"] == 4187
    at128 = memory_check(128, 201_000, 2400, 384)
    assert at128["tokens_per_user"] == 1570 and at128["fits"] is False
    assert "128 x 2,784" in at128["notes"][0]
    assert memory_check(8, None, 2400, 384)["fits"] is None


def test_seat_check_uses_boot_facts_and_observed_queue():
    assert seat_check(16, {"max_running_requests": 7})["notes"] == ["16 clients sharing 7 seats"]
    observed = seat_check(8, {}, {"max_running": 5, "max_queued": 3})
    assert not observed["shared"] and "at most 5 of 8 requests running" in observed["notes"][0]
    assert not seat_check(8, {"max_running_requests": 640})["shared"]


def test_seat_check_makes_no_note_from_a_gauge_the_run_never_refreshed():
    """SGLang refreshes num_running_reqs every decode_log_interval decode steps (and at prefill,
    with the requests running before it): a 24-token run never shows itself running."""
    facts = {"max_running_requests": 2048, "decode_log_interval": 40}
    short = seat_check(1, facts, {"max_running": 0, "max_queued": 0}, decode_steps=24)
    assert short["notes"] == [] and short["gauge_stale"]
    long = seat_check(4, facts, {"max_running": 2, "max_queued": 0}, decode_steps=384)
    assert not long["gauge_stale"] and "at most 2 of 4 requests running" in long["notes"][0]
    unknown = seat_check(4, {"max_running_requests": 2048}, {"max_running": 2}, decode_steps=24)
    assert unknown["notes"] and not unknown["gauge_stale"]      # the server did not say: the note stays


def test_client_check_judges_the_error_not_the_suspicion():
    """Lag and CPU name what could have gone wrong; only a bound over the allowed error marks a
    number not measured, with the reason and the advice: the setting to change and the value
    that would have passed."""
    small = {"per_user_tok_s": interval(100.0, 99.0, 101.0), "shared_events": 2, "token_events": 400}
    suspicious = client_check([0.0001] * 90 + [0.01] * 10, 0.95, error=small)
    assert not suspicious["unmeasured"] and suspicious["notes"] == []
    assert "client event-loop lag p99 10.0 ms > 2 ms" in suspicious["info"]
    assert "client CPU 95 % of a core > 85 %" in suspicious["info"]
    big = {"per_user_tok_s": interval(100.0, 90.0, 112.0), "ttft_p50_s": interval(0.5, 0.49, 0.5),
           "shared_events": 40, "token_events": 400}
    quiet = client_check([0.0001] * 100, 0.3, error=big, error_max_pct=5, workers=1, cores=4, load=0.5,
                         machine_cores=4)
    assert quiet["error_over"] == ["per_user_tok_s"] and list(quiet["unmeasured"]) == ["per_user_tok_s"]
    assert not quiet["client_bound"]      # the run stands for its other numbers (TTFT here)
    why = quiet["unmeasured"]["per_user_tok_s"]
    assert why == ("client timestamps can be off by up to 12.0 tok/s on per-user tok/s (12 % of 100.0 tok/s)"
                   " > 5 % allowed: 40 of 400 token events shared a socket read with a later one")
    advice = advice_text(quiet["advice"], "flags")
    assert advice == ("give the client more processes: --workers 2, or accept the error: --client-error-max 12 "
                      "would have passed")
    assert not client_check([0.0001] * 100, 0.3, error=big, error_max_pct=12)["unmeasured"]
    # a client with a process per core already is told so
    full = client_check([], None, error=big, workers=4, cores=4)
    assert advice_text(full["advice"]).startswith("the client already has a process per core")


def test_briefing_variants_are_recipe_sized_and_distinct():
    prompts = load_prompt_variants()
    assert len(prompts) >= 4 and len(set(prompts)) == len(prompts)
    for p in prompts:
        assert 2000 <= len(p) // 4 <= 3000          # ~2,400 tokens at ~4 characters per token
        assert p.rstrip().endswith("without headings or bullet points.") and "about 400 words" in p
    firsts = {p.split("## ")[1][:40] for p in prompts}
    assert len(firsts) == len(prompts)             # each variant starts its body differently


def test_prompt_files_resolve_by_path_or_packaged_name(tmp_path):
    essay = load_prompt_variants("briefing_history_essay.md")      # the daily lane's single-stream row
    assert len(essay) == 1 and "essay" in essay[0]
    own = tmp_path / "mine.txt"
    own.write_text("just one prompt")
    assert load_prompt_variants(str(own)) == ["just one prompt"]
    with pytest.raises(FileNotFoundError, match="nor a packaged fixture"):
        load_prompt_variants("no-such-briefing.md")


def test_a_cancel_landing_as_a_one_shot_call_completes_is_not_dropped(monkeypatch):
    """Ctrl-C under asyncio.Runner is a cancel of the main task. Python 3.11's wait_for returns the
    inner result when that cancel lands in the same loop pass as the inner call completes, and
    `glmf capacity` then ran its whole search after a Ctrl-C (CI). The cancel must reach the caller."""
    import asyncio

    from pytest_glmf.load import http as load_http

    class Reader:
        async def read(self, n: int) -> bytes:
            await asyncio.sleep(0)      # a socket read waits for the loop
            return b"HTTP/1.1 200 OK\r\n\r\nvllm:num_requests_running 0\n"

    class Writer:
        def write(self, data: bytes) -> None:
            pass

        def close(self) -> None:
            pass

    async def main() -> str:
        outer = asyncio.current_task()
        assert outer is not None

        async def opened(*args, **kwargs):
            outer.cancel()              # the Ctrl-C, in the pass the connection completes in
            return Reader(), Writer()

        monkeypatch.setattr(asyncio, "open_connection", opened)
        try:
            await load_http.http_call("127.0.0.1", 1, False, "/metrics")
        except asyncio.CancelledError:
            return "cancelled"
        return "completed: the cancel was dropped"

    assert asyncio.run(main()) == "cancelled"
