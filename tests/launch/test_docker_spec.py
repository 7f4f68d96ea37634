"""The docker launcher's container spec and provenance helpers: pure functions, no engine needed."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pytest_glmf.config.lanes import LaneConfig, load_lanes
from pytest_glmf.launch.docker.spec import (
    LABEL_LANE,
    LABEL_OWNER,
    LABEL_SESSION,
    OWNER,
    container_spec,
    device_requests,
    server_argv,
)
from pytest_glmf.launch.modeldir import host_path_for, model_dir_provenance

REPO = Path(__file__).resolve().parents[2]
RECIPE_IMAGE = "lmsysorg/sglang:nightly-dev-cu13-20260911-00143e9c"


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_gb300_lanes_example_builds_the_recipes_docker_arguments() -> None:
    lanes = load_lanes(REPO / "examples" / "gb300-lanes.yaml")
    assert set(lanes) == {"daily", "batch"}
    daily = container_spec(lanes["daily"], "s1")
    batch = container_spec(lanes["batch"], "s1")
    for spec in (daily, batch):
        assert spec["image"] == RECIPE_IMAGE
        assert spec["device_requests"] == [{"Driver": "", "Count": -1, "DeviceIDs": [],
                                            "Capabilities": [["gpu"]], "Options": {}}]
        assert spec["volumes"]["/models/GLM-5.3-Flash-NVFP4"] == {"bind": "/models/GLM-5.3-Flash-NVFP4",
                                                                  "mode": "ro"}
        assert all(v["mode"] == "ro" for v in spec["volumes"].values())
        assert spec["ipc_mode"] == "host" and spec["shm_size"] == "32g"
        assert spec["ports"] == {"30000/tcp": ("127.0.0.1", None)}
        assert spec["init"] is True
        argv = spec["command"]
        assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
        assert _flag(argv, "--model-path") == "/models/GLM-5.3-Flash-NVFP4"
        assert _flag(argv, "--kv-cache-dtype") == "fp8_e4m3"
        # published ports reach the container's interface, never its loopback
        assert _flag(argv, "--host") == "0.0.0.0" and _flag(argv, "--port") == "30000"
        assert "--cuda-graph-max-bs" not in argv
    assert daily["volumes"]["/models/GLM-5.3-Flash-DFlash2"]["bind"] == "/models/GLM-5.3-Flash-DFlash2"
    d, b = daily["command"], batch["command"]
    assert _flag(d, "--speculative-algorithm") == "DFLASH"
    assert _flag(d, "--speculative-draft-model-path") == "/models/GLM-5.3-Flash-DFlash2"
    assert _flag(d, "--cuda-graph-max-bs-decode") == "16" and _flag(b, "--cuda-graph-max-bs-decode") == "128"
    assert _flag(d, "--context-length") == "1048576" and _flag(b, "--context-length") == "131072"
    assert _flag(d, "--mem-fraction-static") == "0.85" and _flag(b, "--mem-fraction-static") == "0.9"
    assert _flag(d, "--max-mamba-cache-size") == "48" and _flag(b, "--max-mamba-cache-size") == "640"
    assert _flag(d, "--speculative-dflash-block-size") == "7"
    assert "--speculative-algorithm" not in b
    assert _flag(b, "--mamba-ssm-dtype") == "bfloat16"
    assert batch["environment"] == {"TORCHINDUCTOR_COMPILE_THREADS": "1"}   # the AR lane only
    assert "TORCHINDUCTOR_COMPILE_THREADS" not in daily["environment"]
    assert batch["labels"][LABEL_OWNER] == OWNER and batch["labels"][LABEL_LANE] == "batch"
    assert batch["labels"][LABEL_SESSION] == "s1" and batch["name"] == "glmf-batch-s1"


@pytest.mark.parametrize(("gpus", "count", "ids"), [
    ("all", -1, []), (2, 2, []), ("2", 2, []), (["0", "2"], None, ["0", "2"]),
    ("0,2", None, ["0", "2"]), ('"device=1,3"', None, ["1", "3"]), ("GPU-5f1c", None, ["GPU-5f1c"]),
])
def test_gpus_become_one_device_request(gpus: object, count: int | None, ids: list[str]) -> None:
    (request,) = device_requests(gpus)  # type: ignore[arg-type]
    assert request["Capabilities"] == [["gpu"]]
    assert request["DeviceIDs"] == ids
    if count is not None:
        assert request["Count"] == count


@pytest.mark.parametrize("gpus", [None, 0, ""])
def test_no_gpus_no_device_request(gpus: object) -> None:
    assert device_requests(gpus) == []  # type: ignore[arg-type]
    spec = container_spec(LaneConfig(name="x", launcher="docker", image="i", gpus=gpus,  # type: ignore[arg-type]
                                     command=["srv"]))
    assert "device_requests" not in spec and "ipc_mode" not in spec and "shm_size" not in spec


def test_container_port_comes_from_the_lane_or_the_command() -> None:
    lane = LaneConfig(name="x", launcher="docker", image="i", command=["srv", "--port", "{port}"])
    assert server_argv(lane) == (["srv", "--port", "30000"], 30000)
    lane.port = 8080
    assert server_argv(lane) == (["srv", "--port", "8080"], 8080)
    written = LaneConfig(name="x", launcher="docker", image="i", command=["srv", "--port=9000", "--host", "localhost"])
    assert server_argv(written) == (["srv", "--port=9000", "--host", "0.0.0.0"], 9000)
    other_host = LaneConfig(name="x", launcher="docker", image="i", command=["srv", "--host", "10.0.0.5"])
    assert server_argv(other_host)[0] == ["srv", "--host", "10.0.0.5"]   # a deliberate address is kept


def test_lane_without_image_is_refused_with_the_lane_named() -> None:
    from pytest_glmf.launch.base import BootError

    with pytest.raises(BootError, match=r"lane 'x' .*needs an image .*--glmf-image"):
        container_spec(LaneConfig(name="x", launcher="docker", command=["srv"]))


def test_host_path_for_uses_the_longest_bind_mount() -> None:
    volumes = {"/srv/models": "/models", "/srv/fast/glm": "/models/glm"}
    assert host_path_for("/models/glm/sub", volumes) == Path("/srv/fast/glm/sub")
    assert host_path_for("/models/other", volumes) == Path("/srv/models/other")
    assert host_path_for("/modelsX", volumes) is None
    assert host_path_for("zai-org/GLM-5.3-Flash", volumes) is None


def _model_dir(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"architectures": ["Glm"]}')
    (root / "model-00001.safetensors").write_bytes(b"x" * 1000)
    (root / "sub").mkdir()
    (root / "sub" / "extra.bin").write_bytes(b"y" * 24)
    (root / "tokenizer.json").write_text("{}" * 50)      # not a weight file
    return root


def test_model_provenance_bytes_config_hash_and_git_revision(tmp_path: Path) -> None:
    model = _model_dir(tmp_path / "m")
    git = model / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text("# pack-refs with: peeled\n" + "a" * 40 + " refs/heads/main\n")
    (git / "objects.bin").write_bytes(b"z" * 500)         # inside .git: never counted
    prov = model_dir_provenance(model, declared="/models/m")
    assert prov["readable"] is True
    assert prov["weight_bytes"] == 1024 and prov["weight_files"] == 2
    assert prov["config_sha256"] == hashlib.sha256(b'{"architectures": ["Glm"]}').hexdigest()
    assert prov["revision"] == "a" * 40 and prov["revision_source"].endswith(".git/HEAD")
    assert model_dir_provenance(model, lane_revision="v1.2")["revision"] == "v1.2"


def test_model_provenance_hub_cache_layouts(tmp_path: Path) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    snapshot = _model_dir(tmp_path / "models--zai--glm" / "snapshots" / sha)
    assert model_dir_provenance(snapshot)["revision"] == sha
    with_refs = _model_dir(tmp_path / "plain")
    (with_refs / "refs").mkdir()
    (with_refs / "refs" / "main").write_text(sha + "\n")
    assert model_dir_provenance(with_refs)["revision"] == sha
    local_dir = _model_dir(tmp_path / "local")
    meta = local_dir / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    (meta / "config.json.metadata").write_text(f"{sha}\netag\n1700000000.0\n")
    prov = model_dir_provenance(local_dir)
    assert prov["revision"] == sha and prov["revision_source"].endswith("config.json.metadata")


def test_model_provenance_of_an_unreadable_path_says_so(tmp_path: Path) -> None:
    prov = model_dir_provenance(tmp_path / "absent", declared="/models/absent")
    assert prov["readable"] is False and prov["weight_bytes"] is None and prov["declared"] == "/models/absent"
    assert model_dir_provenance(None, declared="zai-org/GLM")["host_path"] is None
