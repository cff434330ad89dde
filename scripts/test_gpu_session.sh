#!/usr/bin/env bash
# ctest GpuSession: scripts/gpu_session.sh's mechanics, with a fake device kit and fake binaries (no GPU here):
# usage errors, a failing _CUDA test failing the stage with its line shown, and the ladder stage's profile
# (gpu-124m plus an 8-minute budget) and tarred run directory under $OUT.
set -u
SCRIPT="$(cd "$(dirname "$0")" && pwd)/gpu_session.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() {  # check WHAT CONDITION...
  local what=$1; shift
  if "$@"; then :; else echo "FAIL: $what"; fail=1; fi
}

cd "$T" && mkdir -p checkout/.device-kit checkout/build-cuda checkout/profiles out && cd checkout
out=$(OUT="$T/out" "$SCRIPT" 2>&1); rc=$?
check "no stage: exit 2 with the usage" [ $rc -eq 2 ]
check "no stage: usage shown" grep -q "usage: OUT=DIR scripts/gpu_session.sh tests|ladder" <<<"$out"
out=$("$SCRIPT" tests 2>&1); rc=$?
check "no OUT: exit 2" [ $rc -eq 2 ]
check "no OUT: said" grep -q "set OUT" <<<"$out"
out=$(OUT="$T/out" "$SCRIPT" tests 2>&1); rc=$?
check "no kit: exit 2" [ $rc -eq 2 ]
check "no kit: said" grep -q "copy ../shared/device to .device-kit" <<<"$out"

# the fakes: the kit's build.sh runs its command; the test binary fails one _CUDA test; gpt2bench ladder writes
# a run directory
printf '#!/bin/bash\n[ "$#" -gt 0 ] && exec "$@"\n' >.device-kit/build.sh
cat >build-cuda/gpt2bench_tests <<'EOF'
#!/bin/bash
echo "[  PASSED  ] 3 tests."
case "$*" in *KernelsCuda*) exit 0 ;; esac
echo "[  FAILED  ] CudaTest.Something_CUDA"; exit 1
EOF
cat >build-cuda/gpt2bench <<'EOF'
#!/bin/bash
[ "$1" = doctor ] && { echo "doctor: fake"; exit 0; }
while [ $# -gt 0 ]; do case "$1" in --out) out=$2; shift ;; --profile) prof=$2; shift ;; esac; shift; done
mkdir -p "$out" && cp "$prof" "$out/profile.yaml" && echo '{"rungs": []}' >"$out/rungs.json"
echo "ladder: done"
EOF
chmod +x .device-kit/build.sh build-cuda/gpt2bench_tests build-cuda/gpt2bench
printf 'name: gpu-124m\nbatch: 8\n' >profiles/gpu-124m.yaml

out=$(OUT="$T/out" "$SCRIPT" tests 2>&1); rc=$?
check "tests: a failing _CUDA test fails the stage" [ $rc -eq 1 ]
check "tests: the failing test's line shown" grep -q "FAILED  \] CudaTest.Something_CUDA" <<<"$out"
check "tests: logs under OUT" [ -s "$T/out/kernels-cuda.log" -a -s "$T/out/all-cuda.log" -a -s "$T/out/doctor.txt" ]
check "tests: the machine's versions under OUT" [ -f "$T/out/machine-tests.txt" ]

out=$(OUT="$T/out" "$SCRIPT" ladder 2>&1); rc=$?
check "ladder: exit 0" [ $rc -eq 0 ]
check "ladder: its output logged" grep -q "ladder: done" "$T/out/ladder.log"
check "ladder: gpu-124m with an 8-minute budget" grep -q "^budget_minutes: 8" "$T/out/gpu-124m-8min.yaml"
tgz=$(ls "$T"/out/*-gpu-124m.tgz 2>/dev/null | head -1)
check "ladder: the run directory tarred under OUT" [ -n "$tgz" ]
[ -n "$tgz" ] && check "ladder: the tarball holds rungs.json and the profile as run" \
  bash -c "tar -tzf '$tgz' | grep -q 'rungs.json' && tar -xzOf '$tgz' --wildcards '*/profile.yaml' | grep -q 'name: gpu-124m'"

[ $fail -eq 0 ] && echo "gpu_session: usage errors, a failing test's stage, the ladder's profile and tarball: ok"
exit $fail
