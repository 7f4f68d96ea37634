#!/usr/bin/env bash
# The GPU stage with a real model (docs/gpu.md, "The real model: the pass"; first run 2026-12-06 on an H100).
#
#   bash tests/gpu/real-pass.sh oracle       the oracle, SmolLM2-135M-Instruct in bf16: boot, template, tools (hermes),
#                                            curve, capacity, the drift reference; then the same model with n-gram
#                                            speculation: acceptance per class (length, per position, at 1 and 8 users)
#   bash tests/gpu/real-pass.sh candidates   drift of online FP8 and the two NVFP4-grid checkpoints against that reference
#
# Run from the root of this checkout on the GPU machine, after the carries docs/gpu.md lists (the kit's bundle parts
# 1-3 stashed, the model's parts stashed with tests/gpu/real/model); the last part of the bundle and the kit ride
# with this command (.gpu/part4, .gpu/kit). Each stage fits one 10-minute call: a step that would not fit in what is
# left of BUDGET_S (default 560) is skipped and named, as is one SKIP names by its first or last word (SKIP="capacity
# nvfp4-mlp"). Everything measured lands under $OUT (or ./gpu-out): the
# result files (with each gate's wall and GPU time, `cost`), the boot logs, the CLIs' outputs, and pass.log.
set -o pipefail
stage=${1:?usage: real-pass.sh oracle|candidates}
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"; exec > >(tee -a "$out/pass.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s); budget=${BUDGET_S:-560}
say() { echo "== $(( $(date +%s) - t0 )) s: $* (load $(cut -d' ' -f1-3 /proc/loadavg))"; }
left() { echo $(( budget - ($(date +%s) - t0) )); }
fits() {   # fits SECONDS STEP: it runs if it fits what is left of BUDGET_S and SKIP names neither its first nor last word
  case " ${SKIP:-} " in *" ${2%% *} "*|*" ${2##* } "*) say "SKIPPED $2: named in SKIP"; return 1 ;; esac
  [ "$(left)" -gt "$1" ] || { say "SKIPPED $2: $(left) s left, it needs about $1"; return 1; }; }
[ -d .gpu/part4 ] && bash .gpu/kit/stash .gpu/part4
bash tests/gpu/real/model setup || exit 1
export GPU_SERVED_NAME=smollm2-135m-instruct
source .gpu/kit/env.sh
repo=$PWD; export PYTHONPATH=$repo:$PYTHONPATH
glmf() { python3 -m pytest_glmf.cli "$@"; }
real=$GPU_ROOT/real
# bf16 is the oracle's dtype; the hermes parser reads the tool-aware template convert_model.py baked in; 4096 tokens
# of context hold the curve's default workload (a ~2,400-token briefing + 384 tokens: 2048 refused every request)
common=(--max-model-len 4096 --dtype bfloat16 --seed 0 --enable-auto-tool-choice --tool-call-parser hermes)
ngram='{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,"prompt_lookup_max":4}'

serve() {   # serve NAME [VLLM ARGS...]: a fresh server, its boot log kept as $out/NAME-boot.log
  local name=$1; shift
  bash .gpu/kit/down >/dev/null 2>&1 || true
  say "boot $name: $*"
  bash .gpu/kit/up "${common[@]}" "$@" || { cp "$GPU_LOGS/server.log" "$out/$name-boot.log"; return 1; }
  cp "$GPU_LOGS/server.log" "$out/$name-boot.log"
}

suites() {   # suites LANE SPEC -k EXPR: the ready-made suites attached, result file under $out/results
  local lane=$1 spec=$2; shift 2
  cat > "$out/lanes.yaml" <<EOF
lanes:
  $lane: {launcher: attach, engine: vllm, url: '$GPU_URL', boot_log: '$GPU_LOGS/server.log', spec: $spec}
EOF
  # from $out, as a user's project would: this checkout's pytest settings (warnings as errors) stay out of it
  (cd "$out" && python3 -m pytest -p pytest_glmf.plugin --glmf-lanes "$out/lanes.yaml" --glmf-lane "$lane" \
    --glmf-thresholds "$repo/tests/gpu/real-thresholds.yaml" --glmf-results "$out/results" -rA -q -p no:cacheprovider \
    -W ignore::DeprecationWarning -W ignore::FutureWarning -W ignore::UserWarning "$@" 2>&1 | tail -80)
}

case "$stage" in
  oracle)
    serve oracle || exit 1
    fits 120 "drift reference" && { say "drift reference"
      glmf drift reference --url "$GPU_URL" --out "$real/reference.json" --lane real-oracle --model-dir "$GPU_MODEL"
      cp "$real/reference.json" "$out/"; }
    fits 200 "suites boot, template, tools, curve" && { say "suites"
      suites real-oracle none -k "boot or seats or template or tools or curve"; }
    fits 60 "capacity" && { say "capacity"
      glmf capacity --url "$GPU_URL" --slo per_user_tok_s=150,ttft_s=2 --runs 1 --max-users 512 | tail -30; }
    fits 150 "acceptance" && {
      # per-request acceptance when this vLLM has it (0.32 does; the kit's 0.26 may not): then also at 8 users
      per=(); python3 -m vllm.entrypoints.openai.api_server --help=all 2>/dev/null | grep -q -- --per-request-spec-decode-metrics \
        && per=(--per-request-spec-decode-metrics summary)
      serve ngram --speculative-config "$ngram" "${per[@]}" && {
        say "acceptance (per-request metrics: ${per[*]:-not in this vLLM})"
        suites real-ngram ngram -k acceptance
        glmf accept --url "$GPU_URL" --json "$out/accept-1.json" | tail -15
        [ ${#per[@]} -gt 0 ] && glmf accept --url "$GPU_URL" --users 8 --json "$out/accept-8.json" | tail -15; } ; }
    ;;
  candidates)
    [ -f "$real/reference.json" ] || { echo "no $real/reference.json: run the oracle stage first on this machine" >&2; exit 2; }
    for cand in "fp8 --quantization fp8" "nvfp4-mlp --model $real/nvfp4" "nvfp4-all --model $real/all4"; do
      set -- $cand; name=$1; shift
      fits 100 "drift of $name" || continue
      serve "$name" --enforce-eager "$@" || continue
      glmf drift score --url "$GPU_URL" --reference "$real/reference.json" --out "$out/drift-$name.json" --label "$name"
    done
    say "drift compare"
    # compare takes one or two candidates: the two of one format family side by side, the all-layer grid alone
    { [ -f "$out/drift-fp8.json" ] && [ -f "$out/drift-nvfp4-mlp.json" ] \
        && glmf drift compare "$real/reference.json" "$out/drift-fp8.json" "$out/drift-nvfp4-mlp.json"
      [ -f "$out/drift-nvfp4-all.json" ] && glmf drift compare "$real/reference.json" "$out/drift-nvfp4-all.json"
    } | tee "$out/drift-compare.txt"
    ;;
  *) echo "real-pass.sh: unknown stage '$stage' (oracle or candidates)" >&2; exit 2 ;;
esac
bash .gpu/kit/down >/dev/null 2>&1 || true
say "done: $stage"
uptime; nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv
