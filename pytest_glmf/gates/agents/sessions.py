"""What agents send: sessions of turns, written out in YAML or generated from a template.

    # sessions.yaml, either written out ...
    sessions:
      - name: support
        system: You are the support agent of ...
        turns:
          - {user: "My order 1234 has not arrived.", max_tokens: 128}
          - {tool_result: '{"status": "in transit"}', think_time_s: 2.0}
          - {user: "Thanks. Can I change the address?"}
    # ... or generated: N sessions of T turns, each turn's text ~K tokens
    template:
      sessions: 8
      turns: 4
      system_tokens: 600        # the agent's instructions, shared by every session
      user_tokens: 120          # each new user message or tool result
      max_tokens: 64
      think_time_s: 1.0         # between an answer and the next turn
      tool_every: 2             # every 2nd turn is a tool result fed back (0: none)

A turn is a user message or a tool result; before it the client waits `think_time_s` after the
previous answer (the agent's, or its user's, think time), then sends the whole conversation so
far: the system message, every earlier turn and every answer. Generated text is words from a
fixed list, seeded per session; `tokens_per_word` (measured on the server's own /tokenize by
measure_agents, else 1.0) turns the template's token lengths into word counts, and the server's
own prompt_tokens is what the results report. Read by the strict loader (config/yamlfile.py): an
unknown key, a wrong type or a value out of range is a ConfigError naming file and key.
"""
from __future__ import annotations

import dataclasses
import random
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError, allowed, read_yaml
from pytest_glmf.gates.agents.spec import DEFAULTS, AgentsSettings

TURN_KINDS = ("user", "tool")


@dataclass(frozen=True)
class Turn:
    kind: str                          # "user": a user message; "tool": a tool result fed back
    text: str
    max_tokens: int | None = None      # None: the session's
    think_time_s: float | None = None  # before this turn, after the previous answer; None: the session's


@dataclass(frozen=True)
class Session:
    name: str
    turns: tuple[Turn, ...]
    system: str | None = None
    max_tokens: int = DEFAULTS.max_tokens
    think_time_s: float = 0.0
    start_s: float = 0.0               # when the session's first turn is due, after the common start
    tools: tuple[dict[str, Any], ...] = ()   # OpenAI tool definitions offered with every turn

    def max_tokens_of(self, turn: Turn) -> int:
        return turn.max_tokens if turn.max_tokens is not None else self.max_tokens

    def think_of(self, turn: Turn) -> float:
        return turn.think_time_s if turn.think_time_s is not None else self.think_time_s


@dataclass(frozen=True)
class Conversations:
    """Every session one measurement runs at once (`sessions[i]` is user i)."""

    sessions: tuple[Session, ...]
    source: str = "<sessions>"

    @property
    def turns(self) -> int:
        return max((len(s.turns) for s in self.sessions), default=0)

    def take(self, n: int) -> "Conversations":
        """The first n sessions, cycled when there are fewer (a capacity search's N concurrent
        sessions out of a file of a few); copies are renamed so every session stays distinct."""
        if not self.sessions:
            raise ConfigError(f"{self.source}: no sessions")
        out = []
        for i in range(n):
            s = self.sessions[i % len(self.sessions)]
            copy = i // len(self.sessions)
            out.append(s if copy == 0 else _renamed(s, f"{s.name}#{copy}"))
        return Conversations(tuple(out), self.source)


def _renamed(s: Session, name: str) -> Session:
    # the copy's first message names it, so its conversation shares only the system prompt
    first = s.turns[0]
    turns = (Turn(first.kind, f"[{name}] {first.text}", first.max_tokens, first.think_time_s),) + s.turns[1:]
    return Session(name, turns, s.system, s.max_tokens, s.think_time_s, s.start_s, s.tools)


# -- generated sessions -------------------------------------------------------------------------

WORDS = ("order", "invoice", "shipping", "address", "refund", "account", "password", "delivery", "status",
         "customer", "product", "warranty", "payment", "billing", "support", "ticket", "update", "request",
         "report", "schedule", "meeting", "project", "deadline", "budget", "review", "change", "system",
         "server", "network", "storage", "backup", "license", "contract", "price", "quote", "discount",
         "service", "plan", "region", "market", "team", "manager", "policy", "country", "number", "date")


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@dataclass(frozen=True)
class Template:
    """A sessions file's `template:`; a key it leaves out is the gate's setting of that name (spec.py)."""

    sessions: int = DEFAULTS.sessions
    turns: int = DEFAULTS.turns
    system_tokens: int = DEFAULTS.system_tokens
    user_tokens: int = DEFAULTS.user_tokens
    max_tokens: int = DEFAULTS.max_tokens
    think_time_s: float = DEFAULTS.think_time_s
    tool_every: int = DEFAULTS.tool_every
    start_spread_s: float = DEFAULTS.start_spread_s    # sessions start evenly over this window (0: all at once)
    seed: int = DEFAULTS.seed


# each template key's kind and lowest value: the gate's setting of that name's (spec.py)
TEMPLATE_LIMITS: dict[str, tuple[type, float]] = {
    name: (kind, {f.name: f for f in dataclasses.fields(AgentsSettings)}[name].metadata["min"])
    for name, kind in typing.get_type_hints(Template).items()}


def from_template(template: Template | None = None, source: str = "<template>", tokens_per_word: float = 1.0,
                  **overrides: Any) -> Conversations:
    """N sessions of T turns: one shared system prompt, each session's own turns (seeded); token
    lengths become word counts at `tokens_per_word`."""
    t = template or Template()
    if overrides:
        t = _template_from({**t.__dict__, **overrides}, source)

    def n_words(tokens: int) -> int:
        return max(1, round(tokens / tokens_per_word))

    system_rng = random.Random(t.seed)
    system = ("You are an operations agent. Answer briefly and call tools when needed. Reference: "
              + words(system_rng, n_words(t.system_tokens))) if t.system_tokens else None
    out = []
    for i in range(t.sessions):
        rng = random.Random(t.seed * 1_000_003 + i + 1)
        turns = []
        for k in range(t.turns):
            tool = bool(t.tool_every) and k > 0 and k % t.tool_every == 0
            text = (f"Tool result {k}: " if tool else f"Session {i} turn {k}: ") + words(rng, n_words(t.user_tokens))
            turns.append(Turn("tool" if tool else "user", text))
        start = t.start_spread_s * i / t.sessions if t.sessions else 0.0
        out.append(Session(f"s{i}", tuple(turns), system, t.max_tokens, t.think_time_s, start))
    return Conversations(tuple(out), source)


def tokens_per_word(count: Any) -> float:
    """Tokens per generated word, from `count(text) -> tokens | None` (a server's /tokenize); 1.0
    when it cannot count."""
    sample = words(random.Random(12345), 400)
    n = count(sample)
    return n / 400 if n else 1.0


def _template_from(raw: Mapping[str, Any], where: str) -> Template:
    unknown = set(raw) - set(TEMPLATE_LIMITS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}; allowed: {allowed(TEMPLATE_LIMITS)}")
    values = {}
    for key, value in raw.items():
        kind, low = TEMPLATE_LIMITS[key]
        values[key] = _number(value, kind, low, f"{where}.{key}")
    return Template(**values)


def _number(value: Any, kind: type, low: float, where: str) -> Any:
    ok = not isinstance(value, bool) and (isinstance(value, int) or (kind is float and isinstance(value, float)))
    if not ok:
        raise ConfigError(f"{where}: expected {'an integer' if kind is int else 'a number'}, got {value!r}")
    if value < low:
        raise ConfigError(f"{where}: must be >= {low:g}, got {value!r}")
    return kind(value)


# -- the YAML file ------------------------------------------------------------------------------

SESSION_KEYS = ("name", "system", "turns", "max_tokens", "think_time_s", "start_s", "tools")
TURN_KEYS = ("user", "tool_result", "max_tokens", "think_time_s")


def load_sessions(path: str | Path) -> Conversations:
    """A sessions file: `sessions:` (a list, written out) or `template:` (generated), not both."""
    source = str(path)
    data = read_yaml(path, "sessions")
    return sessions_from_data(data, source)


def sessions_from_data(data: Any, source: str) -> Conversations:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'sessions:' or 'template:'")
    unknown = set(data) - {"sessions", "template"}
    if unknown:
        raise ConfigError(f"{source}: unknown key {sorted(unknown)[0]!r}; allowed: sessions, template")
    if ("sessions" in data) == ("template" in data):
        raise ConfigError(f"{source}: give exactly one of 'sessions:' (written out) or 'template:' (generated)")
    if "template" in data:
        if not isinstance(data["template"], dict):
            raise ConfigError(f"{source}: template: expected a mapping like {{sessions: 8, turns: 4}}")
        return from_template(_template_from(data["template"], f"{source}: template"), source)
    items = data["sessions"]
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{source}: sessions: expected a non-empty list of sessions")
    out = [_session(item, f"{source}: sessions[{i}]", i) for i, item in enumerate(items)]
    names = [s.name for s in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ConfigError(f"{source}: sessions: the name {dup!r} is used twice")
    return Conversations(tuple(out), source)


def _session(item: Any, where: str, index: int) -> Session:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping with turns:")
    unknown = set(item) - set(SESSION_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}; allowed: {allowed(SESSION_KEYS)}")
    name = item.get("name", f"s{index}")
    system = item.get("system")
    for key, value in (("name", name), ("system", system)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}.{key}: expected text, got {value!r}")
    turns_raw = item.get("turns")
    if not isinstance(turns_raw, list) or not turns_raw:
        raise ConfigError(f"{where}.turns: expected a non-empty list of turns like {{user: TEXT}}")
    turns = tuple(_turn(t, f"{where}.turns[{k}]") for k, t in enumerate(turns_raw))
    if turns[0].kind == "tool":
        raise ConfigError(f"{where}.turns[0]: a session starts with a user message, not a tool_result")
    tools = item.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise ConfigError(f"{where}.tools: expected a list of OpenAI tool definitions")
    return Session(name=str(name), turns=turns, system=system,
                   max_tokens=_number(item.get("max_tokens", 64), int, 1, f"{where}.max_tokens"),
                   think_time_s=_number(item.get("think_time_s", 0.0), float, 0, f"{where}.think_time_s"),
                   start_s=_number(item.get("start_s", 0.0), float, 0, f"{where}.start_s"), tools=tuple(tools))


def _turn(item: Any, where: str) -> Turn:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping like {{user: TEXT}} or {{tool_result: TEXT}}")
    unknown = set(item) - set(TURN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}; allowed: {allowed(TURN_KEYS)}")
    if ("user" in item) == ("tool_result" in item):
        raise ConfigError(f"{where}: give exactly one of user: or tool_result:")
    kind, text = ("user", item["user"]) if "user" in item else ("tool", item["tool_result"])
    if not isinstance(text, str) or not text:
        raise ConfigError(f"{where}.{'user' if kind == 'user' else 'tool_result'}: expected non-empty text")
    max_tokens = item.get("max_tokens")
    think = item.get("think_time_s")
    return Turn(kind, text, None if max_tokens is None else _number(max_tokens, int, 1, f"{where}.max_tokens"),
                None if think is None else _number(think, float, 0, f"{where}.think_time_s"))


def as_conversations(sessions: "Conversations | Sequence[Session] | str | Path | Mapping[str, Any] | None",
                     count: int | None = None) -> Conversations:
    """What measure_agents accepts: Conversations, a list of Session, a sessions file's path, a
    template's keywords as a mapping, or None (the default template); `count` sessions of it."""
    if sessions is None:
        conv = from_template()
    elif isinstance(sessions, Conversations):
        conv = sessions
    elif isinstance(sessions, (str, Path)):
        conv = load_sessions(sessions)
    elif isinstance(sessions, Mapping):
        conv = from_template(_template_from(dict(sessions), "template"))
    else:
        conv = Conversations(tuple(sessions))
    return conv.take(count) if count is not None else conv


__all__ = ["Conversations", "Session", "Template", "Turn", "TURN_KINDS", "as_conversations", "from_template",
           "load_sessions", "sessions_from_data"]
