"""SGLang's native /generate: text or input_ids (one or a batch), sampling_params, log-probs.

The answer's shape is SGLang 0.5.23's (sglang/srt/managers/tokenizer_manager.py, where meta_info is
built): `id`, `finish_reason` (`{"type": "length", "length": N}` or `{"type": "stop", "matched":
id}`), `prompt_tokens`, `weight_version`, `num_retractions`, `reasoning_tokens`,
`completion_tokens`, `cached_tokens`, and once finished `e2e_latency`. With `return_logprob`:
`input_token_logprobs` from `logprob_start_len` (-1: none) whose first entry is null (its
predicting logits are not computed: sglang/srt/managers/scheduler_components/
logprob_result_processor.py `[None] + input_token_logprobs[:-1]`), `output_token_logprobs`,
`output_token_logprobs_length`, and with `top_logprobs_num > 0` `input_top_logprobs` /
`output_top_logprobs`; entries are `[logprob, token_id, text|null]`. Under speculative decoding,
on the finished answer only and only when `spec_verify_ct > 0` (tokenizer_manager.py
`_calculate_spec_decoding_metrics`): `spec_accept_rate` (correct / proposed drafts),
`spec_accept_length` (completion_tokens / spec_verify_ct), `spec_num_correct_drafts`,
`spec_num_proposed_drafts` (verify_ct x (draft tokens per step)), `spec_verify_ct`, and
`spec_correct_drafts_histogram` (index j: the steps that accepted exactly j drafts; grown to the
largest j seen, scheduler_components/batch_result_processor.py). Streaming
(`stream: true`) sends the cumulative text and meta_info per chunk, then `data: [DONE]`.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pytest_glmf.sim import timing
from pytest_glmf.sim.http import SSE, HTTPError, Receive, Scope, Send, read_json, send_json
from pytest_glmf.sim.logits import START, extend
from pytest_glmf.sim.streaming import TokenStream, run_to_end
from pytest_glmf.sim.tokenizer import EOS_ID, decode, encode, prompt_text_for_class, token_text

if TYPE_CHECKING:
    from pytest_glmf.sim.app import SimApp
    from pytest_glmf.sim.scheduler import SimRequest


def _triple(lp: float | None, tid: int, with_text: bool) -> list[Any]:
    return [lp, tid, token_text(tid) if with_text else None]


def _input_logprobs(app: "SimApp", ids: list[int], start: int, n_top: int, with_text: bool) -> tuple[list[Any], list[Any]]:
    tokens: list[Any] = []
    tops: list[Any] = []
    ctx = START
    faults = app.faults
    nonce = app.next_score_nonce() if faults.perturbs_scores() else 0
    for i, tid in enumerate(ids):
        if i >= start:
            if i == start:
                tokens.append(_triple(None, tid, with_text))
                tops.append(None)
            elif not faults.perturbs_scores():
                d = app.model.dist(ctx)
                tokens.append(_triple(d.logprob(tid), tid, with_text))
                tops.append([_triple(lp, t, with_text) for lp, t in d.top(n_top)] if n_top else None)
            else:   # faults.py logprob-noise / logprob-shift: one draw per (request, position, token)
                d = app.model.dist(ctx)
                lp = faults.scored_logprob(d.logprob(tid), nonce, i, tid, tid in d.ids)
                tokens.append(_triple(lp, tid, with_text))
                if n_top:
                    ranked = sorted(((faults.scored_logprob(v, nonce, i, t, t in d.ids), t)
                                     for v, t in d.top(n_top + len(d.ids))), reverse=True)[:n_top]
                    tops.append([_triple(v, t, with_text) for v, t in ranked])
                else:
                    tops.append(None)
        ctx = extend(ctx, tid)
    return tokens, tops


def _meta(app: "SimApp", r: "SimRequest", req: dict[str, Any]) -> dict[str, Any]:
    if r.finish_reason == "length":
        finish: Any = {"type": "length", "length": len(r.out_ids)}
    elif r.finish_reason == "stop":
        finish = {"type": "stop", "matched": r.matched_stop}
    elif r.finish_reason == "abort":
        finish = {"type": "abort", "message": "aborted"}
    else:
        finish = None
    meta: dict[str, Any] = {"id": r.rid, "finish_reason": finish, "prompt_tokens": len(r.prompt_ids),
                            "weight_version": "default", "num_retractions": 0}
    if req.get("return_logprob"):
        with_text = bool(req.get("return_text_in_logprobs"))
        n_top = int(req.get("top_logprobs_num") or 0)
        start = int(req.get("logprob_start_len", -1))
        if start < 0:
            inp: list[Any] = []
            inp_top: list[Any] = []
        else:
            inp, inp_top = _input_logprobs(app, r.prompt_ids, start, n_top, with_text)
        meta["input_token_logprobs"] = inp
        meta["output_token_logprobs"] = [_triple(lp, t, with_text) for lp, t in zip(r.out_logprobs, r.out_ids)]
        if n_top:
            meta["input_top_logprobs"] = inp_top
            meta["output_top_logprobs"] = [[_triple(lp, t, with_text) for lp, t in top] for top in r.out_top]
        meta["output_token_logprobs_length"] = len(meta["output_token_logprobs"])
    cached = r.cached_tokens
    meta.update(reasoning_tokens=0, completion_tokens=len(r.out_ids), cached_tokens=cached,
                cached_tokens_details={"device": cached, "host": 0} if cached else None, dp_rank=None,
                weight_versions=weight_versions(r))
    meta.update(_times(r))
    if r.done:
        meta["e2e_latency"] = (r.t_done or time.perf_counter()) - r.t_arrival
        if app.cfg.spec is not None and r.spec_verify_ct > 0:
            meta.update(spec_accept_rate=r.spec_accepted / r.spec_drafted if r.spec_drafted else 0.0,
                        spec_accept_length=len(r.out_ids) / r.spec_verify_ct,
                        spec_num_correct_drafts=r.spec_accepted, spec_num_proposed_drafts=r.spec_drafted,
                        spec_verify_ct=r.spec_verify_ct)
            if r.spec_correct_drafts_histogram:
                meta["spec_correct_drafts_histogram"] = list(r.spec_correct_drafts_histogram)
    return meta


def weight_versions(r: "SimRequest") -> list[dict[str, Any]]:
    """One span: every output token came from the one weight version ("default")."""
    return [{"version": "default", "start": 0, "end": len(r.out_ids)}]


def _times(r: "SimRequest") -> dict[str, float]:
    """SGLang 0.5.23's per-request timing keys (observability/req_time_stats.py
    convert_to_output_meta_info, and the scheduler's stats): wall-clock stamps and seconds;
    first_token_latency once there is a first token, decode_throughput once a token was decoded
    after it. The simulator has no API server hop and no storage prefetch: the arrival, and 0."""
    now = time.perf_counter()
    wall = time.time() - now          # perf_counter -> epoch seconds
    first, done = r.t_first, r.t_done or now
    out = {"request_received_ts": wall + r.t_arrival, "api_server_dispatch_finish_ts": wall + r.t_arrival,
           "queue_time": 0.0, "forward_entry_time": wall + r.t_arrival,
           "request_finished_ts": wall + done, "response_sent_to_client_ts": wall + done,
           "storage_prefetch_wait": 0.0, "storage_staging_wait": 0.0}
    if first is not None:
        out["prefill_finished_time"] = wall + first
        out["first_token_latency"] = first - r.t_arrival
        if len(r.out_ids) > 1 and done > first:
            out["decode_throughput"] = (len(r.out_ids) - 1) / (done - first)
    return out


def _one_request(app: "SimApp", req: dict[str, Any], ids: list[int] | None, text: str | None) -> SimRequest:
    if ids is None:
        if text is None:
            raise HTTPError(400, "Either text or input_ids should be provided.")
        ids = encode(text)
    sp = req.get("sampling_params") or {}
    max_new = app.check_prompt(ids, int(sp.get("max_new_tokens", 128)))
    want_lp = bool(req.get("return_logprob"))
    r = app.new_request(
        ids, max_new, cls=timing.classify(prompt_text_for_class(ids)),
        temperature=float(sp.get("temperature", 1.0)), min_new_tokens=int(sp.get("min_new_tokens", 0)),
        ignore_eos=bool(sp.get("ignore_eos", False)),
        stop_token_ids=tuple(int(t) for t in (sp.get("stop_token_ids") or [])),
        want_logprobs=want_lp, top_n=int(req.get("top_logprobs_num") or 0) if want_lp else 0,
        sample_seed=sp.get("sampling_seed"))
    if app.faults.no_tokens:
        r.max_new_tokens = 0
    return r


def _result(app: "SimApp", r: "SimRequest", req: dict[str, Any]) -> dict[str, Any]:
    ids = [t for t in r.out_ids if t != EOS_ID]
    return {"text": decode(ids), "output_ids": list(r.out_ids), "meta_info": _meta(app, r, req)}


async def generate(app: "SimApp", scope: Scope, receive: Receive, send: Send) -> None:
    req = await read_json(receive)
    ids, text = req.get("input_ids"), req.get("text")
    batch = (isinstance(ids, list) and ids and isinstance(ids[0], list)) or isinstance(text, list)
    app.admit_generation()
    assert app.scheduler is not None
    if batch:
        items = ids if ids is not None else [None] * len(text or [])
        texts = text if isinstance(text, list) else [None] * len(items)
        rs = [_one_request(app, req, i, t) for i, t in zip(items, texts)]
        await run_to_end(app.scheduler, rs, receive)
        await send_json(send, [_result(app, r, req) for r in rs])
        return
    r = _one_request(app, req, ids, text)
    if not req.get("stream"):
        await run_to_end(app.scheduler, [r], receive)
        await send_json(send, _result(app, r, req))
        return
    sse = SSE(send, cut_after=app.faults.stream_cut)
    async with TokenStream(app.scheduler, r, receive) as tokens:
        await sse.start()
        async for _ in tokens:
            await sse.data(_result(app, r, req))
        await sse.done()
