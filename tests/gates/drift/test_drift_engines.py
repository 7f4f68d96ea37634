"""Drift adapters and the two phases against tiny real HTTP servers that answer in the engines'
documented JSON shapes (docs/engines.md 3 for SGLang, docs/real-engine.md 2(a) for vLLM 0.32 on this CPU).

The toy "model" is a deterministic function context -> log-softmax over 48 tokens; a candidate is
the same function with noise added to the logits, so every expected number is computed directly.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.engine.introspect import detect_engine
from pytest_glmf.gates.drift.adapters import ScoringError, SGLangAdapter, VLLMAdapter, make_adapter
from pytest_glmf.gates.drift.cli import cli as drift_cli
from pytest_glmf.gates.drift.prompts import load_chat_prompts
from pytest_glmf.gates.drift.reference import (
    DriftFileError,
    check_reference,
    make_reference,
    pick_template,
    reference_hash,
)

VOCAB = 48


def toy_logprobs(context: list[int], noise: float = 0.0) -> np.ndarray:
    key = hash(tuple(context[-3:])) & 0xFFFFFFFF
    logits = np.random.default_rng(key).normal(0, 2.0, VOCAB)
    if noise:
        logits = logits + np.random.default_rng(key ^ 0x5EED).normal(0, noise, VOCAB)
    return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()


def toy_template(messages, variant: int = 0) -> list[int]:
    text = " ".join(m["content"] for m in messages)
    return [1] + [(ord(c) + variant) % (VOCAB - 3) + 2 for c in text[:24]] + [VOCAB - 1]


def greedy(ids: list[int], n: int, noise: float) -> list[int]:
    out: list[int] = []
    for _ in range(n):
        out.append(int(np.argmax(toy_logprobs(ids + out, noise))))
    return out


class ToyServer:
    """engine: 'sglang' | 'vllm'. Knobs: noise (a 'quantized' candidate), template variant
    (another tokenizer), miscount (reports a wrong prompt_tokens), reject_zero (SGLang rejects
    max_new_tokens=0)."""

    def __init__(self, engine: str, noise: float = 0.0, variant: int = 0, miscount: bool = False,
                 reject_zero: bool = False, no_template: bool = False, jitter: float = 0.0,
                 misalign: bool = False):
        self.misalign = misalign   # SGLang top-k list shifted by one position against the token logprobs
        self.engine, self.noise, self.variant, self.no_template = engine, noise, variant, no_template
        self.jitter = jitter   # per-request noise on returned logprobs: an engine that is not bit-reproducible
        self._jitter_rng = np.random.default_rng(0)
        self.miscount, self.reject_zero = miscount, reject_zero
        self.requests: list[tuple[str, dict]] = []
        toy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep pytest output clean
                pass

            def _send(self, code: int, obj) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                code, obj = toy.get(self.path)
                self._send(code, obj)

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                toy.requests.append((self.path, req))
                code, obj = toy.post(self.path, req)
                self._send(code, obj)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def count(self, n: int) -> int:
        return n + 1 if self.miscount else n

    # -- GET ---------------------------------------------------------------------------------
    def get(self, path: str):
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "toy", "owned_by": self.engine, "root": "/models/toy",
                                                     "max_model_len": 2048}]}
        if self.engine == "sglang" and path == "/get_model_info":
            return 200, {"model_path": "/models/toy", "tokenizer_path": "/models/toy", "is_generation": True}
        if self.engine == "sglang" and path == "/get_server_info":
            return 200, {"version": "0.0.toy"}
        if self.engine == "vllm" and path == "/version":
            return 200, {"version": "0.32.0"}
        return 404, {"detail": "Not Found"}

    # -- POST --------------------------------------------------------------------------------
    def post(self, path: str, req: dict):
        if self.no_template and path in ("/v1/chat/completions", "/tokenize"):
            return 404, {"detail": "Not Found"}   # an older build: no templated ids from the server
        if self.engine == "sglang" and path == "/v1/chat/completions":
            ids = toy_template(req["messages"], self.variant)
            choice = {"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "length"}
            if req.get("return_prompt_token_ids"):
                choice["prompt_token_ids"] = ids
            return 200, {"choices": [choice], "usage": {"prompt_tokens": self.count(len(ids)), "completion_tokens": 1}}
        if self.engine == "sglang" and path == "/generate":
            return self.sglang_generate(req)
        if self.engine == "vllm" and path == "/tokenize":
            ids = toy_template(req["messages"], self.variant)
            return 200, {"count": len(ids), "max_model_len": 2048, "tokens": ids, "token_strs": None}
        if self.engine == "vllm" and path == "/v1/completions":
            return self.vllm_completions(req)
        return 404, {"detail": "Not Found"}

    def _jitter(self) -> float:
        return float(self._jitter_rng.normal(0, self.jitter)) if self.jitter else 0.0

    def sglang_generate(self, req: dict):
        ids, sp = req["input_ids"], req["sampling_params"]
        n_new = sp["max_new_tokens"]
        shift = 1 if self.misalign else 0
        if n_new == 0 and self.reject_zero:
            return 400, {"error": {"message": "max_new_tokens must be positive"}}
        out = greedy(ids, n_new, self.noise)
        meta = {"prompt_tokens": self.count(len(ids)), "completion_tokens": len(out), "cached_tokens": 0,
                "finish_reason": {"type": "length", "length": n_new}}
        if req.get("return_logprob"):
            start, k = req.get("logprob_start_len", -1), req.get("top_logprobs_num", 0)
            if start >= 0:
                lps, tops = [], []
                for pos in range(start, len(ids)):
                    if pos == start:   # SGLang: the first reported position has no logprob
                        # (scheduler: input_token_logprobs_val = [None] + input_token_logprobs[:-1])
                        lps.append([None, ids[pos], None])
                        tops.append(None)
                        continue
                    dist = toy_logprobs(ids[:pos], self.noise) + self._jitter()
                    lps.append([float(dist[ids[pos]]), ids[pos], None])
                    top_dist = toy_logprobs(ids[:pos + shift], self.noise) if 0 < shift and pos + shift < len(ids) else dist
                    order = np.argsort(-top_dist)[:k]
                    tops.append([[float(top_dist[i]), int(i), None] for i in order] if k else None)
                meta["input_token_logprobs"] = lps
                if k:
                    meta["input_top_logprobs"] = tops
            meta["output_token_logprobs"] = [[float(toy_logprobs(ids + out[:t], self.noise)[tok]), tok, None]
                                             for t, tok in enumerate(out)]
        return 200, {"text": "", "output_ids": out, "meta_info": meta}

    def vllm_completions(self, req: dict):
        ids, n_new = req["prompt"], req["max_tokens"]
        if n_new < 1:
            return 400, {"object": "error", "message": f"max_tokens must be at least 1, got {n_new}.",
                         "type": "BadRequestError", "code": 400}
        out = greedy(ids, n_new, self.noise)
        choice = {"index": 0, "text": "", "finish_reason": "length", "logprobs": None, "prompt_logprobs": None,
                  "token_ids": out if req.get("return_token_ids") else None,
                  "prompt_token_ids": ids if req.get("return_token_ids") else None}
        k = req.get("prompt_logprobs")
        if k is not None:
            plp = [None]
            for pos in range(1, len(ids)):
                dist = toy_logprobs(ids[:pos], self.noise)
                order = list(np.argsort(-dist))
                entry = {str(int(i)): {"logprob": float(dist[i]), "rank": r + 1, "decoded_token": f"<{i}>"}
                         for r, i in enumerate(order[:k])}
                # the given token is always included, with its true rank (k or k+1 entries)
                entry[str(ids[pos])] = {"logprob": float(dist[ids[pos]]), "rank": order.index(ids[pos]) + 1,
                                        "decoded_token": f"<{ids[pos]}>"}
                plp.append(entry)
            choice["prompt_logprobs"] = plp
        return 200, {"id": "cmpl-toy", "object": "text_completion", "model": "toy", "choices": [choice],
                     "system_fingerprint": "vllm-0.32.0-toy",
                     "usage": {"prompt_tokens": self.count(len(ids)), "completion_tokens": len(out),
                               "total_tokens": len(ids) + len(out)}}


@pytest.fixture
def toy():
    servers: list[ToyServer] = []

    def start(*a, **kw) -> ToyServer:
        servers.append(ToyServer(*a, **kw))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


MSGS = [{"role": "user", "content": "What causes the seasons on Earth?"}]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_adapter_generates_and_scores_exactly(toy, engine):
    server = toy(engine, noise=0.0)
    with Client(server.url) as client:
        assert detect_engine(client) == engine
    adapter = make_adapter(server.url)
    try:
        prompt = adapter.chat_ids(MSGS)
        assert prompt == toy_template(MSGS)
        out = adapter.generate_greedy(prompt, 12)
        assert out == greedy(prompt, 12, 0.0)
        s = adapter.score(prompt, out, 5)
        for t, tok in enumerate(out):
            dist = toy_logprobs(prompt + out[:t])
            assert s.logprobs[t] == pytest.approx(dist[tok], abs=1e-12)
            assert s.top_ids[t] == [int(i) for i in np.argsort(-dist)[:5]]
            assert s.top_logprobs[t] == pytest.approx(sorted(dist, reverse=True)[:5])
            assert s.top_ids[t][0] == tok  # greedy tokens are the argmax when re-scored
        info = adapter.describe()
        assert info["engine"] == engine and info["engine_version"] in ("0.0.toy", "0.32.0")
    finally:
        adapter.close()


def test_vllm_given_token_outside_top_k_keeps_its_logprob_and_stays_out_of_the_top_k(toy):
    server = toy("vllm", noise=0.0)
    adapter = VLLMAdapter(server.url)
    prompt = toy_template(MSGS)
    forced = [int(np.argmin(toy_logprobs(prompt)))]   # the least likely token: rank 48, outside the top 3
    s = adapter.score(prompt, forced, 3)
    assert s.logprobs[0] == pytest.approx(float(toy_logprobs(prompt).min()))
    assert forced[0] not in s.top_ids[0] and len(s.top_ids[0]) == 3
    path, body = server.requests[-1]
    assert path == "/v1/completions" and body["max_tokens"] == 1 and body["prompt_logprobs"] == 3
    assert body["prompt"] == prompt + forced
    adapter.close()


def test_sglang_scoring_request_shape_and_max_new_tokens_fallback(toy):
    server = toy("sglang", reject_zero=True)
    adapter = SGLangAdapter(server.url)
    prompt = toy_template(MSGS)
    out = greedy(prompt, 4, 0.0)
    s = adapter.score(prompt, out, 2)
    assert len(s) == 4
    sent = [b for p, b in server.requests if p == "/generate"]
    assert [b["sampling_params"]["max_new_tokens"] for b in sent] == [0, 1]   # rejected 0, retried with 1
    # one position early: SGLang's first reported position is null
    assert sent[-1]["input_ids"] == prompt + out and sent[-1]["logprob_start_len"] == len(prompt) - 1
    assert sent[-1]["return_logprob"] is True and sent[-1]["top_logprobs_num"] == 2
    adapter.score(prompt, out, 2)
    assert server.requests[-1][1]["sampling_params"]["max_new_tokens"] == 1   # remembered
    adapter.close()


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_prompt_token_count_mismatch_is_refused(toy, engine):
    server = toy(engine, miscount=True)
    adapter = make_adapter(server.url, engine)
    prompt = toy_template(MSGS)
    with pytest.raises(ScoringError, match=r"reports \d+ prompt tokens but \d+ token ids were sent"):
        adapter.score(prompt, [3, 4], 2)
    adapter.close()


def test_two_phases_end_to_end_through_the_cli(toy, tmp_path, capsys):
    oracle, cand_a, cand_b = toy("sglang"), toy("vllm", noise=0.6), toy("sglang", noise=1.2)
    ref, a, b = tmp_path / "ref.json", tmp_path / "a.json", tmp_path / "b.json"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"\0" * 1234)
    (model_dir / "config.json").write_text("{}")
    assert drift_cli(["reference", "--url", oracle.url, "--out", str(ref), "--prompts", "12", "--max-tokens", "16",
                      "--k", "5", "--lane", "toy-oracle", "--image", "toy:1", "--model-dir", str(model_dir),
                      "--model-revision", "abc123", "--provenance", "gpu=none"]) == 0
    data = json.loads(ref.read_text())
    assert data["kind"] == "glmf-drift-reference" and data["prompt_set"]["n"] == 12 and data["k"] == 5
    prov = data["provenance"]
    assert (prov["oracle_lane"], prov["image"], prov["model_revision"], prov["model_bytes"], prov["gpu"]) == (
        "toy-oracle", "toy:1", "abc123", 1234, "none")
    assert prov["engine"] == "sglang" and prov["engine_version"] == "0.0.toy" and prov["chat_template"] == "server"
    assert len(data["prompt_set"]["sha256"]) == 64 and len(data["tokenizer_fingerprint"]) == 16
    assert data["self_check"]["exact"] is True and data["oracle_argmax_disagreement"] == 0
    assert all(len(p["output_ids"]) == 16 for p in data["prompts"])
    assert drift_cli(["score", "--url", cand_a.url, "--reference", str(ref), "--out", str(a), "--label", "A"]) == 0
    assert drift_cli(["score", "--url", cand_b.url, "--reference", str(ref), "--out", str(b), "--label", "B"]) == 0
    capsys.readouterr()
    assert drift_cli(["compare", str(ref), str(a), str(b), "--json", "--resamples", "500"]) == 0
    doc = json.loads(capsys.readouterr().out)      # a result document: each candidate as the suite records it
    assert doc["gates"]["drift"]["A"]["candidate"] == "A" and "B vs A" in doc["gates"]["drift"]
    res = doc["command_output"]                    # the statistics as compare printed them
    for label in ("A", "B"):
        s = res["candidates"][label]
        for key in ("mean_abs_dlogp", "median_abs_dlogp", "p95_abs_dlogp", "argmax_mismatch", "ci95"):
            assert key in s
        assert s["ci95"][0] <= s["mean_abs_dlogp"] <= s["ci95"][1]
        assert s["self_check"]["exact"] is True
    assert res["candidates"]["A"]["mean_abs_dlogp"] < res["candidates"]["B"]["mean_abs_dlogp"]
    pair = res["pair"]
    assert {"wins", "gap_ci95", "shared_flip_rate"} <= set(pair)
    assert pair["wins"][0] > pair["wins"][1] and pair["gap_ci95"][0] > 0   # less noise wins, CI excludes 0
    # A candidate that IS the oracle gives exactly zero drift.
    same = tmp_path / "same.json"
    assert drift_cli(["score", "--url", oracle.url, "--reference", str(ref), "--out", str(same)]) == 0
    capsys.readouterr()
    assert drift_cli(["compare", str(ref), str(same), "--json", "--resamples", "200"]) == 0
    s = next(iter(json.loads(capsys.readouterr().out)["command_output"]["candidates"].values()))
    assert s["mean_abs_dlogp"] == 0.0 and s["max_abs_dlogp"] == 0.0 and s["argmax_mismatch"] == 0.0
    assert drift_cli(["compare", str(ref), str(a), str(b)]) == 0
    table = capsys.readouterr().out
    assert "A vs B (each other)" in table and "closer on" in table and "0 (exact)" in table


def test_mismatches_are_refused_with_a_clear_message(toy, tmp_path, capsys):
    oracle, other_tok = toy("vllm"), toy("vllm", variant=5)
    ref = tmp_path / "ref.json"
    assert drift_cli(["reference", "--url", oracle.url, "--out", str(ref), "--prompts", "3", "--max-tokens", "4",
                      "--k", "3", "--no-self-check"]) == 0
    capsys.readouterr()
    # another tokenizer / chat template
    assert drift_cli(["score", "--url", other_tok.url, "--reference", str(ref), "--out", str(tmp_path / "x.json")]) == 2
    assert "tokenizer/chat template mismatch" in capsys.readouterr().err
    # another prompt set
    data = json.loads(ref.read_text())
    with pytest.raises(DriftFileError, match="made from another prompt set"):
        check_reference(data, load_chat_prompts(None, 4))
    check_reference(data, load_chat_prompts(None, 3))
    # a candidate scored against another reference
    cand = tmp_path / "c.json"
    assert drift_cli(["score", "--url", oracle.url, "--reference", str(ref), "--out", str(cand)]) == 0
    data["prompts"][0]["output_ids"][0] ^= 1
    data["sha256"] = reference_hash(data)
    ref2 = tmp_path / "ref2.json"
    ref2.write_text(json.dumps(data))
    capsys.readouterr()
    assert drift_cli(["compare", str(ref2), str(cand)]) == 2
    assert "scored against another reference" in capsys.readouterr().err
    # an edited reference
    data["prompts"][0]["scores"]["logprobs"][0] += 0.5
    ref2.write_text(json.dumps(data))
    assert drift_cli(["compare", str(ref2), str(cand)]) == 2
    assert "does not match its sha256" in capsys.readouterr().err


def test_a_server_that_cannot_template_is_refused_unless_a_client_template_is_given(toy):
    server = toy("sglang", no_template=True)
    adapter = make_adapter(server.url)
    with pytest.raises(ScoringError, match="cannot get chat-templated token ids from the server"):
        adapter.chat_ids(MSGS)
    assert pick_template(adapter, None) is None
    ref = make_reference(adapter, load_chat_prompts(None, 2), max_tokens=3, k=2,
                               template=pick_template(adapter, toy_template))
    assert ref["provenance"]["chat_template"] == "client: toy_template"
    assert ref["prompts"][0]["prompt_ids"] == toy_template(ref["prompts"][0]["messages"])
    adapter.close()


def test_sglang_top_k_shifted_against_the_token_logprobs_is_refused(toy):
    server = toy("sglang", misalign=True)
    adapter = SGLangAdapter(server.url)
    prompt = toy_template(MSGS)
    with pytest.raises(ScoringError, match="misaligned"):
        adapter.score(prompt, greedy(prompt, 6, 0.0), 5)
    adapter.close()
