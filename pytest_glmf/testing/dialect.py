"""The simulator's dialect against the released SGLang's: answers compared by shape.

A shape is the set of key paths of a JSON answer, each with the JSON types seen there:
`meta_info.cached_tokens -> {number}`, `choices[].delta.content -> {str, null}`. A list's items
share the path `[]` (their union), so a stream of chunks is one shape. Numbers are one type
(`number`): JSON has no int/float, and `0` vs `0.0` is not a dialect.

`diff` names each difference in one line, on the real SGLang's side of the story:

    chat_stream choices[].delta.reasoning_content: missing in the simulator (real str|null)
    generate meta_info.cached_tokens: real number, sim str
    server_info time_scale: the simulator sends it, the real SGLang does not

Modes, per surface (`SURFACES` says which is used where, and why):
- `exact`: the same paths with the same types at every depth (generation answers, chunks, small
  endpoints);
- `subset`: every path the simulator sends exists in the real one with the same types; `required`
  paths must be in both (the 37 KB /server_info: the plugin reads a few of its keys).
In both, `allow` names paths (and everything under them) that are not compared, each with the
reason: what they hold depends on the model or on a feature the simulator does not model.

Pure functions over plain data; capture (HTTP) lives in `dialect_capture.py`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_glmf.engine.serverconfig import SGLANG_KEYS
from pytest_glmf.load import GEN_TOKENS, QUEUED, RUNNING

Shape = dict[str, set[str]]

ROOT = "."


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def shape(obj: Any, prefix: str = "") -> Shape:
    """Every key path of `obj` with the JSON types seen there (the root is `.`)."""
    out: Shape = {}
    _walk(obj, prefix, out)
    return out


def _walk(v: Any, path: str, out: Shape) -> None:
    out.setdefault(path or ROOT, set()).add(json_type(v))
    if isinstance(v, dict):
        for k, x in v.items():
            _walk(x, f"{path}.{k}" if path else str(k), out)
    elif isinstance(v, list):
        for x in v:
            _walk(x, f"{path}[]", out)


def merge(shapes: Iterable[Shape]) -> Shape:
    out: Shape = {}
    for s in shapes:
        for p, types in s.items():
            out.setdefault(p, set()).update(types)
    return out


def to_json(s: Shape) -> dict[str, list[str]]:
    return {p: sorted(t) for p, t in sorted(s.items())}


def from_json(d: Mapping[str, Iterable[str]]) -> Shape:
    return {p: set(t) for p, t in d.items()}


def _types(t: set[str]) -> str:
    return "|".join(sorted(t)) if t else "absent"


def _allowed(path: str, allow: Mapping[str, str]) -> bool:
    return any(path == a or path.startswith(a + ".") or path.startswith(a + "[]") for a in allow)


def diff(real: Shape, sim: Shape, *, surface: str = "", mode: str = "exact", allow: Mapping[str, str] | None = None,
         required: Iterable[str] = ()) -> list[str]:
    """One line per difference, naming the surface and the key path; empty when the shapes agree."""
    if mode not in ("exact", "subset"):
        raise ValueError(f"diff mode must be 'exact' or 'subset', got {mode!r}")
    allow = allow or {}
    head = f"{surface} " if surface else ""
    lines = []
    for p in sorted(set(real) | set(sim)):
        r, s = real.get(p, set()), sim.get(p, set())
        if _allowed(p, allow):
            continue
        if not s:
            if mode == "exact":
                lines.append(f"{head}{p}: missing in the simulator (real {_types(r)})")
        elif not r:
            lines.append(f"{head}{p}: the simulator sends it, the real SGLang does not (sim {_types(s)})")
        elif r != s and not (mode == "subset" and s <= r):
            lines.append(f"{head}{p}: real {_types(r)}, sim {_types(s)}")
    for p in required:
        missing = [who for who, sh in (("the real SGLang", real), ("the simulator", sim)) if p not in sh]
        if missing:
            lines.append(f"{head}{p}: read by the plugin, missing in {' and '.join(missing)}")
    return lines


# ------------------------------------------------------------------------------------------------
# Prometheus text: family name -> label names (values and label values are not the dialect)

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def metric_labels(text: str) -> dict[str, set[str]]:
    """Sample name -> the label names on its samples (`le` of histogram buckets dropped), from the
    Prometheus text format; `_bucket`/`_count`/`_sum` samples are folded into their family name."""
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")
                and line.split()[3:4] == ["histogram"]}
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        name = m.group(1)
        for suf in _SUFFIXES[:3]:
            if name.endswith(suf) and name[: -len(suf)] in families:
                name = name[: -len(suf)]
        out.setdefault(name, set()).update(k for k in _LABEL.findall(m.group(2) or "") if k != "le")
    return out


def metrics_diff(real: Mapping[str, set[str]], sim: Mapping[str, set[str]], names: Iterable[str]) -> list[str]:
    """Every metric the simulator sends exists in the real one with the same label names; the
    `names` (those the plugin reads) are in both."""
    lines = []
    for n in sorted(set(names) | set(sim)):
        r, s = real.get(n), sim.get(n)
        if s is None:
            lines.append(f"metrics {n}: read by the plugin, missing in the simulator (real labels {sorted(r or ())})"
                         if r is not None else f"metrics {n}: read by the plugin, missing in both")
        elif r is None:
            lines.append(f"metrics {n}: the simulator sends it, the real SGLang does not")
        elif r != s:
            lines.append(f"metrics {n}: real labels {sorted(r)}, sim {sorted(s)}")
    return lines


# ------------------------------------------------------------------------------------------------
# The surfaces and what "same shape" means for each


@dataclass(frozen=True)
class Surface:
    name: str
    mode: str = "exact"
    allow: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()


# Paths not compared, per surface, and why (the real stage serves SmolLM2-135M, the simulator the
# recipe's GLM-5.3-Flash; tests/real_sglang/test_dialect.py sends both the same requests).
ALLOW: dict[str, dict[str, str]] = {
    # tool_choice=required: the 135M model answered in prose (content, no tool_calls) where the
    # simulator's GLM calls the tool; the call's own keys are compared on tools_stream, where it called
    "tools": {"choices[].message.content": "the model's choice: prose or a call",
              "choices[].message.tool_calls": "the model's choice: prose or a call",
              "choices[].matched_stop": "which stop token ended the answer, if any, is the model's"},
    "tools_stream": {"[].choices[].matched_stop": "which stop token ended the answer, if any, is the model's"},
    # SGLang resolves an embedding plan for architectures it can also serve as embedding models
    # (SmolLM2's LlamaForCausalLM); what it says for the recipe's GLM is not known here
    "model_info": {"embedding": "present for architectures SGLang can embed with (SmolLM2's Llama)"},
    "server_info": {"mamba_ssm_dtype": "null for a model without a mamba state (SmolLM2), set for the hybrid GLM",
                    "internal_states[].mamba_ssm_dtype": "as mamba_ssm_dtype"},
}

# Keys of /server_info the plugin reads (engine/serverconfig.py SGLANG_KEYS, introspect.py version,
# surface.py): in both, same type.
SERVER_INFO_READ = ("version", "speculative_algorithm", "speculative_num_draft_tokens", "tool_call_parser",
                    "reasoning_parser", "decode_log_interval", "max_total_num_tokens",
                    "internal_states[].effective_max_running_requests_per_dp")


def surfaces() -> dict[str, Surface]:
    read = tuple(dict.fromkeys((*SERVER_INFO_READ, *SGLANG_KEYS.values())))
    names = ("health", "health_generate", "ready", "health_starting", "models", "model_info", "chat", "chat_stream",
             "chat_stream_usage", "completion", "completion_stream", "completion_stream_usage", "generate_greedy",
             "generate_score", "tools", "tools_cut", "tools_stream", "bad_request")
    out = {n: Surface(n, allow=ALLOW.get(n, {})) for n in names}
    out["server_info"] = Surface("server_info", mode="subset", allow=ALLOW["server_info"], required=read)
    return out


def plugin_metrics() -> tuple[str, ...]:
    """The SGLang metrics the plugin reads (the curve's token count and seat gauges)."""

    return tuple(n for names in (GEN_TOKENS, RUNNING, QUEUED) for n in names if n.startswith("sglang:"))


def compare_captures(real: Mapping[str, Shape], sim: Mapping[str, Shape]) -> list[str]:
    """Every surface of the real capture against the simulator's; a surface the simulator did not
    answer at all is one line. `metrics` maps metric names to label names (`metric_labels`)."""
    lines = []
    table = surfaces()
    for name in sorted(real):
        if name == "metrics":
            lines += metrics_diff(real[name], sim.get(name, {}), plugin_metrics())
            continue
        if name not in sim:
            lines.append(f"{name}: not captured from the simulator")
            continue
        s = table.get(name, Surface(name))
        lines += diff(real[name], sim[name], surface=name, mode=s.mode, allow=s.allow, required=s.required)
    return lines
