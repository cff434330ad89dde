#!/usr/bin/env bash
# Builds here, with no GPU, the CUDA gpt2bench and its tests as the lent GPU machine builds them: with the device
# kit's own build.sh (its CMake configure, its Debian packages unpacked into /tmp/deps), against torch
# 2.11.0+cu130 (the image's; its python3 first on PATH, as there), into .device-prebuilt/ for the GPU runbook to
# carry: scripts/gpu_session.sh then runs them instead of building (1.5-4 minutes of a 15-minute lease spent on
# nvcc and g++), where they were built from the very files it finds and they start there; else it builds.
#
# Use (a clean checkout: the binaries are HEAD's, the sha every run records; the kit copied in, as for the lease):
#   cp -r ../shared/device .device-kit
#   scripts/prebuild_gpu.sh       -> .device-prebuilt/{gpt2bench,gpt2bench_tests,sources.sha256,build.txt}
# then carry .device-prebuilt with .device-kit. PREBUILD_TORCH_REQ picks another torch (the device's own).
#
# The sources are built in a clone at SRC, a fixed path: what the binaries find at run time through paths compiled
# in (the model presets, the Python reference, the report step, the test binaries' paths to gpt2bench) is under it,
# and on the GPU machine gpu_session.sh links SRC to its checkout and puts the binaries in build-cuda/. One
# difference from the lent machine's build, on purpose: Google Benchmark from its source where scripts/setup.sh
# fetched it (built Release), where the lent machine has only Debian's (built as DEBUG).
set -euo pipefail
case "${1:-}" in
"") ;;
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "prebuild_gpu: no arguments expected, got '$1' (--help says what it does)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SRC=${PREBUILD_SRC:-/tmp/gpt2bench-prebuilt}
OUTDIR=$root/.device-prebuilt
TORCH_REQ=${PREBUILD_TORCH_REQ:-torch==2.11.0}
venv=$root/.venv-prebuilt
KIT=$root/.device-kit

[ -z "$(git status --porcelain --untracked-files=no)" ] || {
  echo "prebuild_gpu: the checkout has uncommitted changes; commit them first (the binaries must be HEAD's)" >&2
  exit 2
}
[ -x "$KIT/build.sh" ] || {
  echo "prebuild_gpu: copy ../shared/device to .device-kit first (its build.sh builds here as on the lease)" >&2
  exit 2
}
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "prebuild_gpu: no nvcc (the CUDA toolkit at /usr/local/cuda): the kernels cannot be compiled here" >&2
  exit 2
}
export PATH=/usr/local/cuda/bin:$PATH

# The Debian packages and Google Benchmark's source (the CPU set-up's; idempotent), then torch as on the device.
scripts/setup.sh cpu >/dev/null
reqs="$TORCH_REQ"
if [ "$(cat "$venv/.gpt2bench-requirements" 2>/dev/null)" != "$reqs" ]; then
  echo "prebuild_gpu: installing $reqs into .venv-prebuilt (a CUDA wheel, several GB)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "$reqs" numpy >"$venv.log" 2>&1 || { tail -20 "$venv.log" >&2; exit 1; }
  echo "$reqs" >"$venv/.gpt2bench-requirements"
fi
torch_version=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')

rm -rf "$SRC"
git clone -q "$root" "$SRC"
scripts/fetch_cudnn_frontend.sh "$venv/bin/python"  # our cuDNN attention graphs' headers
mkdir -p "$SRC/third_party" && cp -r third_party/cudnn-frontend "$SRC/third_party/"
[ -d third_party/benchmark-1.7.1 ] && cp -r third_party/benchmark-1.7.1 "$SRC/third_party/"
echo "prebuild_gpu: building $(git -C "$SRC" rev-parse --short=12 HEAD) against torch $torch_version in $SRC with" \
  "the kit's build.sh (5-10 minutes on 2 cores: 5 min 39 s on a Zen 4, 9 min 47 s on a Zen 3; its log: $SRC/device-build.log)"
(cd "$SRC" && PATH="$venv/bin:$PATH" OUT="$SRC" TARGETS=gpt2bench_tests "$KIT/build.sh" true) >&2 || exit 1

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"
cp "$SRC/build-cuda/gpt2bench" "$SRC/build-cuda/gpt2bench_tests" "$OUTDIR/"
(cd "$SRC" && git ls-files -z | xargs -0 sha256sum) >"$OUTDIR/sources.sha256"
{
  echo "source_dir $SRC"
  echo "git $(git -C "$SRC" rev-parse HEAD)"
  echo "torch $torch_version"
  echo "built $(date -u +%FT%TZ) on $(uname -m), $(nvcc --version | grep release)"
} >"$OUTDIR/build.txt"
echo "prebuild_gpu: .device-prebuilt ready ($(du -sh "$OUTDIR" | cut -f1)); carry it with .device-kit"
