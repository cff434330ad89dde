#!/usr/bin/env bash
# cuDNN's frontend (header-only, MIT): the include/ of its PyPI wheel into third_party/cudnn-frontend, for our own
# cuDNN attention graphs (kernels/cuda/cudnn_attention.cpp). Idempotent; run by scripts/setup.sh cuda and
# scripts/prebuild_gpu.sh. $1: a python with pip (default python3). Without it the CUDA build goes on without them.
set -euo pipefail
version=1.32.0
dest=third_party/cudnn-frontend
[ "$(cat "$dest/VERSION" 2>/dev/null)" = "$version" ] && [ -f "$dest/include/cudnn_frontend.h" ] && exit 0
python=${1:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip download -q --no-deps "nvidia-cudnn-frontend==$version" -d "$tmp" >"$tmp/pip.log" 2>&1 ||
  { echo "fetch_cudnn_frontend: pip could not download nvidia-cudnn-frontend==$version:" >&2; tail -3 "$tmp/pip.log" >&2; exit 1; }
rm -rf "$dest"
"$python" - "$tmp" "$dest" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
echo "$version" >"$dest/VERSION"
