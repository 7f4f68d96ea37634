"""What an attached server's URL may be, and what is said when it is not a server or stops (issue
33, item 8): a base URL ending in /v1 is the server's root; a plain web server on the port is
refused at attach with one line; a server that stops answering mid-run is named as such, with the
last lines of its log when the lane names one (not "curve.settings: [Errno 111] Connect call failed")."""
from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from pytest_glmf.cli import main
from pytest_glmf.testing.truth_server import TruthServer


@pytest.fixture
def file_server(tmp_path) -> Iterator[str]:
    """`python -m http.server`: answers every GET, none of them as an LLM server."""
    (tmp_path / "index.html").write_text("<html>files</html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None   # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("suffix", ["/v1", "/v1/"])
def test_a_base_url_ending_in_v1_is_the_servers_root(pytester, running_fake_server, suffix, unfold) -> None:
    root = running_fake_server.base_url
    test = pytester.makepyfile("""
        def test_paths(glmf_server, glmf_client):
            assert glmf_server.base_url == glmf_server.lane.url
            assert not glmf_server.base_url.endswith("/v1")
            assert glmf_client.get_json("/v1/models")["path"] == "/v1/models"   # not /v1/v1/models
    """)
    by_option = pytester.runpytest("--glmf-url", root + suffix, "--glmf-lane", "batch", "-p", "no:cacheprovider",
                                  str(test))
    by_option.assert_outcomes(passed=1)
    pytest.LineMatcher(unfold(by_option.stdout.str()).splitlines()).fnmatch_lines([
        f"glmf: lane=batch launcher=attach url={root} thresholds=*"])
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  mine: {{launcher: attach, url: '{root}{suffix}'}}\n")
    by_lane = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "mine", "-p", "no:cacheprovider", str(test))
    by_lane.assert_outcomes(passed=1)


def test_glmf_curve_takes_a_base_url_ending_in_v1(tmp_path, capsys) -> None:
    out = tmp_path / "curve.json"
    with TruthServer(ttft_ms=5, itl_ms=2) as ts:
        main(["curve", "--url", f"{ts.url}/v1", "--users", "1", "--runs", "1", "--no-warmup", "--max-tokens", "8",
              "--client-retries", "0", "--json", str(out)])   # (exit 1 when a loaded box marks the run client-bound)
    assert "404" not in capsys.readouterr().err
    (row,) = json.loads(out.read_text())["command_output"]["rows"]
    records = row["per_run"][0]["records"]
    assert records and all(r["error"] is None and r["status"] == 200 and r["completion_tokens"] == 8 for r in records), records


def test_a_plain_web_server_is_refused_at_attach_with_one_line(pytester, file_server) -> None:
    test = pytester.makepyfile("def test_x(glmf_server):\n    pass\n")
    result = pytester.runpytest("--glmf-url", file_server, "--glmf-lane", "batch", "-p", "no:cacheprovider", str(test))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        f"*lane 'batch' (attach launcher): {file_server} is not an LLM server: GET {file_server}/v1/models answered "
        "404 (text/html), not an OpenAI-compatible model list; give the URL of an SGLang or vLLM server"])


def test_a_server_that_stops_answering_mid_run_is_named_with_its_log_tail(pytester, running_fake_server,
                                                                          unfold) -> None:
    url, log = running_fake_server.base_url, running_fake_server.boot_log_path
    pid = running_fake_server.provenance["pid"]
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  mine: {{launcher: attach, url: '{url}', boot_log: '{log}'}}\n")
    th = pytester.makefile(".yaml", th="lanes:\n  mine: {curve: {settings: {max_tokens: 8, runs: 1}}}\n")
    test = pytester.makepyfile(f"""
        import os, signal, time

        def test_a_curve_row(glmf_curve):
            os.kill({pid}, signal.SIGKILL)    # the server dies between the attach and the row
            time.sleep(0.5)
            glmf_curve(1)

        def test_next(glmf_server):
            pass
    """)
    result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "mine", "--glmf-thresholds",
                                           str(th), "--glmf-results", str(pytester.path / "r"), "-p", "no:cacheprovider",
                                           str(test))
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        f"lane 'mine': the server stopped answering (nothing accepts connections at {url} any more) "
        "during this test (ConnectionRefusedError: *).",
        f"last 3 lines of the server log {log}:",
        "  | [2026-09-11 10:00:03] The server is fired up and ready to roll!",
    ])
    assert "curve.settings" not in result.stdout.str()
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([   # folded at 120
        "glmf: NOT verified: own tests: 1 skipped: glmf: lane 'mine': the server stopped "
        "answering (nothing accepts connections at * any more) during this test (*)); not run"])
    verified = result.stdout.lines.index(next(x for x in result.stdout.lines
                                              if x.startswith("glmf: NOT verified: own tests")))
    assert len(result.stdout.lines[verified]) <= 120 and result.stdout.lines[verified + 1].startswith("    ")
