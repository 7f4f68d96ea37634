"""engine/introspect.py against real HTTP servers answering like each engine (shapes from the
engines' released code, cited in the module), and the engine identity check through pytester."""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_glmf.engine.client import Client
from pytest_glmf.engine.introspect import (
    EngineUnknown,
    detect_engine,
    engine_version,
    identify,
    parse_metrics,
    served_model,
)

SGLANG_0_5_23 = {   # sglang/srt/entrypoints/http_server.py: /model_info, /server_info; deprecated aliases
    "/v1/models": {"object": "list", "data": [{"id": "glm", "object": "model", "owned_by": "sglang"}]},
    "/model_info": {"model_path": "/models/glm", "tokenizer_path": "/models/glm"},
    "/server_info": {"version": "0.5.23", "frontend": "python", "internal_states": []},
    "/get_model_info": {"model_path": "/models/glm"},
    "/get_server_info": {"version": "0.5.23"},
}
OLD_SGLANG = {"/get_model_info": {"model_path": "/m"}, "/get_server_info": {"version": "0.4.9"},
              "/v1/models": {"object": "list", "data": [{"id": "m", "object": "model"}]}}
VLLM_DEV_MODE = {   # vllm serves /server_info only with VLLM_SERVER_DEV_MODE=1, holding vllm_config
    "/v1/models": {"object": "list", "data": [{"id": "smol", "object": "model", "owned_by": "vllm"}]},
    "/version": {"version": "0.32.0"},
    "/server_info": {"vllm_config": "model='smol'", "vllm_env": {}, "system_env": {}},
}
VLLM_BEHIND_A_PROXY = {**VLLM_DEV_MODE, "/v1/models": {"data": [{"id": "smol", "owned_by": "gateway"}]}}


@pytest.fixture
def fake_engine() -> Iterator[Callable[[dict[str, Any]], tuple[str, list[str]]]]:
    """A server answering GET with the given JSON per path (404 otherwise); returns (url, calls)."""
    servers = []

    def start(routes: dict[str, Any]) -> tuple[str, list[str]]:
        calls: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                calls.append(self.path)
                body = routes.get(self.path)
                raw = json.dumps(body).encode() if body is not None else b'{"detail":"Not Found"}'
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", calls

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("routes", "engine", "version", "source"), [
    (SGLANG_0_5_23, "sglang", "0.5.23", "/server_info"),
    (OLD_SGLANG, "sglang", "0.4.9", "/get_server_info"),
    (VLLM_DEV_MODE, "vllm", "0.32.0", "/version"),
    (VLLM_BEHIND_A_PROXY, "vllm", "0.32.0", "/version"),
], ids=["sglang-0.5.23", "old-sglang", "vllm-dev-mode", "vllm-behind-a-proxy"])
def test_engine_version_and_model(fake_engine, routes, engine, version, source) -> None:
    url, calls = fake_engine(routes)
    with Client(url) as client:
        assert detect_engine(client) == engine
        assert engine_version(client) == (version, source)
        assert served_model(client) == routes["/v1/models"]["data"][0]["id"]


def test_vllm_dev_mode_server_info_is_never_taken_for_sglang(fake_engine) -> None:
    """The issue's case: `glmf accept` without --engine called a dev-mode vLLM an SGLang server."""
    url, _ = fake_engine({k: v for k, v in VLLM_BEHIND_A_PROXY.items() if k != "/version"})
    with Client(url) as client, pytest.raises(EngineUnknown, match="cannot tell whether this is SGLang or vLLM"):
        detect_engine(client)


def test_deprecated_endpoints_are_not_probed_when_the_new_ones_answer(fake_engine) -> None:
    """Each call of /get_model_info or /get_server_info logs a deprecation WARNING on 0.5.23."""
    url, calls = fake_engine({k: v for k, v in SGLANG_0_5_23.items() if k != "/v1/models"})
    with Client(url) as client:
        assert detect_engine(client) == "sglang"
        assert engine_version(client, "sglang") == ("0.5.23", "/server_info")
    assert not [c for c in calls if c.startswith("/get_")], calls


def test_metrics_through_prometheus_client_parser() -> None:
    text = ('# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.\n'
            '# TYPE vllm:spec_decode_num_drafts counter\n'
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0\n'
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5.0\n'
            'vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9\n'
            'sglang:num_running_reqs{model_name="m",tp_rank="0"} 3\n')
    assert parse_metrics(text, ["vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total"]) \
        == {"vllm:spec_decode_num_drafts_total": 15.0}
    assert parse_metrics(text)["sglang:num_running_reqs"] == 3.0
    with pytest.raises(ValueError):
        parse_metrics("this is { not prometheus\n")


def test_identity_names_every_source_that_disagrees(fake_engine) -> None:
    url, _ = fake_engine(VLLM_DEV_MODE)
    with Client(url) as client:
        ident = identify(client, "sglang", boot_log_engine="vllm")
    assert ident.disagreement() == ("the lane declares engine 'sglang' but /v1/models owned_by says vllm, "
                                    "/version says vllm, the boot log says vllm")
    with Client(url) as client:
        assert identify(client, "vllm", boot_log_engine="vllm").disagreement() is None


def test_attach_to_the_wrong_engine_stops_before_measuring(pytester, fake_engine) -> None:
    url, _ = fake_engine(VLLM_DEV_MODE)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  batch: {{launcher: attach, url: '{url}'}}\n")
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "batch", "-k", "test_boot",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(errors=4)
    line = (f"EngineMismatch: lane 'batch' ({lanes}): the lane declares engine 'sglang' but /v1/models owned_by "
            f"says vllm, /version says vllm (at {url}); set the lane's engine: to what the server is, or point the "
            "lane at the right server")
    result.stdout.fnmatch_lines(["_* ERROR at setup of test_boot_log_has_no_problems _*", line])
    # the end-of-session summary wraps its lines at 120 columns (continuations indented by four)
    summary = " ".join(ln.strip() for ln in result.stdout.str().split("INCOMPLETE: ", 1)[1].splitlines()[:6])
    assert summary.startswith(f"the server did not boot: {line}"), summary


def test_a_lane_declaring_vllm_on_the_simulator_is_refused(pytester) -> None:
    """Launch, not only attach: the simulator (an SGLang server) started as a vLLM process lane is
    SGLang by every source, its boot log included; it is stopped and nothing is measured."""
    import sys

    lanes = pytester.makefile(".yaml", lanes=(
        "lanes:\n  batch:\n    engine: vllm\n    launcher: process\n    boot_timeout_s: 60\n"
        f"    command: [{sys.executable!r}, -m, pytest_glmf.sim, --port, '{{port}}', --time-scale, '0.05']\n"))
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "batch", "-k", "test_boot",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines([
        f"EngineMismatch: lane 'batch' ({lanes}): the lane declares engine 'vllm' but /v1/models owned_by says "
        "sglang, /server_info says sglang, the boot log says sglang (at http://127.0.0.1:*); set the lane's engine: "
        "to what the server is, or point the lane at the right server"])


def test_a_lane_made_from_the_url_alone_takes_the_engine_the_server_names(fake_engine) -> None:
    """`--glmf-url U` without a lane declares no engine: the server's own agreeing answer is taken."""
    from pytest_glmf.config.lanes import LaneConfig
    from pytest_glmf.launch.base import Server
    from pytest_glmf.launch.identity import EngineMismatch, check_identity

    url, _ = fake_engine(VLLM_DEV_MODE)
    lane = LaneConfig(name="attach", launcher="attach", url=url, source="--glmf-url")
    server = Server(base_url=url, engine=lane.engine, lane=lane)
    check_identity(server)
    assert (server.engine, server.lane.engine) == ("vllm", "vllm")
    assert server.provenance["engine_identity"]["sources"] == {"/v1/models owned_by": "vllm", "/version": "vllm"}
    confused, _ = fake_engine({**VLLM_DEV_MODE, "/v1/models": SGLANG_0_5_23["/v1/models"]})
    lane = LaneConfig(name="attach", launcher="attach", url=confused, source="--glmf-url")
    with pytest.raises(EngineMismatch, match="the server's own sources disagree: /v1/models owned_by says sglang, "
                                             "/version says vllm"):
        check_identity(Server(base_url=confused, engine="sglang", lane=lane))
