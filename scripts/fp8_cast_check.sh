#!/usr/bin/env bash
# Builds and runs scripts/fp8_cast_check.cpp (the sm_89+ FP8 cast against c10's, every float) with the CUDA
# toolkit's headers and the CUDA venv's libtorch headers: exits 1 where they differ.
#   scripts/fp8_cast_check.sh [CUDA_ROOT]     (default /usr/local/cuda)
set -euo pipefail
cuda=${1:-/usr/local/cuda}
torch=$(ls -d .venv-cuda/lib/python3*/site-packages/torch/include 2>/dev/null | head -1 || true)
[ -f "$cuda/include/cuda_fp8.h" ] || { echo "fp8_cast_check: no $cuda/include/cuda_fp8.h" >&2; exit 2; }
[ -n "$torch" ] || { echo "fp8_cast_check: no .venv-cuda torch headers (make cuda-check sets it up)" >&2; exit 2; }
bin=build-cuda/fp8_cast_check
"${CXX:-c++}" -O2 -std=c++17 -pthread -isystem "$cuda/include" -isystem "$torch" scripts/fp8_cast_check.cpp -o "$bin"
"$bin"
