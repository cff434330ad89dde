#!/usr/bin/env bash
# Our CUDA kernels' registers, stack and local memory for each architecture built, read from the compiled
# objects (cuobjdump): exits 1 where one uses stack or local memory (spilled registers, or an array the compiler
# could not keep in registers), which a change to a kernel's body can cause without any test failing; where a
# kernel built to move 16-byte packs (its first template arguments T, 16 / sizeof(T); adamw_kernel's and
# quantize_both_kernel's tiles) lacks 16-byte global loads and stores in its sm_90 code; and where the loads
# that the held residual norm, the bias-GELU backward, the classifier and the FP8 quantization issue together
# stand apart there.
#   scripts/kernel_resources.sh [BUILD_DIR] [--list]     (default build-cuda; --list prints every kernel, and each
#   one's sm_90 SASS instructions: its static size, what a change to its body added or took away)
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
sass=$(for o in $objs; do "$tool" --dump-sass -arch sm_90 "$o"; done)  # CMake builds 80 and 90: the checks read 90's
if [ "$list" = --list ]; then
  echo "arch registers stack local kernel"; echo "$table"
  echo "sm_90 instructions kernel"
  echo "$sass" | awk '
    /Function :/ { if (fn != "") print n, fn; fn = $3; n = 0 }
    /^ +\/\*[0-9a-f]+\*\// { n++ }
    END { if (fn != "") print n, fn }' | c++filt | sed -E 's/\(anonymous namespace\):://g; s/gpt2::kernels:://g; s/\(.*//'
fi
bad=$(echo "$table" | awk '$3 != 0 || $4 != 0')
n=$(echo "$table" | grep -c .)
if [ -n "$bad" ]; then
  echo "kernel_resources: kernels using stack or local memory (arch registers stack local kernel):"; echo "$bad"
  exit 1
fi

# sm_90 SASS: each packed kernel (the rule in awk), "wide" where it has a 16-byte global
# load and store, else "narrow".
packed=$(echo "$sass" | awk '
  /Function :/ { if (fn != "") print fn, ld, st; fn = $3; ld = st = 0 }
  /LDG\.E\.128/ { ld = 1 } /STG\.E\.128/ { st = 1 }
  END { if (fn != "") print fn, ld, st }' | c++filt | sed -E 's/\(anonymous namespace\):://g; s/gpt2::kernels:://g; s/c10:://g' |
  awk '/^void adamw_kernel</ || /^void quantize_both_kernel</ || /<(Half|BFloat16), 8[,>]/ || /<float, 4[,>]/ || /<double, 2[,>]/ {
         wide = $(NF - 1) && $NF; sub(/\(.*/, ""); print (wide ? "wide" : "narrow"), $0 }')
narrow=$(echo "$packed" | sed -n 's/^narrow //p')
if [ -z "$packed" ]; then
  echo "kernel_resources: no packed kernel found in the sm_90 code (a name pattern here out of date?)"
  exit 1
fi
if [ -n "$narrow" ]; then
  echo "kernel_resources: kernels meant to move 16-byte packs without a 16-byte global load and store (sm_90):"
  echo "$narrow"
  exit 1
fi
# sm_90 SASS: where a kernel loads several packs of a row before using the first, the loads stand together (their
# round trips to memory overlap). ptxas moves a load down to its first use within a branch-free block: this sees
# it undone. Each: the kernel, how many of its first 16-byte loads, within how many instructions.
bursts=$(echo "$sass" | awk '
  /Function :/ { if (fn != "") print fn, at; fn = $3; n = 0; at = "" }
  /^ +\/\*[0-9a-f]+\*\// { n++; if ($0 ~ /LDG\.E\.128/) at = at (at == "" ? "" : ",") n }
  END { if (fn != "") print fn, at }' | c++filt | sed -E 's/\(anonymous namespace\):://g; s/gpt2::kernels:://g; s/c10:://g' |
  awk 'function check(k, w,   a, m, name) { m = split($NF, a, ","); seen++; name = $0; sub(/\(.*/, "", name)
         if (m < k || a[k] - a[1] > w)
           print "  " name ": 16-byte loads at instructions " $NF " (its first " k " within " w " expected)" }
       /add_ln_forward_kernel<BFloat16, 8, 3, true>/ { check(6, 48) }
       /add_ln_backward_kernel<BFloat16, 8, 3, true>/ { check(6, 48) }
       /bias_gelu_backward_kernel<BFloat16, 8>/ { check(4, 48) }
       /softmax_xent_backward_kernel<BFloat16, 8, 512, false, true>/ { check(2, 8) }
       /quantize_both_kernel<BFloat16, Float8_e4m3fn>/ { check(2, 16) }
       END { if (seen != 5) print "  " seen + 0 " of the 5 kernels found (a name out of date?)" }')
if [ -n "$bursts" ]; then
  echo "kernel_resources: loads meant to be issued together are apart in the sm_90 code:"; echo "$bursts"
  exit 1
fi
echo "kernel_resources: $n kernels (all architectures) in registers, no stack or local memory; $(echo "$packed" | grep -c .) packed" \
  "kernels with 16-byte global loads and stores on sm_90, the held residual norm's, the bias-GELU backward's, the" \
  "classifier's and the FP8 quantization's loads in bursts ($tool)"
