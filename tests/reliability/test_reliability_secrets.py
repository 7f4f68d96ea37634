"""Reliability matrix, secrets: HF_TOKEN and every *TOKEN*/*KEY*/*SECRET* value, from the lane's env,
the process env or a secret-named flag, reaches the server (a tiny process-lane server reports their
SHA-256) but never the terminal (header, failures, boot errors), the server log, the result file,
the JUnit XML or `glmf report`."""
from __future__ import annotations

import hashlib
import json
import sys

import pytest

SECRETS = {"HF_TOKEN": "hf_lane_secret_1234", "MY_API_KEY": "key-lane-abcd", "DB_SECRET": "dbsecret-9999",
           "--api-key": "sk-cmdline-5678"}

SERVER = r'''
import hashlib, http.server, json, os, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
key = args[args.index("--api-key") + 1]
names = ["HF_TOKEN", "MY_API_KEY", "DB_SECRET"]
digests = {n: hashlib.sha256(os.environ.get(n, "").encode()).hexdigest() for n in names}
digests["--api-key"] = hashlib.sha256(key.encode()).hexdigest()
print(f"[boot] server_args=ServerArgs(api_key='{key}')", flush=True)   # like SGLang's own dump
for n in names:
    print(f"[boot] env {n}={os.environ.get(n)}", flush=True)
if "--crash" in args:
    print(f"RuntimeError: cannot log in with token {os.environ.get('HF_TOKEN')}", flush=True)
    sys.exit(1)

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(digests if self.path == "/secrets" else {"data": [{"id": "m"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
print("The server is fired up and ready to roll!", flush=True)
server.serve_forever()
'''

USER_TESTS = """
import hashlib, os

def test_secrets_arrived(glmf_client, glmf_results):
    want = {"HF_TOKEN": "hf_lane_secret_1234", "MY_API_KEY": "key-lane-abcd",
            "DB_SECRET": os.environ["DB_SECRET"], "--api-key": "sk-cmdline-5678"}
    got = glmf_client.get_json("/secrets")
    assert got == {k: hashlib.sha256(v.encode()).hexdigest() for k, v in want.items()}
    glmf_results.record("user", "echo", {"note": "saw " + os.environ["DB_SECRET"], "hf_token": "anything"})

def test_fails_with_the_server_log(glmf_server):
    raise AssertionError(glmf_server.boot_log)
"""


def lanes_yaml(crash: bool) -> str:
    extra = ", --crash" if crash else ""
    return (f"lanes:\n  tok:\n    launcher: process\n    boot_timeout_s: 20\n"
            f"    command: [{sys.executable!r}, secret_server.py, --port, '{{port}}', --api-key, "
            f"{SECRETS['--api-key']}{extra}]\n"
            f"    env: {{HF_TOKEN: {SECRETS['HF_TOKEN']}, MY_API_KEY: {SECRETS['MY_API_KEY']}}}\n")


def assert_masked(text: str, where: str) -> None:
    leaked = [name for name, value in SECRETS.items() if value in text]
    assert not leaked, f"{where} shows the value of {leaked}"


@pytest.fixture
def secret_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_SECRET", SECRETS["DB_SECRET"])   # the process env of the pytest run
    pytester.makepyfile(secret_server=SERVER)


def test_secrets_reach_the_server_but_no_output(pytester: pytest.Pytester, secret_env, capsys) -> None:
    from pytest_glmf.results import report

    pytester.makefile(".yaml", lanes=lanes_yaml(crash=False))
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", "lanes.yaml", "--glmf-lane",
                                           "tok", "--junitxml", "junit.xml", "test_user.py")
    result.assert_outcomes(passed=1, failed=1)           # the hashes matched: every value arrived
    assert_masked("\n".join(result.outlines + result.errlines), "the terminal")
    result.stdout.fnmatch_lines(["*server_args=ServerArgs(api_key='***')", "*env HF_TOKEN=***", "*env DB_SECRET=***"])
    results = pytester.path / "glmf-results"
    (log,) = results.glob("tok-*-server.log")
    assert_masked(log.read_text(), "the server log")
    assert "env MY_API_KEY=***" in log.read_text()
    (doc_path,) = results.glob("tok-2*.json")
    text = doc_path.read_text()
    assert_masked(text, "the result file")
    doc = json.loads(text)
    assert doc["lane"]["env"] == {"HF_TOKEN": "***", "MY_API_KEY": "***"}
    assert doc["gates"]["user"]["echo"] == {"note": "saw ***", "hf_token": "***"}
    assert "***" in doc["provenance"]["argv"]
    assert_masked((pytester.path / "junit.xml").read_text(), "the JUnit XML")
    capsys.readouterr()
    report.cli([str(doc_path)])
    assert_masked(capsys.readouterr().out, "glmf report")


def test_secrets_are_masked_in_a_boot_error(pytester: pytest.Pytester, secret_env) -> None:
    pytester.makefile(".yaml", lanes=lanes_yaml(crash=True))
    pytester.makepyfile("def test_x(glmf_server): pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", "lanes.yaml", "--glmf-lane",
                                           "tok", ".")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["BootError: lane 'tok' (process launcher): the server exited with code 1 during boot",
                                 "command: * --api-key ***"])
    result.stdout.fnmatch_lines(["  | RuntimeError: cannot log in with token ***"])
    assert_masked("\n".join(result.outlines + result.errlines), "the boot error")
    for path in (pytester.path / "glmf-results").rglob("*"):   # the history store (binary) included
        if path.is_file():
            assert_masked(path.read_bytes().decode("utf-8", "replace"), str(path.name))


def test_redactor_masks_the_process_env_the_lane_env_and_secret_flags() -> None:
    from pytest_glmf.redact import MASK, Redactor

    r = Redactor.from_environment({"HF_TOKEN": "hf_aaaa"}, ["sglang", "--api-key", "sk-bbbb", "--hf-token=hf_cccc"])
    assert r.text("hf_aaaa sk-bbbb hf_cccc ok") == f"{MASK} {MASK} {MASK} ok"
    assert hashlib.sha256(b"x").hexdigest() == r.text(hashlib.sha256(b"x").hexdigest())   # no collateral
