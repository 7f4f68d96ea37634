"""The GPU stage (issue 31): the plugin's CLIs and ready-made suites against a real vLLM on a GPU.

Never collected unless GLMF_GPU_URL names the running server (CI has no GPU; docs/gpu.md says how to
run it and what it measured). Environment:
- GLMF_GPU_URL: the server (vLLM in dev mode, so /server_info and /reset_prefix_cache answer);
- GLMF_GPU_BOOT_LOG: its boot log (the boot gate reads it);
- GLMF_GPU_MODEL, GLMF_GPU_SERVED: the model directory (`vllm bench serve`'s tokenizer) and the served name;
- GLMF_GPU_OUT: where each test writes what it measured (JSON), default a temp dir.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("GLMF_GPU_URL"):
    collect_ignore_glob = ["test_*.py"]


def pytest_configure(config: pytest.Config) -> None:
    # registered here too: the stage also runs from a copy of tests/gpu beside the plugin, without pyproject
    config.addinivalue_line("markers", "gpu: runs against vLLM on a GPU (tests/gpu, docs/gpu.md)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/gpu/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def gpu_url() -> str:
    return os.environ["GLMF_GPU_URL"]


@pytest.fixture(scope="session")
def gpu_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = Path(os.environ.get("GLMF_GPU_OUT") or tmp_path_factory.mktemp("gpu"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def record(gpu_out: Path, request: pytest.FixtureRequest):
    """record(data): write what the test measured to GLMF_GPU_OUT/<test name>.json."""
    def write(data: Any) -> None:
        (gpu_out / f"{request.node.name}.json").write_text(json.dumps(data, indent=1, default=str))
    return write
