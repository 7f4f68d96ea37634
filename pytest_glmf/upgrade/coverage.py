"""Does this pytest-glmf read a release right? The plugin's own coverage of a target release, judged
apart from the lanes: a boot line the boot gate reads that the release no longer prints, a line the
release now prints that changes what the gate must read and the gate does not read yet, a `/metrics`
name or an endpoint the gates use that is gone. A gap here is pytest-glmf's to mend (the lane itself
boots), so `glmf upgrade` reports it in its own section with its own exit code (cli.py).

Boot lines are grouped by what the gate takes from them (`READS`: a fact and what goes wrong when it is
not read). A fact is covered when one line the gate declares for it is printed by the release, or a
line of the release's that feeds it (`PRINTS`) matches one of the gate's patterns; only an uncovered
fact is a gap, one per fact, whichever of its lines went.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_glmf import __version__
from pytest_glmf.gates.boot.vllm import VLLM_LINES
from pytest_glmf.upgrade.formats import skeleton_regex
from pytest_glmf.upgrade.surface import ENDPOINTS, boot_formats, metric_names, source_has, source_mentions

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


@dataclass(frozen=True)
class Fact:
    what: str           # the line, as a user calls it: "override line"
    consequence: str    # what a run reads wrong without it


# boot-gate line name (gates/boot/vllm.py VLLM_LINES, engine/logformats.py) -> what it feeds
READS: dict[str, Fact] = {
    "active_seqs_override": Fact("override line", "seats may be wrong for speculative lanes"),
    "kv_cache_size": Fact("KV cache size line", "the KV pool's tokens are not read"),
    "max_concurrency": Fact("maximum concurrency line", "the concurrency per request is not read"),
    "kv_cache_memory": Fact("KV cache memory line", "the KV pool's GiB may be wrong"),
    "kv_cache_memory_cpu": Fact("CPU KV cache memory line", "the CPU KV pool's GiB are not read"),
    "context_auto_fit": Fact("auto-fit line", "the context may be the one asked for, not the one fitted"),
    "context": Fact("max model len line", "the context length may not be read"),
    "non_default_args": Fact("non-default args line", "the seats asked for are not read"),
    "engine_config": Fact("engine config line", "KV dtypes and CUDA graph sizes are not read"),
    "context_config": Fact("engine config line", "KV dtypes and CUDA graph sizes are not read"),
}
# vLLM 0.34's lines feed the same facts as the lines they reword or settle (one gap per fact)
READS |= {
    "active_seqs_override_fit": READS["active_seqs_override"],
    **{name: READS["kv_cache_memory"] for name in ("kv_after_warmup", "kv_extended", "kv_remapped",
                                                   "kv_extensible_disabled", "kv_extensible_off")},
    **{name: READS["context_auto_fit"] for name in ("context_auto_fit_tentative", "context_auto_reduced",
                                                    "context_auto_reduced_short", "context_auto_fit_after_warmup")},
}


@dataclass(frozen=True)
class Printed:
    """A line a release prints that feeds a fact: when present and no gate pattern matches it, a gap."""
    fact: str           # a READS key
    source: str         # the file inside the package
    skeleton: str       # its format string, every field as {}
    sample: tuple[object, ...]
    consequence: str = ""   # what goes wrong while it is unread, where the fact's own words do not say it


PRINTS: dict[str, list[Printed]] = {"vllm": [
    # vLLM 0.34: the override reworded (vllm/config/vllm.py)
    Printed("active_seqs_override", "vllm/config/vllm.py",
            "The {} draft pass fits at most {} requests within max_num_batched_tokens={}. "
            "Overriding max_num_active_seqs from {} to {}.", ("DFlash", 64, 8192, 80, 64)),
    # vLLM 0.34, the extensible KV cache (on by default on CUDA): "Available KV cache memory" is the reservation
    # before warmup; the pool is settled after it (vllm/v1/worker/extensible_kv_cache.py)
    Printed("kv_cache_memory", "vllm/v1/worker/extensible_kv_cache.py", "Extended KV cache to {} blocks ({} GiB).",
            (3660, "57.22"), "the KV pool read is the reservation before warmup, not the final pool"),
    Printed("kv_cache_memory", "vllm/v1/worker/extensible_kv_cache.py",
            "Memory after warmup: {} GiB free, {} GiB committed to the KV cache, {} GiB kept for transient "
            "activations ({} GiB allocated at peak, {} GiB of torch reservation growth); {} KV cache blocks ({} GiB) "
            "fit within the requested {} GiB. Torch may reserve up to {} GiB.",
            ("1.20", "57.22", "2.10", "1.50", "0.30", 3660, "57.22", "79.10", "2.40"),
            "the KV pool read is the reservation before warmup, not the final pool"),
    # vLLM 0.34: the auto-fitted context is tentative until after warmup, then logged again (kv_cache_planning.py)
    Printed("context_auto_fit", "vllm/v1/core/kv_cache_planning.py",
            "--max-model-len auto reduced max_model_len from {} to {} ({}).",
            (1048576, 262144, "37.50 GiB available for the KV cache"),
            "the context read may be the tentative one before warmup, not the final one"),
], "sglang": []}


def boot_gaps(engine: str, package_parent: Path, version: str | None = None) -> dict[str, dict[str, Any]]:
    """fact -> the gap, for the boot lines of `engine` the release at `package_parent` (`version`) breaks:
    a fact whose lines the release all dropped (none of its new lines read either), or one with a new
    line the gate does not read. Only the lines the gate expects `version` to print are looked for (a
    line the gate knows 0.34 retired is no gap on 0.34)."""
    printed: dict[str, bool] = {}
    gone: dict[str, str] = {}
    for name, source, skeleton in boot_formats(engine, version):
        fact = _fact_key(name)
        if source_has(package_parent, source, skeleton) is not None:
            printed[fact] = True
        else:
            printed.setdefault(fact, False)
            gone.setdefault(fact, f"{source}: {skeleton[:90]!r} is gone")
    unread: dict[str, tuple[str, str]] = {}
    for line in PRINTS.get(engine, []):
        fact = _fact_key(line.fact)
        if source_has(package_parent, line.source, line.skeleton) is None:
            continue
        if any(p.search(line.skeleton.format(*line.sample)) for p in _patterns(engine)):
            printed[fact] = True
        else:
            unread.setdefault(fact, (f"{line.source}: {line.skeleton[:90]!r} is not read", line.consequence))
    out = {}
    for fact in sorted(set(gone) | set(unread)):
        if fact in unread:
            out[fact] = {"detail": unread[fact][0], "consequence": unread[fact][1]}
        elif not printed.get(fact):
            out[fact] = {"detail": gone[fact], "consequence": ""}
    return out


def _fact_key(name: str) -> str:
    """Lines that feed one fact share a key (the two engine-config lines)."""
    fact = READS.get(name)
    return next((n for n, f in READS.items() if f == fact), name) if fact else name


def _patterns(engine: str) -> list[Any]:
    if engine == "vllm":
        return [x.pattern for x in VLLM_LINES.values()]
    return [skeleton_regex(sk) for _, _, sk in boot_formats(engine)]


def gaps(engine: str, version: str | None, package_dir: str | None) -> list[dict[str, Any]]:
    """Every gap of this pytest-glmf on the release whose package is at `package_dir`, each with the line
    a user reads: "pytest-glmf X does not read vLLM 0.34.0's override line yet: seats may be wrong ..."."""
    if package_dir is None:
        return []
    parent = Path(package_dir).parent
    release = f"{ENGINE_NAMES.get(engine, engine)} {version or '?'}"
    out = []
    for fact, gap in boot_gaps(engine, parent, version).items():
        known = READS.get(fact, Fact(f"{fact} line", "the boot gate may miss what that line says"))
        out.append({"what": fact, "kind": "boot line",
                    "message": f"pytest-glmf {__version__} does not read {release}'s {known.what} yet: "
                               f"{gap['consequence'] or known.consequence}", "detail": gap["detail"]})
    metrics = metric_names(engine)
    stems = {m: m[: -len("_total")] if m.endswith("_total") else m for m in metrics}
    seen = source_mentions(parent, engine, sorted({*metrics, *stems.values()}))
    out += [{"what": m, "kind": "metric", "message": f"pytest-glmf {__version__} reads the metric {m}, which "
             f"{release} no longer exports: the gates that read it see nothing", "detail": "no such name in its source"}
            for m in metrics if not (seen.get(m) or seen.get(stems[m]))]
    paths = source_mentions(parent, engine, list(ENDPOINTS[engine]))
    out += [{"what": p, "kind": "endpoint", "message": f"pytest-glmf {__version__} calls {p}, which {release} no "
             "longer serves: the gates that call it fail", "detail": "no route with that path in its source"}
            for p, ok in paths.items() if not ok]
    return out
