"""Boot-log format strings pinned against the released SGLang 0.5.23 source.

Every 0.5.23 line in pytest_glmf/engine/logformats.py names the file (inside the sglang package)
whose format string prints it and that string's skeleton (expressions as `{}`). Here the skeleton
must be found, verbatim, in that file of the installed release: a version that changes a line fails
naming the line, the file and what the file has now. The simulator's rendering of each line must
be an instance of the skeleton, and the boot parser must read a log made of them.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest
from sources import find, skeleton_regex, skeletons

from pytest_glmf.engine import logformats as lf
from pytest_glmf.gates.boot.parse import parse_boot_log

pytestmark = pytest.mark.contract

RELEASED = {name: fmt for name, fmt in lf.FORMATS[lf.V0_5_23].items() if fmt.source}

# sample field values for every template (what the simulator would fill in)
SAMPLE: dict[str, dict[str, Any]] = {
    "load_weight_begin": {"avail_gb": 250.0},
    "load_weight_end": {"elapsed_s": 23.18, "arch": lf.GLM5_ARCHITECTURE, "avail_gb": 91.56, "usage_gb": 158.44},
    "chat_template": {"content_format": "string"},
    "mamba_pool": {"slots": 640, "conv_gb": 0.77, "ssm_gb": 42.24},
    "mamba_pool_spec": {"slots": 48, "conv_gb": 0.06, "ssm_gb": 6.34, "issm_gb": 9.74, "iconv_gb": 0.2},
    "kv_pool": {"dtype": "torch.float8_e4m3fn", "tokens": 597120, "size_gb": 3.45},
    "kv_pool_kv": {"dtype": "torch.bfloat16", "tokens": 1000, "k_gb": 1.0, "v_gb": 1.0},
    "memory_pool_end": {"avail_gb": 41.61},
    "mamba_cap": {"seats": 9, "slots": 48, "slots_per_request": 5},
    "kv_reduced": {"requested": 74, "seats": 26},
    "post_capture": {"before": 30, "after": 26},
    "summary": {"kv_tokens": 597120, "chunked_prefill_size": 8192, "max_prefill_tokens": 16384, "seats": 9,
                "context_len": 1048576, "avail_gb": 37.5},
    "ready": {},
    "scheduler_exception": {"traceback": "Traceback (most recent call last):"},
    "sigquit": {},
    "not_enough_memory": {},
    "deprecated_get_model_info": {},
    "deprecated_get_server_info": {},
    "decode_batch": {"running": 9, "usage": "#token: 4100, token usage: 0.01"},
    "server_args": {"args_dict": {"model_path": "/m", "max_running_requests": 74}},
    "tree_cache": {"source": "default", "impl": "UnifiedRadixCache", "swa": False, "ssm": True, "hicache": False},
    "graph_begin": {"capture_name": "target verify", "backend": "full", "tokens_per_req": 7, "avail_gb": 41.61},
    "graph_end": {"capture_name": "target verify", "bs": [1, 2, 4, 8], "elapsed_s": 6.2, "usage_gb": 4.11,
                  "avail_gb": 37.5},
    "unified_mamba_banner": {"full_side": "MLA"},
    "unified_mamba_pool": {"total_bytes": 48318382080, "kv_tokens": 597120, "slots": 640, "max_num_reqs": 128,
                           "draft_tokens": None},
    "kv_pool_va": {"dtype": "torch.bfloat16", "tokens": 1048576, "size_gb": 24.0},
    "post_capture_layers": {"full_tokens": 786432, "swa_tokens": 0},
    "post_capture_kv": {"dtype": "torch.bfloat16", "tokens": 786432, "size_gb": 18.0, "avail_gb": 6.2},
}


def test_every_released_line_has_a_sample() -> None:
    assert sorted(SAMPLE) == sorted(RELEASED)


@pytest.mark.parametrize("name", sorted(RELEASED), ids=[f"{n}@{RELEASED[n].source}" for n in sorted(RELEASED)])
def test_format_string_is_in_the_released_source(sglang_package: Path, name: str) -> None:
    fmt = RELEASED[name]
    path = sglang_package.parent / fmt.source
    assert path.is_file(), f"line {name!r}: {fmt.source} is not in the installed sglang"
    found = [line for line, sk in skeletons(path) if sk == fmt.skeleton]
    if not found:
        anchor = fmt.skeleton.replace("{}", "\0").split("\0")
        anchor = max(anchor, key=len)
        near = [f"{fmt.source}:{line}: {sk!r}" for line, sk in find(path, anchor)] or difflib.get_close_matches(
            fmt.skeleton, [sk for _, sk in skeletons(path)], n=2, cutoff=0.5)
        pytest.fail(f"line {name!r}: {fmt.source} no longer has the format {fmt.skeleton!r}; it has: {near}",
                    pytrace=False)
    # the simulator's rendering is an instance of the released format string
    rendered = lf.render(lf.V0_5_23, name, **SAMPLE[name])
    assert skeleton_regex(fmt.skeleton).match(rendered), (name, rendered, f"{fmt.source}:{found[0]}")


@pytest.fixture(scope="module")
def srt_sources(sglang_package: Path) -> dict[Path, str]:
    return {p: p.read_text(errors="replace") for p in (sglang_package / "srt").rglob("*.py")}


@pytest.mark.parametrize("anchor", ["Using KV cache dtype", "Capture cuda graph bs", "Init torch distributed",
                                    "server_args=ServerArgs("])
def test_nightly_only_lines_are_gone_from_0_5_23(sglang_package: Path, srt_sources: dict[Path, str],
                                                 anchor: str) -> None:
    """Lines the nightly generation prints and 0.5.23's source no longer has: the released-format
    simulator must not print them. (Pre-filtered on the anchor's first two words, which no format
    string of these splits.)"""
    words = " ".join(anchor.split()[:2])
    hits = [f"{p.relative_to(sglang_package.parent)}:{line}" for p, text in srt_sources.items()
            if words in text for line, _ in find(p, anchor)]
    assert hits == []
    assert not any(anchor in fmt.template for fmt in RELEASED.values())


def test_the_parser_reads_a_log_made_of_released_lines() -> None:
    def line(name: str, rank: str = " TP0") -> str:
        return f"[2026-10-30 10:00:00{rank}] " + lf.render(lf.V0_5_23, name, **SAMPLE[name])

    text = "\n".join([
        line("server_args", ""), line("load_weight_begin"), line("load_weight_end"), line("mamba_pool_spec"),
        line("kv_pool"), line("memory_pool_end"), line("mamba_cap"), line("tree_cache"), line("graph_begin"),
        line("graph_end"), line("summary"), line("ready", "")])
    f = parse_boot_log(text)
    assert (f.engine, f.ready, f.problems, f.kv_pool_layout) == ("sglang", True, [], lf.LAYOUT_ONE_POOL)
    assert (f.max_running_requests, f.requested_max_running_requests, f.kv_tokens, f.context_len) == (
        9, 74, 597120, 1048576)
    assert (f.max_mamba_cache_size, f.state_slots_per_request, f.cuda_graph_bs) == (48, 5, [1, 2, 4, 8])
    assert f.kv_pools == [{"tokens": 597120, "dtype": "float8_e4m3fn", "size_gb": 3.45}]
    assert f.cap_reason.endswith(": increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
                                 "state size with --mamba-ssm-dtype bfloat16")
    fatal = "\n".join([line("scheduler_exception"), "RuntimeError: " + lf.render(lf.V0_5_23, "not_enough_memory"),
                       line("sigquit", "")])
    assert [p.split(": ", 1)[1] for p in parse_boot_log(fatal).problems] == [
        "Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."]
    assert parse_boot_log(line("post_capture") + "\n" + line("ready", "")).max_running_requests == 26
