"""A tiny local Hugging Face tokenizer for peer tools that insist on one (AIPerf, vllm bench serve).

This box has no model-hub access; the truth server's tokens are words ("w0", "w1", ...), so a
word-level tokenizer counts them exactly. Run it with the peer's own venv (it needs `tokenizers` and
`transformers`, which the peer installs):

    /tmp/peer-venv/bin/python bench/make_peer_tokenizer.py /tmp/peer-tok
"""
import sys

from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast


def main(out: str) -> None:
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    words = [f"w{i}" for i in range(5000)] + "the a of and to in is for on that with as by it this be are".split()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"], min_frequency=1)
    tok.train_from_iterator([" ".join(words)] * 2, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]").save_pretrained(out)
    print(f"tokenizer written to {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/peer-tok")
