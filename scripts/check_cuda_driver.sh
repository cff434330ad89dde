#!/usr/bin/env bash
# Before the CUDA wheel is installed: does this machine's NVIDIA driver run the CUDA version the
# torch build needs? A CUDA 13 build needs an R580+ driver; many cloud GPUs run R535-R570 (CUDA 12.x),
# and there the first CUDA call would fail deep inside libtorch. Exits 1 with what to do on a
# mismatch; 0 when the driver is new enough, or when there is no driver (a CPU machine compiling the
# CUDA build only, as CI's cuda-check does).
#   scripts/check_cuda_driver.sh NEEDED REQUIREMENT      e.g. 13.0 torch==2.14.1
set -uo pipefail
needed=${1:?usage: check_cuda_driver.sh NEEDED_CUDA_VERSION REQUIREMENT}
req=${2:-torch}
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "[setup] no nvidia-smi: no NVIDIA driver here, the CUDA build is compiled only"
  exit 0
fi
header=$(nvidia-smi 2>/dev/null)
have=$(printf '%s\n' "$header" | grep -o 'CUDA Version: *[0-9][0-9.]*' | head -1 | grep -o '[0-9][0-9.]*$')
driver=$(printf '%s\n' "$header" | grep -o 'Driver Version: *[0-9][0-9.]*' | head -1 | grep -o '[0-9][0-9.]*$')
if [ -z "$have" ]; then
  echo "[setup] nvidia-smi printed no CUDA version (no GPU visible?): not checking the driver"
  exit 0
fi
# version_ge A B: A >= B, component by component
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]; }
if version_ge "$have" "$needed"; then
  echo "[setup] NVIDIA driver ${driver:-?} runs CUDA $have: enough for $req (CUDA $needed)"
  exit 0
fi
cat >&2 <<MSG
setup.sh: this machine's NVIDIA driver ${driver:-?} runs CUDA up to $have, but $req is a CUDA $needed build
(it needs a driver for CUDA $needed or newer; CUDA 13 needs R580+). Nothing was installed. Either:
  - pick a torch build for this driver, e.g. for CUDA 12.6:
      TORCH_CUDA_REQ='torch==2.14.1 --index-url https://download.pytorch.org/whl/cu126' TORCH_CUDA_NEEDS=12.6 make ladder
  - or use an unpacked libtorch built for CUDA $have or older:  Torch_DIR=/path/to/libtorch/share/cmake/Torch make ladder
  - or update the NVIDIA driver.
MSG
exit 1
