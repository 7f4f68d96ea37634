"""The built-in SGLang-compatible simulator of the recipe's GB300 (docs/architecture.md section 7).

`python -m pytest_glmf.sim [SGLang flags] [--time-scale X] [--checkpoint ...] [--fault ...]` prints an
SGLang-format boot log and serves the SGLang HTTP surface on 127.0.0.1. Modules, one concern each:
args (flags), memory (seats and pools), boot (the boot log), timing (step times, prefill,
acceptance), scheduler (one asyncio loop stepping every running request), tokenizer (vocabulary
and chat template), logits (deterministic logits and checkpoint perturbations), tools (tool-call
markup, the call rule and the parsers), faults, app (the ASGI app), __main__ (cli).
"""
