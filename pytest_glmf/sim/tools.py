"""Tool calls: which calls the simulated model makes, their markup, and the parsers.

The call rule (deterministic; a harness can rely on it). With `tools` offered and
`tool_choice` not "none":
  1. the last message is a tool result (`role: tool`)        -> no call: a plain answer;
  2. `tool_choice: {"type": "function", "function": {"name": X}}` -> call X;
  3. otherwise the last user message is matched against each offered tool, a user's own tools
     as much as the packaged ones:
     a. its name: the tool's exact name, or a part of it (minus generic verbs: get, set, create,
        send, list, ...) or a synonym of one (SYNONYMS below, e.g. "book"/"schedule"/"meeting"
        for calendar/event, "mail" for email), as a whole word, case-insensitive;
     b. else its description and parameter names: at least two different words of them in the
        message (plurals folded: "prices" is "price"; common English words, generic verbs and
        generic parameter names such as query, text, id, title are not counted).
     Tools are called in the order their first matching word appears. No match: no call (the
     model answers with text), unless `tool_choice: "required"` (then the first tool offered).
  Arguments: an explicit JSON object right after the tool's name in the message
  (`get_weather {"city": "Oslo"}`, several allowed) is used as is. Otherwise they are built from the
  tool's JSON schema and the message: enums matched by word prefix ("cooling" -> "cool"), emails,
  `Name Surname (email)` pairs, ISO dates with times, numbers within the schema's bounds,
  `<param> <value>` / `<param>: 'quoted'` phrases, `body:` / `text:` tails, labels lists
  ("labels a and b"); required values with nothing to match get schema-valid defaults. A tool whose
  first required parameter is a place (city, location, place) is called once per capitalized
  name after "in" ("in Tokyo and in Oslo" -> two calls).
Markup (GLM-4.5 `glm45`/`glm`: newlines; GLM-4.7 `glm47`: none; Hermes/Qwen2.5: JSON):
    <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>
    <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>
    <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
The matching parser turns the markup into `tool_calls`. Without `--tool-call-parser`, or for the
`--tool-leak-rate` share of turns, the markup stays in `content` (finish_reason "stop"). The
`tool-empty-args` fault drops the opening `<arg_value>` (vllm#49248), and the GLM parsers then
return `arguments: "{}"` like the real regex does.
"""
from __future__ import annotations

import json
import re
from typing import Any

from pytest_glmf.sim.tokenizer import content_text

GENERIC = {"get", "set", "create", "send", "list", "fetch", "make", "do", "run", "update", "delete", "add", "remove",
           "current", "tool", "new", "by", "for", "of", "the", "a", "to", "info", "data", "open", "read", "write"}
SYNONYMS = {"calendar": ["book", "schedule", "meeting", "appointment"], "event": ["book", "schedule", "meeting"],
            "email": ["mail", "e-mail"], "time": ["clock"], "thermostat": ["heating", "cooling"],
            "ticket": ["issue"], "search": ["look up", "google"], "weather": ["forecast"]}
# Words a description or a parameter name shares with ordinary requests: never evidence of intent.
STOPWORDS = {"a", "an", "and", "or", "the", "of", "to", "in", "on", "at", "for", "by", "with", "from", "into",
             "is", "are", "be", "it", "its", "this", "that", "as", "what", "which", "who", "how", "when",
             "where", "your", "you", "my", "me", "we", "our", "all", "any", "some", "no", "not", "can", "will",
             "one", "e", "g", "eg", "etc", "given", "take", "argument", "return", "result", "user", "tool",
             "function", "call", "use"}
GENERIC_PARAMS = {"id", "name", "text", "body", "content", "message", "query", "q", "title", "value", "type",
                  "data", "input", "to", "from", "limit", "max", "min", "mode", "unit", "format", "options",
                  "result", "results", "count", "number", "description", "subject"}
PLACE_PARAMS = {"city", "location", "place", "town"}
TAIL_PARAMS = {"body", "text", "content", "message"}
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PLACE = re.compile(r"\bin ([A-Z][\w'-]*(?: [A-Z][\w'-]*)*)")
_PERSON_EMAIL = re.compile(r"([A-Z][\w'-]+(?: [A-Z][\w'-]+)*) \(([^)\s]+@[^)\s]+)\)")
_NUMBER = re.compile(r"(?<![\w.:-])(-?\d+(?:\.\d+)?)(?![\w.:]*\d)")
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b(?:.*?\b(\d{1,2}:\d{2})\b)?")
_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")

PARSERS = {"glm": "glm45", "glm45": "glm45", "glm47": "glm47", "hermes": "hermes", "qwen25": "hermes"}


def _fn(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool)


def keywords(name: str) -> list[str]:
    parts = [p for p in re.split(r"[_\-\s]+", name.lower()) if p and p not in GENERIC]
    out = [name.lower()] + parts
    for p in parts:
        out += SYNONYMS.get(p, [])
    return out


def _stem(word: str) -> str:
    """Plurals folded to the singular (prices -> price, cities -> city), nothing cleverer."""
    w = word.lower()
    for suffix, repl in (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("xes", "x"), ("s", "")):
        if w.endswith(suffix) and not w.endswith("ss") and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)] + repl
    return w


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def describing_words(fn: dict[str, Any]) -> set[str]:
    """The stems of a tool's description and parameter names that can show a message is about it."""
    params = ((fn.get("parameters") or {}).get("properties") or {})
    words = _words(fn.get("description") or "")
    for pname in params:
        if pname.lower() not in GENERIC_PARAMS:
            words += [w for w in _words(pname.replace("_", " ")) if w not in GENERIC_PARAMS]
    stems = {_stem(w) for w in words if len(w) >= 3}
    return {w for w in stems if w not in STOPWORDS and w not in GENERIC}


def _described_pos(text: str, fn: dict[str, Any]) -> int | None:
    """Where the first of at least two different describing words appears in `text`, else None."""
    wanted = describing_words(fn)
    hits: dict[str, int] = {}
    for m in re.finditer(r"[A-Za-z0-9]+", text):
        stem = _stem(m.group(0))
        if stem in wanted:
            hits.setdefault(stem, m.start())
    return min(hits.values()) if len(hits) >= 2 else None


def _match_pos(text: str, fn: dict[str, Any]) -> int | None:
    """Where the message first shows it wants this tool (rule 3 above), None when it does not."""
    by_name = _first_pos(text, keywords(fn.get("name", "")))
    return by_name if by_name is not None else _described_pos(text, fn)


def _first_pos(text: str, words: list[str]) -> int | None:
    best = None
    for w in words:
        m = re.search(r"(?<![\w-])" + re.escape(w) + r"(?![\w-])", text, re.IGNORECASE)
        if m and (best is None or m.start() < best):
            best = m.start()
    return best


def plan_calls(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               tool_choice: Any = "auto") -> list[tuple[str, dict[str, Any]]]:
    """The calls the model makes for this turn: [(name, arguments)], [] for a plain answer."""
    if not tools or tool_choice == "none" or not messages:
        return []
    last = messages[-1]
    if last.get("role") != "user":
        return []

    text = content_text(last.get("content"))
    by_name = {_fn(t).get("name", ""): _fn(t) for t in tools}
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
        chosen = [name] if name in by_name else []
    else:
        hits = sorted((pos, i, n) for i, (n, fn) in enumerate(by_name.items())
                      if (pos := _match_pos(text, fn)) is not None)
        chosen = [n for _, _, n in hits]
        if not chosen and tool_choice == "required":
            chosen = [next(iter(by_name))]
    calls: list[tuple[str, dict[str, Any]]] = []
    for name in chosen:
        calls += [(str(name), args) for args in arguments_for(by_name[name], text)]
    return calls


def _explicit_json(name: str, text: str) -> list[dict[str, Any]]:
    out = []
    dec = json.JSONDecoder()
    for m in re.finditer(re.escape(name) + r"\s*[(:]?\s*(?=\{)", text):
        try:
            obj, _ = dec.raw_decode(text, m.end())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def arguments_for(fn: dict[str, Any], text: str) -> list[dict[str, Any]]:
    explicit = _explicit_json(fn.get("name", ""), text)
    if explicit:
        return explicit
    schema = fn.get("parameters") or {}
    required = list(schema.get("required") or [])
    props = schema.get("properties") or {}
    first = required[0] if required else None
    if first in PLACE_PARAMS and (props.get(first) or {}).get("type", "string") == "string":
        places = list(dict.fromkeys(_PLACE.findall(text)))
        if places:
            return [_object_value(schema, text, {first: p}) for p in places]
    return [_object_value(schema, text, {})]


def _object_value(schema: dict[str, Any], text: str, fixed: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    required = set(schema.get("required") or [])
    for pname, ps in (schema.get("properties") or {}).items():
        if pname in fixed:
            out[pname] = fixed[pname]
            continue
        v = _value(pname, ps or {}, text, pname in required)
        if v is not None:
            out[pname] = v
    return out


def _num_ok(x: float, ps: dict[str, Any]) -> bool:
    if ps.get("type") == "integer" and x != int(x):
        return False
    lo, hi = ps.get("minimum"), ps.get("maximum")
    return (lo is None or x >= lo) and (hi is None or x <= hi)


def _value(pname: str, ps: dict[str, Any], text: str, required: bool) -> Any:
    t = ps.get("type", "string")
    if "enum" in ps:
        words = re.findall(r"[\w-]+", text.lower())
        for e in ps["enum"]:
            if any(w.startswith(str(e).lower()) for w in words):
                return e
        return ps["enum"][0] if required else None
    if t in ("integer", "number"):
        for m in _NUMBER.finditer(text):
            x = float(m.group(1))
            if _num_ok(x, ps):
                return int(x) if t == "integer" else x
        if not required:
            return None
        lo = ps.get("minimum", 1)
        return int(lo) if t == "integer" else float(lo)
    if t == "boolean":
        return False if required else None
    if t == "array":
        return _array_value(pname, ps, text, required)
    if t == "object":
        if not required:
            return None
        return _object_value(ps, text, {})
    return _string_value(pname, ps, text, required)


def _array_value(pname: str, ps: dict[str, Any], text: str, required: bool) -> list[Any] | None:
    items = ps.get("items") or {"type": "string"}
    n_min = max(1, int(ps.get("minItems", 1)))
    if items.get("type") == "object" and {"name", "email"} <= set(items.get("properties") or {}):
        pairs = _PERSON_EMAIL.findall(text)
        if pairs:
            return [{"name": n, "email": e} for n, e in pairs]
    if items.get("type", "string") == "string":
        if "email" in pname or pname in ("to", "cc", "recipients"):
            emails = _EMAIL.findall(text)
            if emails:
                return emails
        m = re.search(r"\b" + re.escape(pname) + r"\s+([\w.-]+(?:(?:,\s*|,?\s+and\s+)[\w.-]+)*)", text, re.IGNORECASE)
        if m:
            return [w for w in re.split(r",\s*|,?\s+and\s+", m.group(1)) if w]
    if not required:
        return None
    return [_value("item", items, "", True) for _ in range(n_min)]


def _string_value(pname: str, ps: dict[str, Any], text: str, required: bool) -> str | None:
    low = pname.lower()
    if "email" in low or low in ("to", "recipient"):
        emails = _EMAIL.findall(text)
        if emails:
            return emails[0]
    if low in TAIL_PARAMS:
        m = re.search(r"\b" + re.escape(pname) + r"\s*:\s*(.+)$", text, re.IGNORECASE | re.DOTALL)
        if m:
            return m.group(1).strip()
    if "start" in low or "date" in low or "time" in low:
        m = _DATE.search(text)
        if m:
            return m.group(1) + (f"T{int(m.group(2).split(':')[0]):02d}:{m.group(2).split(':')[1]}" if m.group(2) else "")
    m = re.search(r"\b" + re.escape(pname) + r"\w*\s*[:=]?\s*(?:'([^']+)'|\"([^\"]+)\"|([^\s,;]+))", text, re.IGNORECASE)
    if m:
        return (m.group(1) or m.group(2) or m.group(3).rstrip(".!?")).strip()
    if low in ("title", "subject", "name", "query", "q"):
        q = _QUOTED.search(text)
        if q:
            return q.group(1) or q.group(2)
    if not required:
        return None
    if low in ("query", "q", "title", "subject", "prompt"):
        return text.strip()[:200] or "example"
    return "example"


# ------------------------------------------------------------------------------------------
# markup

def _glm_value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def render_call(parser: str, name: str, args: dict[str, Any], empty_args_fault: bool = False) -> str:
    style = PARSERS.get(parser or "glm47", "glm47")
    if style == "hermes":
        body = {"name": name, "arguments": {} if empty_args_fault else args}
        return "<tool_call>\n" + json.dumps(body, ensure_ascii=False) + "\n</tool_call>"
    nl = "\n" if style == "glm45" else ""
    parts = [f"<tool_call>{name}{nl}"]
    for k, v in args.items():
        open_tag = "" if empty_args_fault else "<arg_value>"
        parts.append(f"<arg_key>{k}</arg_key>{nl}{open_tag}{_glm_value(v)}</arg_value>{nl}")
    parts.append("</tool_call>")
    return "".join(parts)


def render_calls(parser: str, calls: list[tuple[str, dict[str, Any]]], empty_args_fault: bool = False) -> str:
    sep = "\n" if PARSERS.get(parser or "glm47") in ("glm45", "hermes") else ""
    return sep.join(render_call(parser, n, a, empty_args_fault) for n, a in calls)


# ------------------------------------------------------------------------------------------
# parsers (the shapes of SGLang's Glm4MoeDetector / Glm47MoeDetector / HermesDetector)

_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_GLM_PAIR = re.compile(r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>", re.DOTALL)


def _param_types(tools: list[dict[str, Any]] | None, name: str) -> dict[str, str]:
    for t in tools or []:
        fn = _fn(t)
        if fn.get("name") == name:
            return {k: (v or {}).get("type", "string") for k, v in ((fn.get("parameters") or {}).get("properties") or {}).items()}
    return {}


def parse_one(parser: str, block: str, tools: list[dict[str, Any]] | None) -> tuple[str, str]:
    """(name, arguments JSON) from the text inside one <tool_call>...</tool_call>."""
    if PARSERS.get(parser) == "hermes":
        try:
            obj = json.loads(block.strip())
        except json.JSONDecodeError:
            return "", "{}"
        return str(obj.get("name", "")), json.dumps(obj.get("arguments") or {}, ensure_ascii=False)
    name = block.split("<arg_key>", 1)[0].strip()
    types = _param_types(tools, name)
    args: dict[str, Any] = {}
    for m in _GLM_PAIR.finditer(block):
        key, raw = m.group("key").strip(), m.group("value")
        if types.get(key, "string") == "string":
            args[key] = raw
        else:
            try:
                args[key] = json.loads(raw)
            except json.JSONDecodeError:
                args[key] = raw
    return name, json.dumps(args, ensure_ascii=False)


def parse_text(parser: str, text: str, tools: list[dict[str, Any]] | None) -> tuple[str, list[tuple[str, str]]]:
    """Non-streaming: (content outside the calls, [(name, arguments JSON)])."""
    calls = [parse_one(parser, m.group(1), tools) for m in _CALL_BLOCK.finditer(text)]
    content = _CALL_BLOCK.sub("", text).strip() if calls else text
    return content, calls


class ToolStream:
    """Streaming parser: feed decoded text, get ("content", text) and ("call", name, args) events.
    Text that could be the start of `<tool_call>` is held back until it is decided."""

    OPEN, CLOSE = "<tool_call>", "</tool_call>"

    def __init__(self, parser: str, tools: list[dict[str, Any]] | None):
        self.parser, self.tools = parser, tools
        self.buf = ""
        self.in_call = False

    def feed(self, text: str) -> list[tuple[str, ...]]:
        self.buf += text
        events: list[tuple[str, ...]] = []
        while True:
            if self.in_call:
                end = self.buf.find(self.CLOSE)
                if end < 0:
                    return events
                events.append(("call", *parse_one(self.parser, self.buf[:end], self.tools)))
                self.buf = self.buf[end + len(self.CLOSE):].lstrip("\n")
                self.in_call = False
                continue
            start = self.buf.find(self.OPEN)
            if start >= 0:
                if self.buf[:start].strip():
                    events.append(("content", self.buf[:start]))
                self.buf = self.buf[start + len(self.OPEN):]
                self.in_call = True
                continue
            keep = next((k for k in range(min(len(self.OPEN) - 1, len(self.buf)), 0, -1)
                         if self.OPEN.startswith(self.buf[-k:])), 0)
            emit = self.buf[:len(self.buf) - keep]
            if emit:
                events.append(("content", emit))
            self.buf = self.buf[len(emit):]
            return events

    def finish(self) -> list[tuple[str, ...]]:
        rest = (self.OPEN if self.in_call else "") + self.buf
        self.buf, self.in_call = "", False
        return [("content", rest)] if rest else []
