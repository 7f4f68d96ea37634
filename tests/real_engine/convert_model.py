"""GGUF -> float32 safetensors model dir with a tool-aware chat template (run by ./setup).

Why each choice (source: docs/real-engine.md section 1):
- transformers 5.x keeps GGUF weights packed unless `GgufConfig(dequantize=True)`; packed weights
  are "not serializable". `accelerate` must be installed for the GGUF loader.
- float32, not bf16: the GGUF is Q4_1, whose dequantized values are exact in float32. The oracle
  lane serves `--dtype float32 --enforce-eager`, which the study found bit-identical across reruns;
  saving bf16 would add a rounding the oracle does not need and that the fake quantizer would then
  stack on.
- The GGUF's own chat template is plain ChatML without `tools`: vLLM silently drops the tools
  (37 prompt tokens with or without them). The hermes-style template renders tools and tool calls,
  and renders byte-identically to the original when no tools are given (checked below, so a
  template edit that breaks the no-tools path fails setup, not a gate).
- Writes to a temp dir and renames, so an interrupted setup never leaves a half model behind.

Run with the real-engine venv's python: `python convert_model.py --gguf F --template T --out DIR`.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True, type=Path)
    ap.add_argument("--template", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils.quantization_config import GgufConfig

    t0 = time.monotonic()
    d, f = str(args.gguf.parent), args.gguf.name
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(
        d, gguf_file=f, dtype=torch.float32, quantization_config=GgufConfig(dequantize=True)
    )
    t_load = time.monotonic() - t0

    tmp = args.out.with_name(args.out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)

    template = args.template.read_text()
    original = tok.chat_template
    _check_template(tok, original, template)
    # transformers 5 reads chat_template.jinja; older readers (and vLLM's fallback) read the
    # tokenizer_config.json key. Write both so every reader sees the same template.
    (tmp / "chat_template.jinja").write_text(template)
    cfg_path = tmp / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = template
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False))

    answer = _greedy(model, tok, "What is the capital of France?")
    if "Paris" not in answer:
        print(f"convert: sanity generation did not mention Paris: {answer!r}", file=sys.stderr)
        return 1

    shutil.rmtree(args.out, ignore_errors=True)
    tmp.rename(args.out)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"convert: {n_params / 1e6:.1f}M params float32 -> {args.out} "
        f"(load+dequantize {t_load:.1f} s, total {time.monotonic() - t0:.1f} s); sanity: {answer!r}"
    )
    return 0


def _check_template(tok, original: str, tools_template: str) -> None:
    """The tool-aware template must not change prompts that carry no tools."""
    convs = [
        [{"role": "user", "content": "What is the capital of France?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}],
    ]
    for conv in convs:
        a = tok.apply_chat_template(conv, chat_template=original, tokenize=False, add_generation_prompt=True)
        b = tok.apply_chat_template(conv, chat_template=tools_template, tokenize=False, add_generation_prompt=True)
        if a != b:
            raise SystemExit(f"convert: tool-aware template changes a no-tools prompt:\n{a!r}\n!=\n{b!r}")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    with_tools = tok.apply_chat_template(convs[0], tools=tools, chat_template=tools_template, tokenize=False)
    if "<tools>" not in with_tools or "get_weather" not in with_tools:
        raise SystemExit("convert: tool-aware template does not render tools")


def _greedy(model, tok, question: str) -> str:
    import torch

    ids = tok.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=False)


if __name__ == "__main__":
    raise SystemExit(main())
