"""Secret masking: env values, command lines, nested result data."""
from __future__ import annotations

from pytest_glmf.redact import MASK, Redactor, is_secret_name

ENV = {"HF_TOKEN": "hf_abcdefSECRET123", "OPENAI_API_KEY": "sk-live-xyz987", "MY_SECRET": "s3cr3t-value",
       "PATH": "/usr/bin", "SHORT_KEY": "1"}


def test_secret_names():
    assert all(map(is_secret_name, ["HF_TOKEN", "api_key", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"]))
    assert not any(map(is_secret_name, ["PATH", "CUDA_VISIBLE_DEVICES", "TORCHINDUCTOR_COMPILE_THREADS"]))


def test_text_masks_every_occurrence_but_not_short_values():
    r = Redactor(ENV)
    s = "login with hf_abcdefSECRET123 then sk-live-xyz987; again hf_abcdefSECRET123; port 1"
    assert r.text(s) == f"login with {MASK} then {MASK}; again {MASK}; port 1"


def test_argv_masks_secret_flags_and_values():
    r = Redactor(ENV)
    argv = ["serve", "--api-key", "whatever", "--hf-token=abc", "--model", "/m", "--note", "sk-live-xyz987"]
    assert r.argv(argv) == ["serve", "--api-key", MASK, "--hf-token=" + MASK, "--model", "/m", "--note", MASK]


def test_env_and_nested_data():
    r = Redactor(ENV)
    assert r.env({"HF_TOKEN": "hf_abcdefSECRET123", "PATH": "/usr/bin"}) == {"HF_TOKEN": MASK, "PATH": "/usr/bin"}
    doc = {"lane": {"env": {"HF_TOKEN": "hf_abcdefSECRET123"}, "extra": ["--x", "s3cr3t-value"]},
           "log": ["token hf_abcdefSECRET123"], "n": 3}
    out = r.data(doc)
    assert out == {"lane": {"env": {"HF_TOKEN": MASK}, "extra": ["--x", MASK]}, "log": [f"token {MASK}"], "n": 3}
    assert "hf_abcdefSECRET123" not in repr(out) and doc["lane"]["env"]["HF_TOKEN"] == "hf_abcdefSECRET123"


def test_token_counts_are_not_secrets_but_tokens_are():
    """A real SGLang lane passes `--max-total-tokens 32768` and prints 32768 in its boot log's
    summary line; masking it hid the KV pool from the boot gate (CI stage tests/real_sglang)."""
    from pytest_glmf.redact import Redactor, is_secret_name

    for name in ("HF_TOKEN", "GITHUB_TOKEN", "OPENAI_API_KEY", "--api-key", "--hf-token", "apikey",
                 "aws_secret_access_key", "DB_PASSWORD", "AWS_CREDENTIALS", "access-token"):
        assert is_secret_name(name), name
    for name in ("--max-total-tokens", "max_prefill_tokens", "prompt_tokens", "tokenizer_path",
                 "tokenizer_fingerprint", "model_info_keys", "OMP_NUM_THREADS"):
        assert not is_secret_name(name), name
    argv = ["--max-total-tokens", "32768", "--api-key", "sk-abcdef"]
    r = Redactor.from_environment({}, argv)
    assert r.argv(argv) == ["--max-total-tokens", "32768", "--api-key", "***"]
    assert r.text("max_total_num_tokens=32768, api_key=sk-abcdef") == "max_total_num_tokens=32768, api_key=***"
