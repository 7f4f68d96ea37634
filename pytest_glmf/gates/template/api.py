"""The template gate's public API: render a fixed set of conversations through the server's own
serving path into prompt token ids and compare them with a reference, token for token.

    from pytest_glmf.gates.template import assert_template, measure_template, record_reference

    ref = record_reference("http://known-good:30000")            # or local_reference(model_dir, python=PY)
    result = measure_template("http://candidate:30000", ref)
    assert_template(result)                                      # inside a test: every conversation equal

Why (issue 23): teacher-forced scoring through /generate sends token ids, so it never meets the
chat template, the tokenizer or the stop handling; an image whose template drops the system
prompt or the tools block, doubles BOS or flips the reasoning default passes the drift gate and
breaks every user. A difference fails with the decoded text of both sides around the first
differing token.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.engine.httperror import request_failure
from pytest_glmf.engine.introspect import served_model
from pytest_glmf.gates.bounds import bounds_or_default, lane_phrase
from pytest_glmf.gates.template.compare import Difference, around, first_difference
from pytest_glmf.gates.template.conversations import Conversation, conversations_hash, load_conversations
from pytest_glmf.gates.template.reference import check_reference, load_reference
from pytest_glmf.gates.template.served import TemplateError, served_prompt_ids, token_pieces
from pytest_glmf.gates.template.spec import DEFAULT_BOUNDS, DEFAULTS
from pytest_glmf.gates.template.special import KNOBS, default_change
from pytest_glmf.gates.template.table import difference_table, render_summary
from pytest_glmf.gates.verdict import checks_from_bounds, failed_checks, failure_message

HINTS = {
    "mismatched": "the served chat template or tokenizer changed: compare the image's chat template "
                  "(tokenizer_config.json / --chat-template), its BOS handling and default template kwargs",
    "matched_fraction": "the served chat template or tokenizer changed",
    "changed_defaults": "the server's default skip_special_tokens (output text) differs from the reference's: "
                        "special tokens now appear in (or vanish from) chat and completion text; set it with "
                        f"{KNOBS} or skip_special_tokens in the model's generation_config.json",
    "failed_requests": "the server refused to render a conversation (a tools block, a tool turn, or "
                       "chat_template_kwargs it does not take)",
}
DEFAULT_SOURCE = "default: every conversation renders exactly as the reference"


@dataclass
class TemplateResult:
    """Every conversation rendered by the server, against the reference."""

    conversations: int
    matched: int
    mismatched: int
    matched_fraction: float | None
    failed_requests: int
    served_ids: str
    reference_source: str                                           # how the reference was made, in words
    differences: dict[str, dict[str, Any]] = field(default_factory=dict)   # id -> Difference.to_dict()
    errors: dict[str, str] = field(default_factory=dict)            # id -> why the server did not render it
    skip_special_tokens_default: dict[str, Any] | None = None       # the candidate's: {"value", "from"}, None: unknown
    reference_skip_special_tokens_default: dict[str, Any] | None = None   # the reference's, the same
    lane: str | None = None                                         # set by the glmf_template fixture

    def summary(self) -> dict[str, Any]:
        """The JSON the result file keeps (and `glmf template check --json` writes)."""
        return {"conversations": self.conversations, "matched": self.matched, "mismatched": self.mismatched,
                "matched_fraction": self.matched_fraction, "failed_requests": self.failed_requests,
                "served_ids": self.served_ids, "reference_source": self.reference_source,
                "differences": dict(self.differences), "errors": dict(self.errors),
                "skip_special_tokens_default": self.skip_special_tokens_default,
                "reference_skip_special_tokens_default": self.reference_skip_special_tokens_default,
                "changed_defaults": len(self.default_changes), "default_changes": self.default_changes}

    @property
    def default_changes(self) -> list[dict[str, Any]]:
        change = default_change(self.reference_skip_special_tokens_default, self.skip_special_tokens_default)
        return [change] if change else []

    def table(self) -> str:
        return render_summary(self.summary())


def describe_source(source: Mapping[str, Any]) -> str:
    kind = source.get("kind")
    if kind == "server":
        return f"stored run of {source.get('url')} ({source.get('model')}, via {source.get('served_ids')})"
    if kind == "transformers":
        return f"transformers {source.get('transformers')} on {source.get('model_dir')}"
    if kind == "simulator":
        return "the simulator's own template"
    return str(kind)


def measure_template(url: str, reference: Mapping[str, Any] | str | Path,
                     conversations: list[Conversation] | str | Path | None = None, *,
                     served_ids: str = DEFAULTS.served_ids, context_tokens: int = DEFAULTS.context_tokens,
                     model: str | None = None, timeouts: Mapping[str, float] | None = None,
                     skip_special_tokens_default: Mapping[str, Any] | None = None,
                     on_conversation: Callable[[TemplateResult], None] | None = None) -> TemplateResult:
    """Render every conversation on the server at `url` (`served_ids`: tokenize | chat) and compare
    its prompt ids with `reference` (a dict or a file from `glmf template reference`).
    `skip_special_tokens_default`: the server's default for output text (`{"value", "from"}`,
    special.skip_special_default; None: unknown), compared with the one the reference recorded.
    `on_conversation` gets the result of the conversations done so far after each one."""

    ref = load_reference(reference) if isinstance(reference, (str, Path)) else dict(reference)
    check_reference(ref, "template reference")
    convs = list(conversations) if isinstance(conversations, list) else load_conversations(conversations)
    if ref.get("conversations_sha256") != conversations_hash(convs):
        raise ConfigError(f"template reference ({describe_source(ref.get('source') or {})}) was made from another "
                          f"conversation set than the one measured ({len(ref['conversations'])} vs {len(convs)} "
                          f"conversations): make the reference from the same conversations")
    by_id = {c["id"]: c for c in ref["conversations"]}
    known = {k: v for k, v in (timeouts or {}).items() if k in Timeouts.__dataclass_fields__}
    differences: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}

    def result(n: int) -> TemplateResult:      # of the first n conversations
        matched = n - len(differences) - len(errors)
        return TemplateResult(n, matched, len(differences), matched / n if n else None, len(errors), served_ids,
                              describe_source(ref.get("source") or {}), dict(differences), dict(errors),
                              dict(skip_special_tokens_default) if skip_special_tokens_default else None,
                              ref.get("skip_special_tokens_default"))

    with Client(url, Timeouts(**known)) as client:
        model = model or served_model(client)
        for done, c in enumerate(convs, 1):
            compare_one(client, c, by_id[c.id], served_ids, model, context_tokens, differences, errors)
            if on_conversation is not None:
                on_conversation(result(done))
    return result(len(convs))


def compare_one(client: Client, c: Conversation, want: Mapping[str, Any], served_ids: str, model: str | None,
                context_tokens: int, differences: dict[str, dict[str, Any]], errors: dict[str, str]) -> None:
    """One conversation's served prompt ids against the reference's: its difference or its error
    added to `differences` / `errors` (nothing when they match)."""
    try:
        got = served_prompt_ids(client, c, served_ids, model)
    except (httpx.HTTPError, TemplateError) as exc:
        errors[c.id] = (request_failure(exc) or ("server", str(exc)))[1]
        return
    at = first_difference(want["ids"], got)
    if at is None:
        return
    lo, hi = max(0, at - context_tokens), min(len(got), at + context_tokens + 1)
    served_pieces = [""] * len(got)
    served_pieces[lo:hi] = token_pieces(client, got[lo:hi], model)
    differences[c.id] = Difference(
        at, want["ids"][at] if at < len(want["ids"]) else None, got[at] if at < len(got) else None,
        around(want["pieces"], at, context_tokens), around(served_pieces, at, context_tokens),
        len(want["ids"]), len(got)).to_dict()


def assert_template(result: TemplateResult, *, source: str | None = None, lane: Any = None, **bounds: Any) -> None:
    """Fail the test unless the conversations meet `bounds` (mismatched, matched_fraction,
    failed_requests, changed_defaults: {"min": x} and/or {"max": y}); without bounds: every
    conversation renders exactly as the reference, none refused, no output default changed. The failure is the gate's table, then one row per
    differing conversation with the text of both sides around the first differing token."""
    __tracebackhide__ = True

    lane = lane if lane is not None else result.lane
    bounds, source = bounds_or_default("template", bounds, "assert_template", DEFAULT_BOUNDS, DEFAULT_SOURCE,
                                       source)
    if not result.conversations:
        pytest.fail("template gate: no conversation was rendered", pytrace=False)
    summary = result.summary()
    checks = checks_from_bounds("template", summary, bounds, source=source, hints=HINTS)
    for check in checks:
        if check.metric == "failed_requests":
            check.cause = "server"
    title = (f"template gate{lane_phrase(lane)}: {result.matched}/{result.conversations} conversations render to "
             f"the reference's prompt ids (reference: {result.reference_source})")
    failed = failed_checks(checks)
    if failed:
        pytest.fail(failure_message(failed, title, difference_table(summary)), pytrace=False)
