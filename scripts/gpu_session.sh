#!/usr/bin/env bash
# A lent GPU's runbook (README: Running on a lent GPU): one stage a device call, each within its 10-minute limit,
# everything it writes under $OUT (logs, the tarred run directory, the machine's versions). From the checkout's
# root, with the device kit copied in and carried (cp -r ../shared/device .device-kit; ignored via
# .git/info/exclude):
#   scripts/gpu_session.sh tests    build gpt2bench and its tests; our kernels' tests, then every _CUDA test
#   scripts/gpu_session.sh ladder   gpu-124m whole (its references, extra rungs and breakdown passes) under an
#                                   8-minute time budget; the run directory tarred into $OUT, ready for
#                                   reports/reference/<device>/ exactly as written
# The first call on a fresh machine builds (1.5-4 minutes); a warm one reuses the build.
set -u
stage=${1:-}
case "$stage" in tests | ladder) ;; *)
  echo "usage: OUT=DIR scripts/gpu_session.sh tests|ladder" >&2
  exit 2
  ;;
esac
[ -n "${OUT:-}" ] || { echo "gpu_session: set OUT to the folder that comes back" >&2; exit 2; }
KIT=.device-kit
[ -x "$KIT/build.sh" ] || { echo "gpu_session: copy ../shared/device to $KIT first (and carry it)" >&2; exit 2; }
mkdir -p "$OUT"
{
  date -u +%FT%TZ
  git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  nvcc --version 2>&1 | grep release
} >"$OUT/machine-$stage.txt"
cat "$OUT/machine-$stage.txt"

if [ "$stage" = tests ]; then
  TARGETS=gpt2bench_tests "$KIT/build.sh" true || exit 1
  build-cuda/gpt2bench doctor >"$OUT/doctor.txt" 2>&1
  rc=0
  build-cuda/gpt2bench_tests --gtest_filter='KernelsCuda.*' >"$OUT/kernels-cuda.log" 2>&1 || rc=1
  build-cuda/gpt2bench_tests --gtest_filter='*_CUDA' >"$OUT/all-cuda.log" 2>&1 || rc=1
  grep -hE '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/kernels-cuda.log" "$OUT/all-cuda.log"
  exit $rc
fi

# ladder: gpu-124m as committed, its time budget set to fit one call
run="runs/$(date -u +%Y%m%d-%H%M%S)-gpu-124m"
profile="$OUT/gpu-124m-8min.yaml"
{ cat profiles/gpu-124m.yaml; echo "budget_minutes: 8   # scripts/gpu_session.sh: one 10-minute device call"; } >"$profile"
"$KIT/build.sh" build-cuda/gpt2bench ladder --profile "$profile" --out "$run" 2>&1 | tee "$OUT/ladder.log"
rc=${PIPESTATUS[0]}
[ -d "$run" ] && tar -czf "$OUT/$(basename "$run").tgz" "$run"
exit "$rc"
