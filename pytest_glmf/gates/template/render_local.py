"""Render conversations with a model directory's own tokenizer and chat template (transformers).

Standalone on purpose (the standard library and transformers only): it runs under whichever
interpreter has transformers, e.g. the engine's venv, without pytest-glmf installed there.

    PYTHON render_local.py --model-dir DIR < conversations.json > rendered.json

stdin: [{"id", "messages", "tools"?, "chat_template_kwargs"?}, ...]; stdout:
{"transformers": VERSION, "conversations": [{"id", "ids", "pieces"}]}. It renders the way both
engines' chat endpoints do: assistant tool-call `arguments` strings parsed into objects (vLLM
0.32 normalize_assistant_tool_call_arguments; SGLang 0.5.23 serving_chat.py:699), the template
applied with `add_generation_prompt=True` to text, the text encoded with
`add_special_tokens=False` (the template writes BOS itself; vLLM's TokenizeChatRequest default,
SGLang serving_chat.py:2181-2194).
"""
from __future__ import annotations

import argparse
import copy
import json
import sys


def normalized(messages: list[dict]) -> list[dict]:
    out = copy.deepcopy(messages)
    for m in out:
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except json.JSONDecodeError:
                    pass
    return out


def render(model_dir: str, conversations: list[dict]) -> dict:
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    rendered = []
    for c in conversations:
        text = tok.apply_chat_template(normalized(c["messages"]), tools=c.get("tools") or None,
                                       add_generation_prompt=True, tokenize=False,
                                       **(c.get("chat_template_kwargs") or {}))
        ids = tok.encode(text, add_special_tokens=False)
        rendered.append({"id": c["id"], "ids": ids, "pieces": [tok.decode([i]) for i in ids]})
    return {"transformers": transformers.__version__, "conversations": rendered}


def main() -> int:
    ap = argparse.ArgumentParser(description="render conversations (JSON on stdin) with a model's chat template")
    ap.add_argument("--model-dir", required=True)
    args = ap.parse_args()
    try:
        import transformers  # noqa: F401
    except ImportError:
        print(f"render_local: transformers is not importable by {sys.executable}; run this with an "
              f"interpreter that has it (e.g. the engine's venv)", file=sys.stderr)
        return 3
    json.dump(render(args.model_dir, json.load(sys.stdin)), sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
