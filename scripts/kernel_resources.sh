#!/usr/bin/env bash
# Our CUDA kernels' registers, stack and local memory for each architecture built, read from the compiled
# objects (cuobjdump): exits 1 where one uses stack or local memory (spilled registers, or an array the compiler
# could not keep in registers), which a change to a kernel's body can cause without any test failing.
#   scripts/kernel_resources.sh [BUILD_DIR] [--list]     (default build-cuda; --list prints every kernel)
set -uo pipefail
build=${1:-build-cuda}
list=${2:-}
objs=$(ls "$build"/CMakeFiles/gpt2_kernels_cuda.dir/kernels/cuda/*.cu.o 2>/dev/null)
[ -n "$objs" ] || { echo "kernel_resources: no kernel objects under $build (build it first: make cuda-check)" >&2; exit 2; }
tool=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump \
  .venv-cuda/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump 2>/dev/null | head -1)
[ -n "$tool" ] || { echo "kernel_resources: no cuobjdump (CUDA toolkit or the CUDA venv's triton): not checked"; exit 0; }
table=$(for o in $objs; do "$tool" --dump-resource-usage "$o"; done | awk '
  /arch = sm_/ { arch = $3 }
  /Function/ { fn = $2; sub(/:$/, "", fn); getline
               reg = $0; sub(/.*REG:/, "", reg); sub(/ .*/, "", reg)
               st = $0; sub(/.*STACK:/, "", st); sub(/ .*/, "", st)
               lo = $0; sub(/.*LOCAL:/, "", lo); sub(/ .*/, "", lo)
               print arch, reg, st, lo, fn }' | c++filt | sed -E 's/\(anonymous namespace\):://g; s/\(.*//; s/ void / /')
[ "$list" = --list ] && { echo "arch registers stack local kernel"; echo "$table"; }
bad=$(echo "$table" | awk '$3 != 0 || $4 != 0')
n=$(echo "$table" | grep -c .)
if [ -n "$bad" ]; then
  echo "kernel_resources: kernels using stack or local memory (arch registers stack local kernel):"; echo "$bad"
  exit 1
fi
echo "kernel_resources: $n kernels (all architectures) in registers, no stack or local memory ($tool)"
