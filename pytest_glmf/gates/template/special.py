"""The `skip_special_tokens` default a server applies to chat and completion text when a request
does not send it, as the lane's engine derives it.

vLLM 0.33 takes it from the model's `generation_config.json`: `ModelConfig.get_diff_sampling_param`
(vllm/config/model.py:1860-1919) lists `skip_special_tokens` among the parameters it reads, with
`--override-generation-config` (a JSON object) applied on top and `--generation-config vllm`
(vLLM's neutral defaults) or `--generation-config DIR` (that directory's file) choosing the source;
`ChatCompletionRequest.skip_special_tokens` is `None` and falls back to that default, else True
(vllm/entrypoints/openai/chat_completion/protocol.py:724-727). vLLM 0.32 and SGLang 0.5.23 always
default to True (SGLang's `get_default_sampling_params` reads no `skip_special_tokens`). Neither
engine exposes the default it applied, so it is read from the lane's model directory when local.

The gates send `skip_special_tokens` explicitly wherever they read text it changes (the tools
gate's leak check; the template gate's `/detokenize` pieces), so their verdicts do not move with
this default; the template gate records it so a change between reference and candidate is seen.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SETTING = "skip_special_tokens"
KNOBS = "--generation-config / --override-generation-config"
ENGINE_DEFAULT = True


def _flag(extra: Sequence[str], name: str) -> str | None:
    """The last value of `name` in a lane's extra flags (either spelling), None without one."""
    value = None
    for i, flag in enumerate(extra):
        if flag == name and i + 1 < len(extra):
            value = extra[i + 1]
        elif flag.startswith(name + "="):
            value = flag.split("=", 1)[1]
    return value


def _generation_config(directory: Path) -> dict[str, Any] | None:
    path = directory / "generation_config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def skip_special_default(engine: str | None, model: str | Path | None,
                         extra: Sequence[str] = ()) -> dict[str, Any] | None:
    """`{"value": bool, "from": words}`: the `skip_special_tokens` a request without it gets, as
    the lane's engine derives it from `model` (a local directory) and its `extra` flags; None when
    it cannot be known here (a vLLM model that is not a local directory, an unreadable file)."""
    extra = [str(x) for x in extra]
    if engine != "vllm":
        return {"value": ENGINE_DEFAULT, "from": f"{engine or 'the engine'}'s default (not read from "
                                                 "generation_config.json)"}
    override = _flag(extra, "--override-generation-config")
    if override:
        try:
            values = json.loads(override)
        except json.JSONDecodeError:
            values = None
        if isinstance(values, dict) and isinstance(values.get(SETTING), bool):
            return {"value": values[SETTING], "from": "--override-generation-config"}
    source = _flag(extra, "--generation-config") or "auto"
    if source == "vllm":
        return {"value": ENGINE_DEFAULT, "from": "--generation-config vllm (vLLM's default)"}
    if source == "auto" and not model:
        return None
    directory = Path(source if source != "auto" else str(model)).expanduser()
    if not directory.is_dir():
        return None
    config = _generation_config(directory)
    if config is None:
        return None
    where = str(directory / "generation_config.json")
    if isinstance(config.get(SETTING), bool):
        return {"value": config[SETTING], "from": f"{where} (vLLM >= 0.33)"}
    return {"value": ENGINE_DEFAULT, "from": f"vLLM's default (no {SETTING} in {where})"}


def lane_skip_special_default(lane: Any) -> dict[str, Any] | None:
    """`skip_special_default` of a lane (its engine, model and extra flags)."""
    return skip_special_default(getattr(lane, "engine", None), getattr(lane, "model", None),
                                list(getattr(lane, "extra", None) or []))


def default_change(reference: dict[str, Any] | None, served: dict[str, Any] | None) -> dict[str, Any] | None:
    """The change of the default between the reference and the candidate, None when both are known
    and equal or either is unknown (a reference made before this was recorded)."""
    if not reference or not served or reference.get("value") == served.get("value"):
        return None
    return {"setting": SETTING, "reference": reference.get("value"), "served": served.get("value"),
            "reference_from": reference.get("from"), "served_from": served.get("from"), "knob": KNOBS}
