"""Secret masking: env values, command lines, nested result data."""
from __future__ import annotations

from pytest_glmf.results.redact import MASK, Redactor, is_secret_name

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
