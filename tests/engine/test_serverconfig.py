"""engine/serverconfig.py: what a server says it runs, read from the simulator (SGLang 0.5.23's
/server_info shape), from engine-shaped test doubles (told vs not told), and from a real vLLM's
dev-mode answer shape (vllm/entrypoints/serve/dev/server_info/api_router.py)."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.engine.serverconfig import ServerConfig, read_server_config


@pytest.fixture
def answering() -> Iterator[Any]:
    servers = []

    def start(routes: dict[str, Any]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                body = routes.get(self.path)
                raw = json.dumps(body).encode() if body is not None else b"{}"
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *a: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_the_simulators_daily_lane_says_dflash_glm47_and_its_seats(daily_sim) -> None:
    cfg = daily_sim.config          # read by launch_lane, kept in the provenance
    assert cfg.engine == "sglang" and cfg.speculates is True and cfg.speculative_algorithm == "DFLASH"
    assert cfg.tool_call_parser == "glm47" and cfg.says("reasoning_parser")
    assert cfg.context_length == 1048576 and cfg.told["context_length"] == "/v1/models"
    assert cfg.max_running_requests == daily_sim.boot_facts.max_running_requests == 9
    assert cfg.why_no_speculation() is None
    assert ServerConfig.from_dict(daily_sim.provenance["server_config"]) == cfg


def test_sglang_without_speculation_is_told_and_named(answering) -> None:
    url = answering({"/v1/models": {"data": [{"id": "m", "max_model_len": 8192}]},
                     "/server_info": {"version": "0.5.23", "speculative_algorithm": None, "tool_call_parser": "hermes",
                                      "reasoning_parser": None, "decode_log_interval": 40, "max_total_num_tokens": 32768,
                                      "internal_states": [{"effective_max_running_requests_per_dp": 2048}]}})
    with Client(url) as client:
        cfg = read_server_config(client, "sglang")
    assert (cfg.speculates, cfg.tool_call_parser, cfg.reasoning_parser) == (False, "hermes", None)
    assert (cfg.context_length, cfg.max_running_requests, cfg.max_total_tokens, cfg.decode_log_interval) == (
        8192, 2048, 32768, 40)
    assert cfg.why_no_speculation() == "/server_info says speculative_algorithm: null"
    assert cfg.summary() == ("speculative_algorithm null, tool_call_parser hermes, reasoning_parser null, "
                             "context_length 8192, max_running_requests 2048, max_total_tokens 32768 "
                             "(/server_info, /v1/models)")


def test_not_told_is_never_no(answering) -> None:
    """A proxy or an older build that says nothing: no field is told, nothing is skipped on it."""
    url = answering({"/v1/models": {"data": [{"id": "m"}]}})
    with Client(url) as client:
        cfg = read_server_config(client, "sglang")
    assert cfg.told == {} and cfg.speculates is None and cfg.why_no_speculation() is None
    assert cfg.summary() == "not told"


def test_vllm_dev_mode_config(answering) -> None:
    url = answering({"/v1/models": {"data": [{"id": "smol", "max_model_len": 2048}]},
                     "/server_info?config_format=json": {"vllm_config": {
                         "speculative_config": {"method": "ngram", "num_speculative_tokens": 4},
                         "scheduler_config": {"max_num_seqs": 256}}}})
    with Client(url) as client:
        cfg = read_server_config(client, "vllm")
    assert (cfg.speculative_algorithm, cfg.speculative_num_draft_tokens, cfg.max_running_requests) == ("ngram", 4, 256)
    assert cfg.context_length == 2048 and not cfg.says("tool_call_parser")


def test_vllm_admission_cap_below_max_num_seqs_is_the_seats(answering) -> None:
    """vLLM 0.32+ `scheduler_config.max_num_active_seqs` (0.33 lowers it for DFlash/DSpark): the seats."""
    url = answering({"/server_info?config_format=json": {"vllm_config": {
        "speculative_config": None, "scheduler_config": {"max_num_seqs": 1024, "max_num_active_seqs": 96}}}})
    with Client(url) as client:
        cfg = read_server_config(client, "vllm")
    assert (cfg.max_running_requests, cfg.seats_told) == (96, "scheduler_config.max_num_active_seqs")
    url = answering({"/server_info?config_format=json": {"vllm_config": {
        "speculative_config": None, "scheduler_config": {"max_num_seqs": 1024, "max_num_active_seqs": None}}}})
    with Client(url) as client:
        assert read_server_config(client, "vllm").max_running_requests == 1024


def test_the_report_says_what_the_server_said() -> None:
    from pytest_glmf.results.report import terminal_report

    cfg = ServerConfig(engine="sglang", speculative_algorithm=None, tool_call_parser="hermes",
                       told={"speculative_algorithm": "/server_info", "tool_call_parser": "/server_info"})
    doc = {"lane": {"name": "sglang-oracle"}, "provenance": {"engine": "sglang", "server_config": cfg.to_dict()}}
    assert terminal_report(doc).splitlines()[:2] == [
        "pytest-glmf results: lane sglang-oracle, engine sglang",
        "the server says: speculative_algorithm null, tool_call_parser hermes (/server_info)"]
    assert "the server says" not in terminal_report({"provenance": {"server_config": ServerConfig().to_dict()}})
