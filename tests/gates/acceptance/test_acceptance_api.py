"""`measure_acceptance` (the acceptance gate's public measurement) on the built-in simulator's daily
lane (DFlash2) with a user's own prompt classes: typed results, and errors that name the input."""
from __future__ import annotations

import pytest

from pytest_glmf.gates.acceptance import AcceptanceResult, load_prompt_classes, measure_acceptance

CLASSES = """\
schema: 1
classes:
  - {name: shell, max_tokens: 600, prompts: ["Write a bash one-liner that counts lines in every file."]}
  - {name: chat, max_tokens: 600, prompts: ["Tell me a short story about a lighthouse."]}
"""


def test_acceptance_from_a_users_classes(daily_sim, tmp_path):
    path = tmp_path / "classes.yaml"
    path.write_text(CLASSES)
    result = measure_acceptance(daily_sim.base_url, path)
    assert isinstance(result, AcceptanceResult) and result.engine == "sglang" and result.speculative is True
    assert result.names() == ["shell", "chat"] and result["mean"] is result.mean
    # the simulator drafts shell commands at 0.39 and stories (prose) at 0.29 (sim/timing.py)
    assert result["shell"].accept_rate > result["chat"].accept_rate > 0
    assert result.mean.accept_rate == pytest.approx((result["shell"].accept_rate + result["chat"].accept_rate) / 2)
    assert len(result.records) == 2 and "shell" in result.table()
    with pytest.raises(KeyError, match=r"no prompt class 'poetry'; measured: \['shell', 'chat'\]"):
        result["poetry"]
    assert [c.name for c in load_prompt_classes(path)] == ["shell", "chat"]
    with pytest.raises(ValueError, match="template 'jinja': use one of glm, glm-nothink, chatml, raw"):
        measure_acceptance(daily_sim.base_url, path, template="jinja")
