"""The template gate's reference: the prompt ids (and the text of each id) every conversation
should render to, from one of three places.

- a stored run of the known-good image: `record_reference(url)` (`glmf template reference --url`)
  reads the served ids from that server, the same way the gate reads the candidate's;
- the model's own tokenizer and chat template, applied locally with transformers:
  `local_reference(model_dir, python=PY)` runs `render_local.py` under an interpreter that has
  transformers (the engine's venv; the project's own needs none);
- for the built-in simulator, its own template (`simulator_reference`): what `glmf sim` serves
  without a `template=` fault.

A reference file is JSON: `schema`, `kind` ("glmf-template-reference"), `source` (how it was made),
`conversations_sha256` (the set it was made from), per conversation `id`, `ids`, `pieces`, and
`skip_special_tokens_default` (`{"value", "from"}`, special.py: the default the known-good server
applies to output text; absent or null in references made before it was recorded, or when unknown).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.engine.introspect import served_model
from pytest_glmf.gates.template.conversations import Conversation, conversations_hash, load_conversations
from pytest_glmf.gates.template.served import served_prompt_ids, token_pieces
from pytest_glmf.gates.template.spec import DEFAULTS
from pytest_glmf.gates.template.special import lane_skip_special_default
from pytest_glmf.sim.openai_api import chat_prompt_ids
from pytest_glmf.sim.tokenizer import token_text

SCHEMA = 1
KIND = "glmf-template-reference"
RENDER_SCRIPT = Path(__file__).with_name("render_local.py")


def make_reference(conversations: list[Conversation], rendered: dict[str, dict[str, Any]],
                   source: dict[str, Any], skip_special_tokens_default: dict[str, Any] | None = None) -> dict[str, Any]:
    """A reference from per-conversation `{"ids", "pieces"}` (keyed by conversation id)."""
    return {"schema": SCHEMA, "kind": KIND, "source": source, "skip_special_tokens_default": skip_special_tokens_default,
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "conversations_sha256": conversations_hash(conversations),
            "conversations": [{"id": c.id, "ids": list(rendered[c.id]["ids"]), "pieces": list(rendered[c.id]["pieces"])}
                              for c in conversations]}


def record_reference(url: str, conversations: list[Conversation] | str | Path | None = None, *,
                     served_ids: str = DEFAULTS.served_ids, model: str | None = None,
                     timeouts: dict[str, float] | None = None,
                     skip_special_tokens_default: dict[str, Any] | None = None) -> dict[str, Any]:
    """The reference as the server at `url` (the known-good image) renders the conversations;
    `skip_special_tokens_default`: that server's default (special.skip_special_default), kept."""

    convs = _conversations(conversations)
    known = {k: v for k, v in (timeouts or {}).items() if k in Timeouts.__dataclass_fields__}
    with Client(url, Timeouts(**known)) as client:
        model = model or served_model(client)
        rendered = {}
        for c in convs:
            ids = served_prompt_ids(client, c, served_ids, model)
            rendered[c.id] = {"ids": ids, "pieces": token_pieces(client, ids, model)}
    return make_reference(convs, rendered, {"kind": "server", "url": url, "model": model, "served_ids": served_ids},
                          skip_special_tokens_default)


def local_reference(model_dir: str | Path, conversations: list[Conversation] | str | Path | None = None, *,
                    python: str | None = None, timeout_s: float = 600.0,
                    skip_special_tokens_default: dict[str, Any] | None = None) -> dict[str, Any]:
    """The reference as transformers renders the conversations with `model_dir`'s tokenizer and
    chat template, run by `python` (default: this interpreter), which must have transformers."""
    convs = _conversations(conversations)
    python = python or sys.executable
    if not Path(model_dir).is_dir():
        raise ConfigError(f"template reference: model directory {str(model_dir)!r} does not exist")
    try:
        proc = subprocess.run([python, str(RENDER_SCRIPT), "--model-dir", str(model_dir)],
                              input=json.dumps([c.to_dict() for c in convs]), capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"template reference: {python} {RENDER_SCRIPT.name} failed to run: {exc}") from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"template reference: {python} {RENDER_SCRIPT.name} --model-dir {model_dir} exited "
                           f"{proc.returncode}: {tail}")
    out = json.loads(proc.stdout)
    rendered = {c["id"]: c for c in out["conversations"]}
    return make_reference(convs, rendered, {"kind": "transformers", "model_dir": str(model_dir), "python": python,
                                            "transformers": out.get("transformers")},
                          skip_special_tokens_default)


def simulator_reference(conversations: list[Conversation] | str | Path | None = None,
                        tool_call_parser: str | None = None,
                        skip_special_tokens_default: dict[str, Any] | None = None) -> dict[str, Any]:
    """The reference as the built-in simulator's own template renders the conversations (its
    assistant tool calls in the markup of `tool_call_parser`, as `glmf sim` renders them)."""

    convs = _conversations(conversations)
    rendered = {}
    for c in convs:
        ids = chat_prompt_ids(c.request_fields(), tool_call_parser, None)
        rendered[c.id] = {"ids": ids, "pieces": [token_text(i) for i in ids]}
    return make_reference(convs, rendered, {"kind": "simulator", "tool_call_parser": tool_call_parser},
                          skip_special_tokens_default)


def save_reference(ref: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(ref, ensure_ascii=False, indent=1))


def load_reference(path: str | Path) -> dict[str, Any]:
    """A stored reference; an unreadable or foreign file is an error naming it."""
    try:
        ref = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: template reference not found (make one: glmf template reference "
                          f"--url URL --out {path})") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a template reference ({exc})") from None
    check_reference(ref, str(path))
    return ref


def check_reference(ref: Any, where: str) -> None:
    if not isinstance(ref, dict) or ref.get("kind") != KIND:
        raise ConfigError(f"{where}: not a template reference (kind must be {KIND!r}; "
                          f"made by `glmf template reference`)")
    if ref.get("schema") != SCHEMA:
        raise ConfigError(f"{where}: template reference schema {ref.get('schema')!r}; this version reads {SCHEMA}")
    for c in ref.get("conversations") or []:
        if not (isinstance(c.get("ids"), list) and isinstance(c.get("pieces"), list)
                and len(c["ids"]) == len(c["pieces"])):
            raise ConfigError(f"{where}: conversation {c.get('id')!r}: ids and pieces must be lists of one length")
    default = ref.get("skip_special_tokens_default")
    if default is not None and not (isinstance(default, dict) and isinstance(default.get("value"), bool)):
        raise ConfigError(f"{where}: skip_special_tokens_default must be null or {{\"value\": true|false, "
                          f"\"from\": ...}} (got {str(default)[:80]!r})")


def _conversations(conversations: list[Conversation] | str | Path | None) -> list[Conversation]:
    if conversations is None or isinstance(conversations, (str, Path)):
        return load_conversations(conversations)
    return list(conversations)


def lane_parser(extra: list[str]) -> str | None:
    """`--tool-call-parser` of a lane's extra flags (either spelling), None without one."""
    for i, flag in enumerate(extra):
        if flag == "--tool-call-parser" and i + 1 < len(extra):
            return extra[i + 1]
        if flag.startswith("--tool-call-parser="):
            return flag.split("=", 1)[1]
    return None


def reference_for_lane(lane: Any, reference: str | None, python: str | None, thresholds_path: str | Path,
                       conversations: list[Conversation]) -> dict[str, Any] | None:
    """The lane's reference: the stored file `reference` (relative: beside the thresholds file),
    else the simulator's own template for a sim lane, else transformers on the lane's model
    directory (under `python`, or a process lane's executable); None when none of these exists."""
    if reference:
        p = Path(reference).expanduser()
        if not p.is_absolute() and (Path(thresholds_path).parent / p).exists():
            p = Path(thresholds_path).parent / p
        return load_reference(p)
    extra = [str(x) for x in (lane.extra or [])]
    if lane.launcher == "sim":
        return simulator_reference(conversations, lane_parser(extra), lane_skip_special_default(lane))
    if lane.model and Path(lane.model).is_dir():
        interpreter = python or (lane.executable if lane.launcher == "process" else None)
        return local_reference(lane.model, conversations, python=interpreter,
                               skip_special_tokens_default=lane_skip_special_default(lane))
    return None
