"""What the boot gate adds to the reports beyond its table (`GateReport`, gates/spec.py): the HTML
page's facts, one per row with its bound and change, and the boot facts of lanes side by side in a
comparison.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_glmf.gates.spec import CompareTable, Comps, GateReport, Table
from pytest_glmf.results.columns import cell
from pytest_glmf.results.html_blocks import is_number, metric_doc, table, td, th
from pytest_glmf.results.html_gates import bound_of, bound_text, misses
from pytest_glmf.text import fmt

BOOT_FACTS = [("seats (max_running_requests)", "max_running_requests"),
              ("requested seats", "requested_max_running_requests"), ("why capped", "cap_reason"),
              ("max_mamba_cache_size", "max_mamba_cache_size"), ("state slots per request", "state_slots_per_request"),
              ("KV pool tokens", "kv_tokens"), ("KV cache GiB", "kv_cache_memory_gib"), ("context", "context_len"),
              ("KV pool layout", "kv_pool_layout"), ("max concurrency", "max_concurrency"), ("ready", "ready")]


def concurrency_words(value: Any, seats: Any) -> str:
    """vLLM's maximum concurrency ({tokens_per_request, factor}) in words, as the terminal's boot
    table says it: "151.98x at 4,096 tokens per request"."""
    if not (isinstance(value, Mapping) and is_number(value.get("factor")) and is_number(value.get("tokens_per_request"))):
        return cell(value)
    short = (f" (fewer full-length requests than the {seats:,} seats)"
             if is_number(seats) and value["factor"] < seats else "")
    return f"{value['factor']:g}x at {value['tokens_per_request']:,} tokens per request{short}"


def boot_body(entries: Mapping[str, Any], bounds: Mapping[str, Any], comps: Comps) -> str | None:
    """The boot facts one per row, each with its bound and its change against the baseline; None
    where the entries hold no facts (the page shows them as a table of entries then)."""
    if not isinstance(entries.get("facts"), Mapping):
        return None
    facts = entries["facts"]
    rows = []
    for label, key in BOOT_FACTS:
        value = facts.get(key)
        if value is None:
            continue
        bound = bound_of("boot", bounds, "facts", facts, key)
        cls, change = comps.get(("boot", "facts", key), ("", ""))
        miss = misses(value, bound)
        source = (facts.get("sources") or {}).get(key)
        said = f"({source})" if source and source != "boot log" else ""
        note = " ".join(x for x in (said, bound_text(bound), change) if x)
        shown = concurrency_words(value, facts.get("max_running_requests")) if key == "max_concurrency" else fmt(value)
        rows.append([td(label, tip=metric_doc("boot", key)),
                     td(shown, ("num " + ("miss" if miss else cls)).strip() if is_number(value) else "", note)])
    # sizes in GiB, as the terminal's boot table (SGLang prints "GB" for GiB; vLLM prints GiB)
    for pool in facts.get("kv_pools") or []:
        if isinstance(pool, Mapping):
            size = f", {fmt(pool.get('size_gb'))} GiB" if pool.get("size_gb") is not None else ""
            rows.append([td("KV pool"), td(f"{fmt(pool.get('tokens'))} tokens, {pool.get('dtype')}{size}")])
    pool = entries.get("state_pool")
    if isinstance(pool, Mapping) and pool.get("gb_per_seat") is not None:
        rows.append([td("state pool GiB"), td(fmt(pool.get("total_gb")), "num")])
        rows.append([td("state pool GiB per seat"), td(fmt(pool.get("gb_per_seat")), "num")])
    for problem in facts.get("problems") or []:
        rows.append([td("problem"), td(str(problem), "miss")])
    want = bounds.get("kv_pool_dtypes") if bounds else None
    if want:
        rows.append([td("KV pool dtypes wanted"), td(", ".join(map(str, want)))])
    return table([th("fact"), th("value")], rows, raw=True)


# ---------------------------------------------------------------------------- a comparison of lanes

COMPARE_ROWS = [("seats (max_running_requests)", "max_running_requests"),
                ("requested seats", "requested_max_running_requests"), ("why capped", "cap_reason"),
                ("max_mamba_cache_size", "max_mamba_cache_size"), ("state slots per request", "state_slots_per_request"),
                ("KV pool tokens", "kv_tokens"), ("KV cache GiB", "kv_cache_memory_gib"), ("context", "context_len")]


def facts_of(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The boot facts of a result document, {} without them."""
    return ((doc.get("gates") or {}).get("boot") or {}).get("facts") or {}


def compare_table(lanes: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    # why capped: the cap line's reason, not the engine's advice after it (the boot gate prints that)
    facts = [{**f, "cap_reason": str(f["cap_reason"]).split("): ")[0] + ")" if f.get("cap_reason") else None}
             for f in (facts_of(doc) for _, doc in lanes)]
    rows = [[label, *(fmt(f.get(key)) for f in facts)] for label, key in COMPARE_ROWS
            if any(f.get(key) is not None for f in facts)]
    pools = [((doc.get("gates") or {}).get("boot") or {}).get("state_pool") or {} for _, doc in lanes]
    if any(p.get("gb_per_seat") is not None for p in pools):
        rows.append(["state pool GiB", *(fmt(p.get("total_gb")) for p in pools)])
        rows.append(["state pool GiB per seat", *(fmt(p.get("gb_per_seat")) for p in pools)])
    origins = [str((doc.get("lane") or {}).get("origin") or "") for _, doc in lanes]
    if any(origins):
        rows.insert(0, ["derived from", *(o or "-" for o in origins)])
    return ["", *(name for name, _ in lanes)], rows


def legacy_facts(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """What an older `glmf bootlog --json` wrote: the facts themselves (`BootFacts.to_dict()`)."""
    return {"facts": dict(data)} if "ready" in data and "max_running_requests" in data else None


REPORT = GateReport(html_body=boot_body, compare=CompareTable("Boot facts side by side", 40, compare_table),
                    legacy=legacy_facts)
