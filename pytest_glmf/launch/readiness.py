"""When a server is ready for the tests: one rule for every launcher (process, sim, docker, attach).

Readiness never asks for a generation of its own: `/health_generate` is never called. It is a real
generation (SGLang's `http_server.py` sends a 1-token request), which would be the engine's first
request from us, count toward its batch-shape autotune, and trip first-request crashes (the
recipe's GLM-5.3 NextN crash, sglang#37548) during boot instead of in a test that names them.

The rule (`is_ready`):
  * the engine's ready line is in its log and its port answers `GET /v1/models` (any HTTP answer
    below 500: with `--api-key` it is 401, which still proves the server listens). SGLang prints
    "The server is fired up and ready to roll!" in `_wait_and_warmup` after its own warmup
    generation (`entrypoints/http_server.py`, 0.5.x). The port check matters for containers:
    docker-proxy accepts connections before the server listens.
  * without a ready line (vLLM prints none that its released code confirms; SGLang run with
    `--log-level warning` hides it): `GET /health` and `GET /v1/models` both 200. SGLang's
    `/health` shares its handler with `/health_generate` and answers 503 until its own warmup has
    set the server Up, so even there the probe is never the engine's first generation.
  * an attached server (`--glmf-url`) was booted by someone else: it counts as past its ready line,
    so its port must answer.

Healthy before the line is logged: SGLang sets the server Up after its warmup request and logs the
ready line only after that (`_wait_and_warmup`: status Up, GC freeze, then the line), and the line
reaches our log file later still (a pipe, or docker's log stream). A launcher whose health probe
passed first waits up to `CATCH_UP_S` for the line (`catch_up`), so the boot facts read it.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import httpx

READY_LINES = {"sglang": "The server is fired up and ready to roll!"}
PROBE_TIMEOUT_S = 5.0
CATCH_UP_S = 5.0        # healthy, ready line not in the log file yet: how long it may lag (see above)


def ready_line(engine: str) -> str | None:
    """The line the engine logs when it is ready, None when it has none to watch for."""
    return READY_LINES.get(engine)


def catch_up(seen: Callable[[], bool], timeout_s: float = CATCH_UP_S, poll_s: float = 0.05) -> bool:
    """Wait until `seen()` (the ready line is in the log file), at most `timeout_s`: the server
    answered healthy before its line reached the file. False when it never came (SGLang run with
    `--log-level warning` hides it; the boot facts then say not ready, as the log does)."""
    deadline = time.monotonic() + timeout_s
    while not seen():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def _status(client: "httpx.Client", url: str) -> tuple[int | None, str]:
    try:
        code = client.get(url).status_code
    except httpx.HTTPError as exc:      # not listening yet (or docker-proxy accepted, then reset)
        return None, f"{type(exc).__name__}: {exc}"
    return code, str(code)


def probe(client: "httpx.Client", base_url: str, ready_line_seen: bool) -> tuple[bool, str]:
    """(ready, what was seen) by the rule above; `what` names each endpoint's answer."""
    if ready_line_seen:
        code, seen = _status(client, base_url + "/v1/models")
        return code is not None and code < 500, f"GET /v1/models -> {seen}" if code is not None else seen
    answers = []
    for path in ("/health", "/v1/models"):
        code, text = _status(client, base_url + path)
        if code is None:
            return False, text               # nothing answers: the error says it all
        answers.append(f"GET {path} -> {text}")
        if code != 200:
            return False, ", ".join(answers)
    return True, ", ".join(answers)


def is_ready(client: "httpx.Client", base_url: str, ready_line_seen: bool) -> bool:
    return probe(client, base_url, ready_line_seen)[0]
