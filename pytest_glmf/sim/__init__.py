"""The built-in SGLang-compatible simulator of the recipe's GB300 (docs/architecture.md section 7).

`python -m pytest_glmf.sim [SGLang flags] [--time-scale X] [--checkpoint ...] [--fault ...]` prints an
SGLang-format boot log and serves the SGLang HTTP surface on 127.0.0.1. Modules, one concern each:
args (flags), memory (seats and pools), boot (the boot log), timing (step times, prefill,
acceptance), scheduler (one asyncio loop stepping every running request), tokenizer (vocabulary
and chat template), logits (deterministic logits and checkpoint perturbations), tools (tool-call
markup, the call rule and the parsers), faults, streaming (the one way a route waits for tokens),
openai_api and native_api (the routes; they never import the app), app (the ASGI app: routing,
introspection, /metrics), __main__ (cli). The dialect is SGLang 0.5.23's (its protocol models and
request checks are the contract stage's oracle); the boot log is the nightly's or 0.5.23's
(`--log-format`).
"""
