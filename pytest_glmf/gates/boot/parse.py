"""Boot log -> BootFacts, for SGLang and vLLM. Contract: docs/architecture.md section 5.

Log formats drift between engine versions (docs/engines.md sections 1, 2, 7), so every fact is read from
`key=value` / `key: value` fragments of a line, never from a whole-line pattern. Per-rank lines
(SGLang `[ts TP3]`, vLLM `(Worker_TP1 pid=..)`) are copies of one fact: a fact is taken from the
primary rank (TP0 / DP0 / rank=0 / no rank) when it printed one, else from the first rank that did.

Engine-specific decisions are documented where they are made: gates/boot/sglang.py (both
generations of SGLang's lines, pytest_glmf/engine/logformats.py) and gates/boot/vllm.py.
`kv_pools[].dtype` drops the `torch.` prefix (`bfloat16`, `float8_e4m3fn`); `size_gb` is the sum of
the sizes on the pool's line, as printed (SGLang's "GB" are GiB).
"""
from __future__ import annotations

import re

from pytest_glmf.gates.boot.facts import DOCKER_TS, BootFacts, LogLine, log_lines
from pytest_glmf.gates.boot.sglang import SGL_READY, parse_sglang
from pytest_glmf.gates.boot.vllm import VLLM_READY, parse_vllm

__all__ = ["BootFacts", "engine_version", "parse_boot_log"]


# ---------------------------------------------------------------------------------------------
# Engine detection: count lines that only one engine prints.

_SGL_MARKS = re.compile(
    r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}|KV Cache is allocated|Mamba Cache is allocated|"
    r"max_total_num_tokens=|Capture cuda graph|Decode batch|Prefill batch|Scheduler hit an exception|"
    r"ServerArgs\(|ready to roll|max_running_requests (?:is |was )?(?:capped|reduced)|sglang|"
    r"speculative_algorithm=|mem_fraction_static=|Load weight end\.|Memory pool end\.")
_VLLM_MARKS = re.compile(
    r"^\((?:APIServer|EngineCore|Worker|VllmWorker)|^(?:INFO|WARNING|ERROR|DEBUG) \d{2}-\d{2} |"
    r"(?:GPU|CPU) KV cache size|# GPU blocks|Maximum concurrency for|vllm|vLLM|non-default args|"
    r"SpecDecoding metrics|Available KV cache memory|Graph capturing finished")


def _engine(text: str) -> str | None:
    sgl = vllm = 0
    for raw in text.splitlines():
        if raw.startswith("# source:"):
            continue
        raw = DOCKER_TS.sub("", raw, count=1)
        sgl += bool(_SGL_MARKS.search(raw))
        vllm += bool(_VLLM_MARKS.search(raw))
    if sgl == vllm:
        return None
    return "sglang" if sgl > vllm else "vllm"


_VERSION = [
    re.compile(r"\bversion (\d+\.\d+\.\d+\S*)"),                           # vLLM banner / API server
    re.compile(r"LLM engine \(v(\d+\.\d+\.\d+\S*)\)"),                      # vLLM config line
    re.compile(r"\b[Ss][Gg][Ll]ang(?: version|==| v)\s*v?(\d+\.\d+\.\d+\S*)"),
]


def engine_version(text: str) -> str | None:
    """The engine version the log prints (vLLM banner/config line; SGLang prints none at boot)."""
    for pattern in _VERSION:
        if m := pattern.search(text):
            return m.group(1)
    return None


# ---------------------------------------------------------------------------------------------
# Problems: fatal errors and memory failures, both engines.

_FATAL = re.compile(
    r"Scheduler hit an exception|Not enough memory\. Please try to increase --mem-fraction-static|"
    r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|illegal memory access|"
    r"Initialization failed\. warmup error|Not enough GPU memory for hybrid|"
    r"Not enough space for mamba ping pong idx|Capture cuda graph failed|"
    r"max_total_tokens=\d+ is larger than the profiled value -\d+|"
    r"max_running_requests is capped to 0\b|"
    r"Engine core initialization failed|EngineCore failed to start|(?:WorkerProc|EngineCore) hit an exception|"
    r"larger than the maximum number of tokens that can be stored in KV cache")
# The last line of a Python traceback: `RuntimeError: ...`, `torch.OutOfMemoryError: ...`.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<name>[A-Z]\w*(?:Error|Exception))(?::\s|$)")
# Optional imports that fail with a traceback while the server still boots fine (SGLang probes
# torchcodec for video input and logs the failure).
_BENIGN_EXCEPTIONS = {"ImportError", "ModuleNotFoundError"}
_BENIGN_TRACEBACK = re.compile(r"torchcodec")
_PROBLEM_CHARS = 240
_FATAL_REPORT_LINES = 200  # a fatal line's traceback ends within this many lines


def _problems(lines: list[LogLine], ready_no: int | None) -> list[str]:
    """Fatal lines anywhere; other exception lines only during boot or in a fatal line's traceback.
    (After the ready line, a request the server rejected logs a traceback too; that is no failure.)"""
    seen: set[str] = set()
    out = []
    traceback = ""  # the frames since the last `Traceback (most recent call last):`
    last_fatal_no = -_FATAL_REPORT_LINES
    for line in lines:
        msg = line.msg
        if msg.endswith("Traceback (most recent call last):"):
            traceback = ""
        traceback += msg + "\n"
        fatal = bool(_FATAL.search(msg))
        if fatal:
            last_fatal_no = line.no
        m = _EXCEPTION.match(msg)
        counts = m and m.group("name") not in _BENIGN_EXCEPTIONS and not _BENIGN_TRACEBACK.search(traceback)
        if counts and ready_no is not None and line.no > ready_no:
            counts = line.no - last_fatal_no <= _FATAL_REPORT_LINES
        if not (fatal or counts):
            continue
        if msg in seen:
            continue  # every TP rank prints the same failure
        seen.add(msg)
        short = msg if len(msg) <= _PROBLEM_CHARS else msg[:_PROBLEM_CHARS - 3] + "..."
        out.append(f"line {line.no}: {short}")
    return out


# ---------------------------------------------------------------------------------------------


def parse_boot_log(text: str) -> BootFacts:
    """Facts a boot log states, null where it does not say (see the module docstring)."""
    lines = log_lines(text)
    facts = BootFacts(engine=_engine(text), log_read=bool(text.strip()))
    ready = None
    if facts.engine == "vllm":
        parse_vllm(lines, facts)
        ready = next((ln for ln in lines if VLLM_READY.search(ln.msg)), None)
    elif facts.engine == "sglang":
        parse_sglang(lines, facts)
        ready = next((ln for ln in lines if SGL_READY.search(ln.msg)), None)
    facts.ready = ready is not None
    facts.problems = _problems(lines, ready.no if ready else None)
    return facts
