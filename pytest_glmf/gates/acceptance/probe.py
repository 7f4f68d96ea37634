"""Speculative-decoding acceptance per prompt class, single stream.

The recipe's table (DFlash2 block 7): accept rate 0.39 mean across seven classes, 0.29 on prose,
0.61 on step-by-step math, with single-stream tok/s per class. This module measures the same three
numbers per class, one request at a time, so each request's speculation statistics are its own:

- `accept_rate`: accepted draft tokens / drafted tokens.
- `accept_length`: tokens produced per verify step (the drafted tokens that survived plus the
  target model's own token). SGLang's definition is completion_tokens / spec_verify_ct (PR #3152);
  vLLM's is 1 + accepted / drafts (its `Mean acceptance length` log field). `accept_length_basis`
  in the result says which.
- `tok_s`: decode rate, (completion_tokens - tokens of the first chunk) / (last chunk - first
  chunk), from a streamed request; the end-to-end rate (prefill included) is kept as `e2e_tok_s`.

Sources (recorded in every result as `source`):
- SGLang: native `/generate` with the chat rendered client-side by a named template (default
  `glm`, the GLM-4.5+ layout, which the simulator also uses server-side), streamed; the last chunk's `meta_info` carries
  `spec_verify_ct` and, depending on the version, `spec_accept_rate` / `spec_accept_length` and
  accepted/drafted counters (0.5.23: `spec_num_correct_drafts`/`spec_num_proposed_drafts`, only on the
  finished answer and only when `spec_verify_ct > 0`, sglang/srt/managers/tokenizer_manager.py;
  other builds: `spec_accepted_drafts`/`spec_proposed_drafts`, `spec_accept_token_num`/`spec_draft_token_num`).
  The chat endpoint does not return `meta_info`, which is why the native endpoint is used.
- vLLM: `/v1/chat/completions` streamed (the server applies its own chat template), and the
  difference of the Prometheus counters `vllm:spec_decode_num_accepted_tokens_total`,
  `vllm:spec_decode_num_draft_tokens_total`, `vllm:spec_decode_num_drafts_total` read before and
  after each request. Correct only when nothing else uses the server meanwhile; the probe never
  overlaps its own requests.

- vLLM with `--per-request-spec-decode-metrics summary|detailed` (0.32, 0.33, 0.34 alike): the last (usage) chunk's
  `metrics.speculative_decoding` (vllm/entrypoints/generate/base/protocol.py `SpeculativeDecodingMetrics`:
  `num_spec_steps`, `num_draft_tokens`, `num_accepted_draft_tokens`, `acceptance_histogram`, a dense
  list whose index j counts the steps that accepted exactly j drafts). Read per request, so it holds
  while other requests run; the counters are then not read at all.

Per-position acceptance (`accept_pos1`..): the fraction of draft steps whose k-th draft token was
accepted. vLLM accepts a prefix of each draft (`observe_draft` counts position i < accepted), so
position k's count is the number of steps that accepted at least k drafts: the response histogram's
tail sum, or the delta of `vllm:spec_decode_num_accepted_tokens_per_pos_total{position="k-1"}`.
SGLang 0.5.23's meta_info has the same histogram (`spec_correct_drafts_histogram`, tokenizer_manager.py).

Several requests at once (`users` > 1): each request's numbers must be its own. SGLang's meta_info
and vLLM's per-request metrics are; vLLM's /metrics counters are one sum over every request in
flight, so under load they cannot tell the classes apart and the probe refuses (`LoadNeedsPerRequest`).

A server without speculative decoding (SGLang: no spec fields, or spec_verify_ct 0 over a
multi-token answer; vLLM: no spec_decode counters on /metrics) is reported as `speculative: false`,
never as a 0 % acceptance. A class the server drafted nothing for (an n-gram proposer that found
nothing to propose) has `draft_tokens: 0`, `no_drafts: true` and no rate, length or position numbers:
"no drafts proposed for this class", never an acceptance of 0 or a length of 1.0.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import parse_yaml
from pytest_glmf.data import read_text as read_data_file
from pytest_glmf.engine.client import Client
from pytest_glmf.engine.introspect import parse_metrics, served_model
from pytest_glmf.gates.acceptance.spec import DEFAULTS, POSITIONS, TEMPLATES

VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"    # label position="0".. (0-based)
SOURCE_SGLANG = "sglang /generate meta_info (per request)"
SOURCE_VLLM = "vllm /metrics spec_decode counters (delta around each request)"
SOURCE_VLLM_RESPONSE = "vllm response metrics.speculative_decoding (per request)"
NO_DRAFTS = "no drafts proposed for this class"


class LoadNeedsPerRequest(ValueError):
    """Acceptance under load asked of a server whose numbers are server-wide sums."""

# meta_info counter pairs (accepted, drafted), newest naming first (docs/engines.md section 3).
SGLANG_COUNTER_PAIRS = (("spec_accept_token_num", "spec_draft_token_num"),
                        ("spec_num_correct_drafts", "spec_num_proposed_drafts"),
                        ("spec_accepted_drafts", "spec_proposed_drafts"))


@dataclass
class PromptClass:
    name: str
    label: str
    max_tokens: int
    prompts: list[list[dict[str, str]]]       # each prompt is a chat (list of messages)
    recipe: dict[str, Any] = field(default_factory=dict)


def load_prompt_classes(path: str | Path | None = None) -> list[PromptClass]:
    """The prompt classes from a YAML file (None: the packaged pytest_glmf/data/prompt_classes.yaml)."""
    data = parse_yaml(read_data_file(path, "prompt_classes.yaml"), str(path or "pytest_glmf/data/prompt_classes.yaml"))
    out = []
    for c in data["classes"]:
        chats = [[{"role": "user", "content": p}] if isinstance(p, str) else list(p["messages"])
                 for p in c["prompts"]]
        out.append(PromptClass(c["name"], c.get("label", c["name"]), int(c["max_tokens"]), chats,
                               dict(c.get("recipe") or {})))
    return out




def render_chat(messages: list[dict[str, str]], template: str) -> str:
    """Client-side chat template for SGLang's native /generate (which takes text, not messages).

    glm: the GLM-4.5+ layout (`[gMASK]<sop><|system|>\n...<|user|>\n...<|assistant|>`), the model
    decides whether to think; glm-nothink: the same with an empty `<think></think>` block opened,
    so the answer itself is drafted; chatml: `<|im_start|>role ...`; raw: the last user message."""
    if template in ("glm", "glm-nothink"):
        body = "".join(f"<|{m['role']}|>\n{m['content']}" for m in messages)
        tail = "\n<think></think>\n" if template == "glm-nothink" else ""
        return f"[gMASK]<sop>{body}<|assistant|>{tail}"
    if template == "chatml":
        body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return body + "<|im_start|>assistant\n"
    if template == "raw":
        return [m["content"] for m in messages if m["role"] == "user"][-1]
    raise ValueError(f"unknown template {template!r} ({', '.join(TEMPLATES)})")


@dataclass
class AcceptRecord:
    """One request's speed and speculation statistics. None: not reported."""

    class_name: str
    prompt_index: int
    source: str
    completion_tokens: int | None = None
    e2e_s: float | None = None
    ttft_s: float | None = None
    decode_s: float | None = None            # first chunk -> last chunk
    decode_tokens: int | None = None         # tokens after the first chunk
    verify_steps: int | None = None          # SGLang spec_verify_ct; vLLM drafts delta
    accepted_tokens: int | None = None
    draft_tokens: int | None = None
    reported_accept_rate: float | None = None
    reported_accept_length: float | None = None
    accepted_per_pos: list[int] | None = None   # steps whose draft token k+1 was accepted (index k)
    speculative: bool | None = None          # False: the server did no speculation here
    error: str | None = None


def spec_from_meta_info(meta: dict[str, Any]) -> dict[str, Any]:
    """The speculation fields of one SGLang meta_info, normalised (absent: None)."""
    out: dict[str, Any] = {"verify_steps": meta.get("spec_verify_ct"),
                           "reported_accept_rate": meta.get("spec_accept_rate"),
                           "reported_accept_length": meta.get("spec_accept_length"),
                           "accepted_tokens": None, "draft_tokens": None}
    for acc_key, draft_key in SGLANG_COUNTER_PAIRS:
        if meta.get(acc_key) is not None and meta.get(draft_key) is not None:
            out["accepted_tokens"], out["draft_tokens"] = int(meta[acc_key]), int(meta[draft_key])
            break
    # 0.5.23: spec_correct_drafts_histogram, index j = the steps that accepted exactly j drafts, grown
    # only to the largest j seen (scheduler_components/batch_result_processor.py); padded here to the
    # drafts per step so a position no step accepted reads 0, not unmeasured
    hist = meta.get("spec_correct_drafts_histogram", meta.get("spec_accept_histogram"))
    if isinstance(hist, list) and hist and all(isinstance(n, int) for n in hist):
        steps, drafted = out["verify_steps"], out["draft_tokens"]
        per_step = drafted // steps if steps and drafted else len(hist) - 1
        out["accepted_per_pos"] = per_position_from_histogram(list(hist) + [0] * max(0, per_step + 1 - len(hist)))
    has_any = any(k.startswith("spec_") for k in meta)
    completion = meta.get("completion_tokens") or 0
    if not has_any:
        # 0.5.23 adds the spec fields only when spec_verify_ct > 0: a one-token answer says nothing
        out["speculative"] = False if completion > 1 else None
    else:
        # spec_verify_ct present but 0 over a multi-token answer: the algorithm is off.
        steps = out["verify_steps"]
        out["speculative"] = not (steps == 0 and completion > 1 and not out["draft_tokens"])
    return out


def _timing(rec: AcceptRecord, t0: float, t_first: float | None, t_last: float | None,
            first_tokens: int) -> None:
    rec.e2e_s = (t_last or time.perf_counter()) - t0
    if t_first is not None:
        rec.ttft_s = t_first - t0
        rec.decode_s = (t_last or t_first) - t_first
        if rec.completion_tokens is not None:
            rec.decode_tokens = max(rec.completion_tokens - first_tokens, 0)


def measure_sglang(client: Client, class_name: str, prompt_index: int, messages: list[dict[str, str]],
                   max_tokens: int, *, template: str = DEFAULTS.template) -> AcceptRecord:
    """One streamed /generate request; statistics from the last chunk's meta_info."""
    rec = AcceptRecord(class_name, prompt_index, SOURCE_SGLANG)
    body = {"text": render_chat(messages, template),
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0}}
    t0 = time.perf_counter()
    t_first = t_last = None
    first_tokens = 0
    meta: dict[str, Any] = {}
    try:
        for t, event in client.stream_events("/generate", body):
            meta = event.get("meta_info") or meta
            n = meta.get("completion_tokens") or 0
            if n > 0 and t_first is None:
                t_first, first_tokens = t, n
            t_last = t
    except Exception as exc:  # noqa: BLE001 - the record carries the error, the gate reports it
        rec.error = f"{type(exc).__name__}: {exc}"[:300]
        return rec
    if not meta:
        # a server that ignores `stream` answers with one JSON body: fall back to it, e2e timing only
        try:
            t0 = time.perf_counter()
            meta = (client.post_json("/generate", body) or {}).get("meta_info") or {}
            t_last = time.perf_counter()
        except Exception as exc:  # noqa: BLE001
            rec.error = f"{type(exc).__name__}: {exc}"[:300]
            return rec
        if not meta:
            rec.error = "no meta_info in the /generate answer"
            return rec
    rec.completion_tokens = meta.get("completion_tokens")
    for k, v in spec_from_meta_info(meta).items():
        setattr(rec, k, v)
    _timing(rec, t0, t_first, t_last, first_tokens)
    return rec


def per_position_from_histogram(histogram: list[int]) -> list[int]:
    """Steps that accepted draft token k+1 (index k) from a dense histogram whose index j counts the
    steps that accepted exactly j drafts: a step that accepted j drafts accepted positions 1..j."""
    return [sum(histogram[k + 1:]) for k in range(len(histogram) - 1)]


def _read_spec_counters(client: Client) -> dict[str, float]:
    """The three totals, and the per-position counters as `<name>#<position>` (0-based, vLLM's label)."""
    text = client.get_text("/metrics")
    out = parse_metrics(text, (VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS))
    for line in text.splitlines():
        if line.startswith(VLLM_PER_POS + "{"):
            labels, _, value = line[len(VLLM_PER_POS) + 1:].rpartition("} ")
            pos = next((lv.split("=", 1)[1].strip('"') for lv in labels.split(",") if lv.startswith("position=")), None)
            if pos is not None and pos.isdigit():
                key = f"{VLLM_PER_POS}#{pos}"
                out[key] = out.get(key, 0.0) + float(value.split()[0])
    return out


def _per_pos_delta(before: dict[str, float], after: dict[str, float]) -> list[int] | None:
    positions = sorted(int(k.rpartition("#")[2]) for k in after if k.startswith(VLLM_PER_POS + "#"))
    if not positions:
        return None
    return [int(after.get(f"{VLLM_PER_POS}#{k}", 0) - before.get(f"{VLLM_PER_POS}#{k}", 0))
            for k in range(positions[-1] + 1)]


def _settled_counters(client: Client, settle_s: float = 1.0) -> dict[str, float]:
    """Counters once two reads 50 ms apart agree: the engine may publish the last step's stats
    just after the final chunk went out."""
    prev = _read_spec_counters(client)
    deadline = time.perf_counter() + settle_s
    while time.perf_counter() < deadline:
        time.sleep(0.05)
        cur = _read_spec_counters(client)
        if cur == prev:
            return cur
        prev = cur
    return prev


def spec_from_vllm_response(stats: dict[str, Any]) -> dict[str, Any]:
    """The record's fields from one response's `metrics.speculative_decoding` (vLLM 0.32+)."""
    hist = stats.get("acceptance_histogram")
    return {"verify_steps": int(stats["num_spec_steps"]), "draft_tokens": int(stats["num_draft_tokens"]),
            "accepted_tokens": int(stats["num_accepted_draft_tokens"]),
            "reported_accept_rate": stats.get("draft_acceptance_rate"),
            "reported_accept_length": stats.get("mean_acceptance_length"),
            "accepted_per_pos": per_position_from_histogram(hist) if isinstance(hist, list) else None,
            "speculative": True}


def measure_vllm(client: Client, class_name: str, prompt_index: int, messages: list[dict[str, str]],
                 max_tokens: int, *, model: str | None = None, counters: bool = True) -> AcceptRecord:
    """One streamed chat completion: its own `metrics.speculative_decoding` when the server sends
    it, else (`counters`) the difference of two /metrics reads around it."""
    rec = AcceptRecord(class_name, prompt_index, SOURCE_VLLM)
    body: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens, "temperature": 0,
                            "stream_options": {"include_usage": True}}
    if model:
        body["model"] = model
    stats: dict[str, Any] | None = None
    try:
        before = _settled_counters(client) if counters else {}
        t0 = time.perf_counter()
        t_first = t_last = None
        usage = None
        for t, event in client.stream_events("/v1/chat/completions", body):
            usage = event.get("usage") or usage
            stats = ((event.get("metrics") or {}).get("speculative_decoding")) or stats
            for ch in event.get("choices") or []:
                d = ch.get("delta") or {}
                if t_first is None and (d.get("content") or d.get("reasoning_content") or d.get("reasoning")):
                    t_first = t
                if d:
                    t_last = t
        after = _settled_counters(client) if counters and stats is None else {}
    except Exception as exc:  # noqa: BLE001
        rec.error = f"{type(exc).__name__}: {exc}"[:300]
        return rec
    rec.completion_tokens = (usage or {}).get("completion_tokens")
    _timing(rec, t0, t_first, t_last, 1)  # the first chunk is the prefill's one token
    if stats is not None:
        rec.source = SOURCE_VLLM_RESPONSE
        for k, v in spec_from_vllm_response(stats).items():
            setattr(rec, k, v)
        return rec
    if not counters:
        rec.error = ("no metrics.speculative_decoding in the response: acceptance under load needs "
                     "--per-request-spec-decode-metrics summary")
        return rec
    if VLLM_DRAFTS not in after:
        rec.speculative = False
        return rec
    rec.verify_steps = int(after[VLLM_DRAFTS] - before.get(VLLM_DRAFTS, 0))
    rec.draft_tokens = int(after.get(VLLM_DRAFT_TOKENS, 0) - before.get(VLLM_DRAFT_TOKENS, 0))
    rec.accepted_tokens = int(after.get(VLLM_ACCEPTED, 0) - before.get(VLLM_ACCEPTED, 0))
    rec.accepted_per_pos = _per_pos_delta(before, after)
    # The counters exist only with --speculative-config. Zero drafts over a whole answer is still
    # speculation: an n-gram proposer drafts nothing when the prompt has no matching n-gram.
    rec.speculative = True
    return rec


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarize_class(name: str, records: list[AcceptRecord], engine: str) -> dict[str, Any]:
    """The class row: pooled over requests (sums, not means of ratios, so long answers weigh more)."""
    ok = [r for r in records if r.error is None]
    spec = [r for r in ok if r.speculative]
    row: dict[str, Any] = {"class": name, "requests": len(records), "errors": len(records) - len(ok),
                           "speculative": bool(spec) if ok else None}
    comp = sum(r.completion_tokens or 0 for r in ok)
    dec_tok = sum(r.decode_tokens or 0 for r in ok if r.decode_s)
    dec_s = sum(r.decode_s or 0 for r in ok if r.decode_s)
    row["completion_tokens"] = comp
    row["tok_s"] = _div(dec_tok, dec_s) if dec_tok else _div(comp, sum(r.e2e_s or 0 for r in ok))
    row["e2e_tok_s"] = _div(comp, sum(r.e2e_s or 0 for r in ok))
    row["ttft_s"] = _div(sum(r.ttft_s or 0 for r in ok), len(ok)) if ok else None
    row["accept_rate"] = row["accept_length"] = None
    row["accept_length_basis"] = None
    if not spec:
        return row
    steps = sum(r.verify_steps or 0 for r in spec)
    row["verify_steps"] = steps
    # drafted nothing: an n-gram proposer with no match in the prompt; no rate, length or position
    # numbers (vLLM's response says length 1.0 there, which would read as "every draft rejected")
    row["no_drafts"] = all(r.draft_tokens == 0 or (r.draft_tokens is None and r.verify_steps == 0) for r in spec)
    if row["no_drafts"]:
        row["draft_tokens"] = 0
        return row
    if all(r.draft_tokens is not None for r in spec):
        row["accepted_tokens"] = sum(r.accepted_tokens or 0 for r in spec)
        row["draft_tokens"] = sum(r.draft_tokens or 0 for r in spec)
        row["accept_rate"] = _div(row["accepted_tokens"], row["draft_tokens"])
    elif all(r.reported_accept_rate is not None and r.verify_steps for r in spec):
        # per-request rates weighted by verify steps: equals pooled accepted/drafted when every
        # step drafts the same number of tokens (a fixed block size)
        row["accept_rate"] = _div(sum((r.reported_accept_rate or 0.0) * (r.verify_steps or 0) for r in spec), steps)
    if engine == "vllm":
        row["accept_length"] = 1 + row["accepted_tokens"] / steps if steps else None
        row["accept_length_basis"] = "1 + accepted / drafts"
    elif steps and all(r.verify_steps for r in spec):
        row["accept_length"] = sum(r.completion_tokens or 0 for r in spec) / steps
        row["accept_length_basis"] = "completion_tokens / spec_verify_ct"
    elif all(r.reported_accept_length is not None for r in spec):
        row["accept_length"] = sum(r.reported_accept_length or 0.0 for r in spec) / len(spec)
        row["accept_length_basis"] = "mean of spec_accept_length"
    if steps and all(r.accepted_per_pos is not None for r in spec):
        width = max(len(r.accepted_per_pos or []) for r in spec)
        counts = [sum((r.accepted_per_pos or [])[k] if k < len(r.accepted_per_pos or []) else 0 for r in spec)
                  for k in range(width)]
        row["accept_pos"] = [c / steps for c in counts]
        for k, rate in enumerate(row["accept_pos"][:POSITIONS], start=1):
            row[f"accept_pos{k}"] = rate
    return row


def mean_over_classes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The recipe's headline: the unweighted mean over classes ("0.39 mean across seven prompt
    classes"), each class counting once whatever its length; None when no class has the metric."""
    out: dict[str, Any] = {"class": "mean", "label": "mean over classes", "classes": len(rows)}
    drafted = [r for r in rows if not r.get("no_drafts")]
    out["no_drafts"] = bool(rows) and not drafted
    for key in ("tok_s", "accept_rate", "accept_length", *(f"accept_pos{k}" for k in range(1, POSITIONS + 1))):
        # a class with no drafts has no acceptance to average: the mean is over the classes that drafted
        among = rows if key == "tok_s" else drafted
        vals = [r[key] for r in among if r.get(key) is not None]
        out[key] = sum(vals) / len(vals) if vals and len(vals) == len(among) else None
    return out


def probe(client: Client, engine: str, classes: list[PromptClass], *, prompts_per_class: int | None = None,
          max_tokens_scale: float = DEFAULTS.max_tokens_scale, template: str = DEFAULTS.template,
          users: int = DEFAULTS.users, stop_if_not_speculative: bool = True,
          on_record: Callable[[AcceptRecord], None] | None = None) -> dict[str, Any]:
    """Measure every class. One request at a time (`users` 1): with `stop_if_not_speculative`, a
    first response showing no speculation ends the probe (the rest would only confirm it). With
    `users` > 1 the first request runs alone (it says whether the numbers are per request), then
    every other request with `users` in flight; vLLM without per-request numbers is refused
    (`LoadNeedsPerRequest`)."""
    model = served_model(client) if engine == "vllm" else None
    jobs = [(pc.name, i, messages, max(1, int(round(pc.max_tokens * max_tokens_scale))))
            for pc in classes for i, messages in enumerate(pc.prompts[:prompts_per_class])]
    records: list[AcceptRecord] = []
    per_request = engine != "vllm"     # SGLang's meta_info is per request; vLLM: known after one answer

    def one(job: tuple[str, int, list[dict[str, str]], int]) -> AcceptRecord:
        name, i, messages, max_tokens = job
        if engine == "vllm":
            return measure_vllm(client, name, i, messages, max_tokens, model=model, counters=not per_request)
        return measure_sglang(client, name, i, messages, max_tokens, template=template)

    def keep(rec: AcceptRecord) -> None:
        records.append(rec)
        if on_record:
            on_record(rec)

    for n, job in enumerate(jobs):
        if users > 1 and n > 0:
            break
        rec = one(job)
        keep(rec)
        per_request = per_request or rec.source == SOURCE_VLLM_RESPONSE
        if stop_if_not_speculative and rec.error is None and rec.speculative is False:
            return probe_result(engine, classes, records, template, users)
    if users > 1 and len(jobs) > 1:
        if not per_request:
            raise LoadNeedsPerRequest(
                f"acceptance at {users} users: vLLM's /metrics spec_decode counters are one sum over every request "
                "in flight, so under load they cannot tell the prompt classes apart; start vLLM with "
                "--per-request-spec-decode-metrics summary (each response then carries its own numbers), "
                "or measure with users 1")
        with ThreadPoolExecutor(max_workers=users) as pool:
            for rec in pool.map(one, jobs[1:]):
                keep(rec)
    return probe_result(engine, classes, records, template, users)


def probe_result(engine: str, classes: list[PromptClass], records: list[AcceptRecord],
                 template: str = DEFAULTS.template, users: int = DEFAULTS.users) -> dict[str, Any]:
    """The result of the records measured (all of them, or those that ended before a Ctrl-C): one
    row per class that has records, in the classes' order."""
    rows = []
    for pc in classes:
        class_records = [r for r in records if r.class_name == pc.name]
        if not class_records:
            continue
        row = summarize_class(pc.name, class_records, engine)
        row["label"] = pc.label
        row["recipe"] = pc.recipe
        rows.append(row)
    speculative = any(r.speculative for r in records) if any(r.error is None for r in records) else None
    sources = sorted({r.source for r in records if r.error is None}) or [SOURCE_VLLM if engine == "vllm" else SOURCE_SGLANG]
    return {"engine": engine, "source": "; ".join(sources), "users": users, "mean": mean_over_classes(rows),
            "prompt_format": ("server chat template (/v1/chat/completions)" if engine == "vllm"
                              else f"client-side {template!r} chat template, text to /generate"),
            "speculative": speculative, "classes": rows, "records": [asdict(r) for r in records]}
