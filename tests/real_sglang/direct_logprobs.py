"""Log-probs computed directly by transformers, the truth the drift gate's SGLang scoring must equal.

Run with the SGLang venv's python (it has torch and transformers):

    python direct_logprobs.py < request.json > answer.json

request: {"model": DIR, "items": [[prompt_ids, output_ids], ...]}; answer: one list per item, the
log-probability of each output token given everything before it (float32, the model's own
weights, no server in between), teacher-forced on exactly the ids given.
"""
from __future__ import annotations

import json
import sys


def main() -> int:
    import torch
    from transformers import AutoModelForCausalLM

    req = json.load(sys.stdin)
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(req["model"], dtype=torch.float32)
    model.eval()
    out = []
    with torch.no_grad():
        for prompt_ids, output_ids in req["items"]:
            ids = torch.tensor([list(prompt_ids) + list(output_ids)])
            logp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
            n = len(prompt_ids)
            out.append([float(logp[n + t - 1, tok]) for t, tok in enumerate(output_ids)])
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
