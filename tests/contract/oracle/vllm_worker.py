"""The vLLM oracle, one process per release: a released vLLM's own code answering in one batch.

Runs in the overlay venv tests/contract/setup-vllm builds (never in the project's). stdin: one JSON
object; stdout: one JSON line (anything vLLM prints goes to stderr).

    {"argvs": [[...], ...],             -> "verdicts": the preflight probe's answer per argv, from the
                                           parser `vllm serve` builds (built once)
     "bodies": [{"path", "body"}, ...]} -> "bodies": per body, the request model of its route
                                           validating it, and the keys the model does not have
                                           (vLLM's models accept and drop unknown keys, logging them
                                           at debug level: a key they drop is a setting that never
                                           reached the engine)
                                        -> "answers": chat answers (a tool call; text with usage and
                                           prompt ids) built with its response models and dumped as its
                                           route returns them, for the gates' readers
                                        -> "parsers": the names its tool-call and reasoning parser
                                           registries hold (`--tool-call-parser`, `--reasoning-parser`
                                           are looked up there at startup, not by argparse)
Files cited are inside the vllm 0.33.0 package (0.34.0 keeps them).
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import warnings
from typing import Any

warnings.filterwarnings("ignore")

# route -> (module, model): the request model the route's handler declares
MODELS = {
    "/v1/chat/completions": ("vllm.entrypoints.openai.chat_completion.protocol", "ChatCompletionRequest"),
    "/v1/completions": ("vllm.entrypoints.openai.completion.protocol", "CompletionRequest"),
    # TokenizeRequest = TokenizeCompletionRequest | TokenizeChatRequest (serve/tokenize/protocol.py:179)
    "/tokenize": ("vllm.entrypoints.serve.tokenize.protocol", "TokenizeChatRequest|TokenizeCompletionRequest"),
    "/detokenize": ("vllm.entrypoints.serve.tokenize.protocol", "DetokenizeRequest"),
}


def _load_probe(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("glmf_preflight_probe", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_body(path: str, body: dict[str, Any]) -> dict[str, Any]:
    import importlib

    import pydantic

    if path not in MODELS:
        return {"ok": False, "model": None, "errors": [f"no request model known for {path}"], "unknown_keys": []}
    module_name, names = MODELS[path]
    module = importlib.import_module(module_name)
    errors: list[str] = []
    for name in names.split("|"):
        cls = getattr(module, name)
        if name == "TokenizeChatRequest" and "messages" not in body:
            continue
        try:
            cls.model_validate(body)
        except pydantic.ValidationError as exc:
            errors += [f"{name}: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
            continue
        known = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
        return {"ok": True, "model": name, "errors": [], "unknown_keys": sorted(set(body) - known)}
    return {"ok": False, "model": names, "errors": errors, "unknown_keys": []}


def sample_answers() -> dict[str, Any]:
    """Chat answers as the release's chat route returns them (`JSONResponse(content=result.model_dump())`,
    vllm/entrypoints/openai/chat_completion/api_router.py)."""
    from vllm.entrypoints.generate.base.protocol import FunctionCall, ToolCall
    from vllm.entrypoints.openai.chat_completion.protocol import (
        ChatCompletionResponse,
        ChatCompletionResponseChoice,
        ChatMessage,
    )
    from vllm.entrypoints.serve.engine.protocol import UsageInfo

    usage = UsageInfo(prompt_tokens=12, completion_tokens=7, total_tokens=19)
    call = ToolCall(function=FunctionCall(name="get_weather", arguments='{"city": "Paris"}'))
    tool = ChatCompletionResponse(model="m", usage=usage, choices=[ChatCompletionResponseChoice(
        index=0, message=ChatMessage(role="assistant", tool_calls=[call]), finish_reason="tool_calls")])
    text = ChatCompletionResponse(model="m", usage=usage, prompt_token_ids=[1, 2, 3], choices=[
        ChatCompletionResponseChoice(index=0, message=ChatMessage(role="assistant", content="Hello."),
                                     finish_reason="stop")])
    return {"tool_call": tool.model_dump(mode="json"), "text": text.model_dump(mode="json")}


def main() -> int:
    probe = _load_probe(sys.argv[1])
    req = json.loads(sys.stdin.read())
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        import vllm

        parser, version, where = probe.build_vllm()
        options = sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})
        verdicts = [{"problems": probe.parse_all(parser, list(argv)), "abbreviations": probe.abbreviations(parser, list(argv))}
                    for argv in req.get("argvs") or []]
        bodies = [check_body(b["path"], b["body"]) for b in req.get("bodies") or []]
        from vllm.reasoning import ReasoningParserManager
        from vllm.tool_parsers import ToolParserManager

        answers = sample_answers()
        parsers = {"tool": ToolParserManager.list_registered(), "reasoning": ReasoningParserManager.list_registered()}
    out.write(json.dumps({"version": version, "parser": where, "options": options,
                          "package_dir": os.path.dirname(vllm.__file__), "verdicts": verdicts, "bodies": bodies, "parsers": parsers,
                          "answers": answers}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
