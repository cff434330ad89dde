#!/usr/bin/env bash
# ctest SetupDriverCheck: scripts/check_cuda_driver.sh against faked nvidia-smi outputs (the header
# lines as an R535 machine and an R580 machine print them) and against no driver at all.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$here/expect.sh"
fake() {  # fake DRIVER CUDA: an nvidia-smi printing that header
  mkdir -p "$tmp/$2"
  printf '#!/bin/sh\necho "| NVIDIA-SMI %s             Driver Version: %s     CUDA Version: %s     |"\n' "$1" "$1" "$2" \
    > "$tmp/$2/nvidia-smi"
  chmod +x "$tmp/$2/nvidia-smi"
}
fake 535.183.01 12.2
fake 580.65.06 13.0
fake 590.10 13.1
expect 1 "runs CUDA up to 12.2, but torch==2.14.1 is a CUDA 13.0 build" -- \
  env PATH="$tmp/12.2:/usr/bin:/bin" "$here/check_cuda_driver.sh" 13.0 torch==2.14.1
expect 1 "TORCH_CUDA_REQ=" -- env PATH="$tmp/12.2:/usr/bin:/bin" "$here/check_cuda_driver.sh" 13.0 torch==2.14.1
expect 1 "Torch_DIR=" -- env PATH="$tmp/12.2:/usr/bin:/bin" "$here/check_cuda_driver.sh" 13.0 torch==2.14.1
expect 0 "driver 580.65.06 runs CUDA 13.0" -- env PATH="$tmp/13.0:/usr/bin:/bin" "$here/check_cuda_driver.sh" 13.0 torch==2.14.1
expect 0 "runs CUDA 13.1" -- env PATH="$tmp/13.1:/usr/bin:/bin" "$here/check_cuda_driver.sh" 13.0 torch==2.14.1
expect 0 "runs CUDA 12.2: enough" -- env PATH="$tmp/12.2:/usr/bin:/bin" "$here/check_cuda_driver.sh" 12.2 torch
expect 0 "no NVIDIA driver here" -- env PATH="/nonexistent" /bin/bash "$here/check_cuda_driver.sh" 13.0 torch==2.14.1
[ $fail = 0 ] && echo "driver check: refuses a CUDA 12.2 driver for a CUDA 13.0 build, passes 13.0/13.1, skips without a driver"
exit $fail
