"""The conversations the template gate renders: a YAML file (the packaged
`pytest_glmf/data/template_conversations.yaml`, or yours in the same format).

    schema: 1
    tools: {NAME: {description: ..., parameters: {JSON schema}}}
    conversations:
      - id: tools_offered
        tools: [NAME, ...]                       # offered tools (optional)
        chat_template_kwargs: {enable_thinking: false}   # optional
        messages: [{role: system|user|assistant|tool, content: ..., tool_calls: [...]}]

A mistake (unknown key, unknown tool, a message without a role) is an error naming the file, the
conversation and the key.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError, parse_yaml
from pytest_glmf.data import read_text as read_data_file

PACKAGED = "template_conversations.yaml"
CONVERSATION_KEYS = ("id", "messages", "tools", "chat_template_kwargs")
ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass(frozen=True)
class Conversation:
    """One chat as a request would send it: messages, the tools offered, template switches."""

    id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)         # OpenAI tool objects
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    def request_fields(self) -> dict[str, Any]:
        """The fields a /tokenize or chat-completion body carries for this conversation."""
        body: dict[str, Any] = {"messages": self.messages}
        if self.tools:
            body["tools"] = self.tools
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = self.chat_template_kwargs
        return body

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, **self.request_fields()}


def conversations_hash(conversations: list[Conversation]) -> str:
    """sha256 of the conversations as sent: a reference holds it, so a changed set is named as such
    rather than reported as a template change."""
    canon = json.dumps([c.to_dict() for c in conversations], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


def load_conversations(path: str | Path | None = None) -> list[Conversation]:
    """Conversations from a YAML file (None: the packaged set)."""
    source = str(path or f"pytest_glmf/data/{PACKAGED}")
    data = parse_yaml(read_data_file(path, PACKAGED), source)
    if not isinstance(data, dict) or not isinstance(data.get("conversations"), list) or not data["conversations"]:
        raise ConfigError(f"{source}: needs `conversations:`, a non-empty list (and optionally `tools:`)")
    unknown_top = sorted(set(data) - {"schema", "tools", "conversations"})
    if unknown_top:
        raise ConfigError(f"{source}: unknown key(s) {unknown_top}; allowed: schema, tools, conversations")
    tool_specs = data.get("tools") or {}
    if not isinstance(tool_specs, dict):
        raise ConfigError(f"{source}: tools: a mapping of name -> {{description, parameters}}")
    tools = {name: {"type": "function", "function": {"name": name, **spec}} for name, spec in tool_specs.items()}
    out: list[Conversation] = []
    seen: set[str] = set()
    for i, c in enumerate(data["conversations"]):
        where = f"{source}: conversations[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not c["id"]:
            raise ConfigError(f"{where}: each conversation needs an `id` (a string)")
        where = f"{source}: conversation {c['id']!r}"
        if c["id"] in seen:
            raise ConfigError(f"{where}: the id is used twice")
        seen.add(c["id"])
        unknown = sorted(set(c) - set(CONVERSATION_KEYS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(CONVERSATION_KEYS)}")
        messages = c.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ConfigError(f"{where}: messages: a non-empty list of {{role, content}}")
        for j, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                raise ConfigError(f"{where}: messages[{j}]: role must be one of {', '.join(ROLES)}, got "
                                  f"{m.get('role') if isinstance(m, dict) else m!r}")
        names = c.get("tools") or []
        missing = [t for t in names if t not in tools]
        if not isinstance(names, list) or missing:
            raise ConfigError(f"{where}: tools: unknown tool(s) {missing or names!r}; the file's tools: "
                              f"{', '.join(tools) or '(none)'}")
        kwargs = c.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise ConfigError(f"{where}: chat_template_kwargs: a mapping, e.g. {{enable_thinking: false}}")
        out.append(Conversation(c["id"], [dict(m) for m in messages], [tools[t] for t in names], dict(kwargs)))
    return out
