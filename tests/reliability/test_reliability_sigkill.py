"""A pytest process killed with SIGKILL (no handler runs) still takes its server down with it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil


def test_server_dies_with_a_sigkilled_pytest(pytester):
    pytester.makepyfile(test_wait="""
        import time
        def test_wait(glmf_server):
            print("PID", glmf_server.provenance["pid"], flush=True)
            time.sleep(120)
    """)
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  tiny: {launcher: sim, model: m, time_scale: 0.01, boot_timeout_s: 60}\n")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider", "--glmf-lanes", str(lanes),
                             "--glmf-lane", "tiny", "test_wait.py"], cwd=pytester.path, stdout=subprocess.PIPE, text=True)
    server_pid = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and server_pid is None:
        line = proc.stdout.readline()
        if "PID " in line:
            server_pid = int(line.split("PID ")[1].split()[0])
    assert server_pid is not None and psutil.pid_exists(server_pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    try:
        psutil.Process(server_pid).wait(timeout=20)   # SIGTERM from the kernel (PR_SET_PDEATHSIG)
    except psutil.NoSuchProcess:
        pass
    assert not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE
