"""A small deterministic tokenizer and the GLM-style chat template applied server-side.

Vocabulary (ids are frozen; every endpoint uses these same ids):
  0..31      special tokens (`<|endoftext|>` = 0 is EOS, `[gMASK]`, `<sop>`, `<|system|>`, `<|user|>`,
             `<|assistant|>`, `<|observation|>`, `<think>`, `</think>`, `<tool_call>`, ...)
  32..287    the 256 bytes (any text round-trips, including unicode)
  288..      multi-character pieces: common punctuation runs, letter bigrams (`ab`, ` ab`, `Ab`,
             ` Ab`), and the words of `_vocab_words.py` in four forms (`w`, ` w`, `W`, ` W`)
Encoding is greedy longest match (pieces up to 17 characters), special-token strings map to their
ids, and anything else falls back to bytes, so `decode(encode(s)) == s` for every string.
English prose comes out near 1.3 tokens per word.
"""
from __future__ import annotations

import codecs
import json
import re
import string
from functools import lru_cache
from typing import Any

from pytest_glmf.sim._vocab_words import WORDS

SPECIALS = ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
            "<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
            "</arg_value>", "<tool_response>", "</tool_response>"]
SPECIALS += [f"<|reserved_{i}|>" for i in range(len(SPECIALS), 32)]
EOS_ID = 0
BYTE_BASE = 32
MAX_PIECE_CHARS = 17
PUNCT_PIECES = ["\n\n", "  ", "    ", ". ", ", ", "```", "**", "->", "==", "!=", "<=", ">=", "://", "...", "--",
                ": ", "; ", "(\"", "\")", "\"\n", ".\n", ",\n", "\n-", "\n#", "##", "###", " =", " (", " -", " \"",
                "\":", "\": \"", "\", \"", "{\"", "\"}", "[]", "{}", "()", "):", " {", " }", "\n    "]


def _build_vocab() -> tuple[list[bytes], dict[str, int]]:
    pieces: list[bytes] = [s.encode() for s in SPECIALS] + [bytes([b]) for b in range(256)]
    by_text: dict[str, int] = {}
    multi: list[str] = list(PUNCT_PIECES)
    for a in string.ascii_lowercase:
        for b in string.ascii_lowercase:
            bg = a + b
            multi += [bg, " " + bg, bg.capitalize(), " " + bg.capitalize()]
    for w in WORDS.split():
        multi += [w, " " + w, w.capitalize(), " " + w.capitalize()]
    for text in multi:
        if text not in by_text and len(text) > 1:
            by_text[text] = len(pieces)
            pieces.append(text.encode())
    return pieces, by_text


PIECES, _BY_TEXT = _build_vocab()
VOCAB_SIZE = len(PIECES)
SPECIAL_IDS = {s: i for i, s in enumerate(SPECIALS)}
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS[:17]) + ")")
# Ids the logit model draws ordinary text from: words with a leading space first (the frequent
# ones), then a little punctuation, so greedy text reads like (meaningless) English.
CONTENT_IDS = [_BY_TEXT[" " + w] for w in WORDS.split()] + [_BY_TEXT[p] for p in (". ", ", ", ".\n", "\n\n")]


def special(name: str) -> int:
    return SPECIAL_IDS[name]


def _trie_pattern(words: list[str]) -> str:
    """A regex that matches the longest of `words` at a position: the words as a trie of nested
    groups, each node trying its children before ending there, so the regex engine (in C) does the
    greedy longest match that a Python loop over candidate lengths did ~5x slower."""
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        return "(?:" + "|".join(alts) + (")?" if "" in node else ")")

    return emit(trie)


@lru_cache(maxsize=1)
def _piece_re() -> re.Pattern[str]:
    # every multi-character piece, longest first; a character no piece starts with matches alone
    # (single characters are always byte tokens)
    return re.compile("(?:" + _trie_pattern(list(_BY_TEXT)) + ")|(?s:.)")


def _encode_plain(text: str, out: list[int]) -> None:
    """Greedy longest match over the pieces; what no piece covers falls back to its UTF-8 bytes."""
    toks = _piece_re().findall(text)
    ids = list(map(_BY_TEXT.get, toks))
    if None not in ids:
        out.extend(ids)     # type: ignore[arg-type]
        return
    for piece, tid in zip(toks, ids):
        if tid is None:
            out.extend(BYTE_BASE + b for b in piece.encode("utf-8"))
        else:
            out.append(tid)


@lru_cache(maxsize=4096)
def _encode_cached(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in _SPECIAL_RE.split(text):
        if not part:
            continue
        if part in SPECIAL_IDS:
            out.append(SPECIAL_IDS[part])
        else:
            _encode_plain(part, out)
    return tuple(out)


def encode(text: str) -> list[int]:
    return list(_encode_cached(text))


def decode(ids: list[int] | tuple[int, ...]) -> str:
    return b"".join(PIECES[i] for i in ids if 0 <= i < VOCAB_SIZE).decode("utf-8", errors="replace")


def prompt_text_for_class(prompt_ids: list[int]) -> str:
    """The prompt's tail as text, for the simulator's prompt-class guess (timing.classify)."""
    return decode(prompt_ids[-1500:])


def token_text(tid: int) -> str:
    return PIECES[tid].decode("utf-8", errors="replace") if 0 <= tid < VOCAB_SIZE else ""


def token_bytes(tid: int) -> list[int]:
    return list(PIECES[tid]) if 0 <= tid < VOCAB_SIZE else []


class StreamDecoder:
    """Incremental detokenizer: byte tokens of one character may arrive in different steps."""

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, ids: list[int]) -> str:
        return self._dec.decode(b"".join(PIECES[i] for i in ids if 0 <= i < VOCAB_SIZE))

    def flush(self) -> str:
        return self._dec.decode(b"", final=True)


# ------------------------------------------------------------------------------------------
# Chat template (GLM-4.5 shape)

def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return str(content)


def tools_block(tools: list[dict[str, Any]]) -> str:
    lines = ["", "# Tools", "", "You may call one or more functions to assist with the user query.", "",
             "You are provided with function signatures within <tools></tools> XML tags:", "<tools>"]
    lines += [json.dumps(t.get("function", t), ensure_ascii=False) for t in tools]
    lines += ["</tools>", ""]
    return "\n".join(lines)


# Template changes the simulator can serve (`--fault template=NAME`), each a way an image upgrade
# breaks every user while teacher-forced scoring stays untouched (the template gate's known truths).
TEMPLATE_CHANGES = ("drop-system", "double-bos", "drop-tools", "thinking-off")


def apply_chat_template(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                        render_call: Any = None, *, enable_thinking: bool | None = None,
                        change: str | None = None) -> list[int]:
    """Token ids of the conversation plus the generation prompt (`<|assistant|>`).

    `render_call(name, arguments_dict) -> str` renders an assistant message's earlier tool calls
    in the active parser's markup (tools.render_call); None renders them as JSON.
    `enable_thinking` is the `chat_template_kwargs` switch (GLM-4.5's template: reasoning is on
    unless it is False, which closes an empty `<think></think>` after the generation prompt).
    `change` (one of TEMPLATE_CHANGES) serves a broken template: the system prompt dropped, BOS
    doubled, the tools block dropped, or reasoning off when the request does not say."""
    if change is not None and change not in TEMPLATE_CHANGES:
        raise ValueError(f"template change {change!r}: use one of {', '.join(TEMPLATE_CHANGES)}")
    ids = [special("[gMASK]"), special("<sop>")]
    if change == "double-bos":
        ids.insert(0, special("[gMASK]"))
    msgs = list(messages)
    system_parts: list[str] = []
    if msgs and msgs[0].get("role") in ("system", "developer"):
        system = content_text(msgs.pop(0).get("content"))
        if change != "drop-system":
            system_parts.append(system)
    if tools and change != "drop-tools":
        system_parts.append(tools_block(tools))
    if system_parts:
        ids.append(special("<|system|>"))
        ids += encode("\n" + "\n".join(system_parts))
    for m in msgs:
        role = m.get("role")
        text = content_text(m.get("content"))
        if role == "user":
            ids.append(special("<|user|>"))
            ids += encode("\n" + text)
        elif role in ("system", "developer"):
            ids.append(special("<|system|>"))
            ids += encode("\n" + text)
        elif role == "assistant":
            ids.append(special("<|assistant|>"))
            ids += encode("\n" + text)
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                raw = fn.get("arguments") or "{}"
                try:
                    args = json.loads(raw) if isinstance(raw, str) else raw
                except json.JSONDecodeError:
                    args = {}
                markup = render_call(fn.get("name", ""), args) if render_call else json.dumps(
                    {"name": fn.get("name", ""), "arguments": args}, ensure_ascii=False)
                ids += encode(markup)
        elif role == "tool":
            ids.append(special("<|observation|>"))
            ids += encode("\n") + [special("<tool_response>")] + encode(text) + [special("</tool_response>")]
        else:
            ids.append(special("<|user|>"))
            ids += encode("\n" + text)
    ids.append(special("<|assistant|>"))
    if enable_thinking is None and change == "thinking-off":
        enable_thinking = False
    if enable_thinking is False:
        ids += encode("\n") + [special("<think>"), special("</think>")]
    return ids
