"""pytest-glmf's hooks as a team's conftest.py implements them (copy what you need into yours): the
GPUs' serial numbers in every result's provenance, and the CI run that made it in the result file.
`glmf report RESULT --markdown R.md` lists the provenance, `gpu_serial` included."""
import os
import shutil
import subprocess


def gpu_serials():
    """The serial number of each GPU nvidia-smi sees, in its order ([] on a host without one)."""
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", "--query-gpu=serial", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True, timeout=10)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def pytest_glmf_update_provenance(config, lane, provenance):
    """Once per lane, when its server is up: which physical GPUs served it."""
    serials = gpu_serials()
    if serials:
        provenance["gpu_serial"] = ", ".join(serials)


def pytest_glmf_update_result(config, lane, result):
    """When the lane's result file is written: the CI run it belongs to, under a key of our own."""
    result["ci_run"] = {"id": os.environ.get("GITHUB_RUN_ID", "local"), "lane": lane.name}
