#!/usr/bin/env bash
# One GPU pass of tests/gpu (docs/gpu.md): run from the root of a checkout that carries the bundle's last
# part (.gpu/part4, .gpu/kit; parts 1-3 stashed by earlier calls) and this branch's plugin and tests copied
# into .gpurun/ (pytest_glmf/, tests/gpu/). Boots vLLM, runs each test in priority order while time is left,
# and leaves its log and a tarball of what the tests measured under $OUT.
set -o pipefail
export PYTHONUNBUFFERED=1
t0=$(date +%s); say() { echo "== $(( $(date +%s) - t0 )) s: $* (load $(cut -d' ' -f1-3 /proc/loadavg))"; }
bash .gpu/kit/stash .gpu/part4 && bash .gpu/kit/up || exit 1
source .gpu/kit/env.sh
cd .gpurun || exit 1
export PYTHONPATH=$PWD:$PYTHONPATH GLMF_GPU_URL=$GPU_URL GLMF_GPU_BOOT_LOG=$GPU_LOGS/server.log \
  GLMF_GPU_MODEL=$GPU_MODEL GLMF_GPU_SERVED=$GPU_SERVED_NAME GLMF_GPU_OUT=/tmp/gpu-out
mkdir -p $GLMF_GPU_OUT
budget=${BUDGET_S:-560}
for step in "rows_are_valid 90" "seats_from 30" "interleaved 200" "capacity_answers 170" "ready_made 160" "burst_against 120"; do
  set -- $step
  left=$(( budget - ($(date +%s) - t0) ))
  [ "$left" -gt 40 ] || { say "skipped $1: $left s left"; continue; }
  say "$1"
  # -W: a checkout's pyproject may turn warnings into errors; vLLM's and torch's imports warn
  timeout $(( $2 < left ? $2 : left )) python3 -m pytest tests/gpu -p no:cacheprovider -q -rA -k "$1" \
    -W ignore::DeprecationWarning -W ignore::FutureWarning -W ignore::UserWarning 2>&1 | tail -40
done
say "done"
uptime; nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv
tar czf $OUT/gpu-out.tgz -C $GLMF_GPU_OUT . && cp $GPU_LOGS/server.log $OUT/server.log
