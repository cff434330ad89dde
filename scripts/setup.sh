#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine: system packages, the project's Python virtual
# environment with the PyTorch wheel, and a configured CMake build. A second run installs nothing.
#   scripts/setup.sh cpu    -> .venv       (torch==2.13.0, CPU)   + build/
#   scripts/setup.sh cuda   -> .venv-cuda  (torch==2.14.1, CUDA 13) + build-cuda/
#   scripts/setup.sh asan   -> .venv                                 + build-asan/ (ASan + UBSan)
#   scripts/setup.sh fuzz   -> clang, libFuzzer                      + build-fuzz/ (no libtorch)
# TORCH_CPU_REQ / TORCH_CUDA_REQ pick another torch requirement (TORCH_CUDA_NEEDS: the CUDA version
# that build needs, checked against the driver first); Torch_DIR builds against an unpacked libtorch.
set -euo pipefail
flavor=${1:-cpu}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

extra_cmake=()
case "$flavor" in
  cpu)  venv=.venv;      build=build;      torch_req=${TORCH_CPU_REQ:-torch==2.13.0}; cuda=OFF ;;
  cuda) venv=.venv-cuda; build=build-cuda; torch_req=${TORCH_CUDA_REQ:-torch==2.14.1}; cuda=ON ;;
  asan) venv=.venv;      build=build-asan; torch_req=${TORCH_CPU_REQ:-torch==2.13.0}; cuda=OFF
        extra_cmake=(-DGPT2BENCH_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  fuzz) venv="";         build=build-fuzz ;;
  *) echo "setup.sh: unknown flavour '$flavor' (expected cpu, cuda, asan or fuzz)" >&2; exit 2 ;;
esac

say() { echo "[setup] $*"; }

# --- Debian packages --------------------------------------------------------------------------
# chromium: the report tests open the HTML report headless and check it renders. libtcmalloc-minimal4: the CPU
# build's host allocator (docs/development.md: Host allocator).
pkgs=(g++ make libbenchmark-dev libyaml-cpp-dev libgtest-dev nlohmann-json3-dev libgloo-dev libtcmalloc-minimal4 chromium)
command -v cmake >/dev/null || pkgs+=(cmake)
command -v ninja >/dev/null || pkgs+=(ninja-build)
[ "$flavor" = fuzz ] && pkgs+=(clang libclang-rt-14-dev)
python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$flavor" = fuzz ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    say "configuring $build (clang, libFuzzer; no libtorch)"
    cmake -S fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null || { rm -rf "$build"; exit 1; }
  fi
  exit 0
fi

# --- Google Benchmark from source, built with the project in Release ----------------------------
# Debian's libbenchmark is built without NDEBUG and says "***WARNING*** Library was built as DEBUG".
# The same version's source, Debian's orig tarball (checked), is built with the project instead;
# where it cannot be fetched the packaged library is used (cmake says which).
gb_dir=third_party/benchmark-1.7.1
if [ ! -f "$gb_dir/CMakeLists.txt" ]; then
  gb_url=http://deb.debian.org/debian/pool/main/b/benchmark/benchmark_1.7.1.orig.tar.gz
  gb_sha=6430e4092653380d9dc4ccb45a1e2dc9259d581f4866dc0759713126056bc1d7
  mkdir -p third_party
  say "fetching Google Benchmark 1.7.1's source (Debian's orig tarball) to build it in Release"
  if python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
       "$gb_url" third_party/benchmark.tar.gz 2>/dev/null &&
     echo "$gb_sha  third_party/benchmark.tar.gz" | sha256sum -c --status; then
    tar xzf third_party/benchmark.tar.gz -C third_party
  else
    say "could not fetch $gb_url: using Debian's libbenchmark (built as DEBUG; our times are manual, see docs/development.md)"
  fi
  rm -f third_party/benchmark.tar.gz
fi

# --- The driver against the CUDA build, before anything is installed ----------------------------
# TORCH_CUDA_NEEDS: the CUDA version the requirement's build needs (torch 2.14.1 on PyPI: CUDA 13.0).
# With Torch_DIR the user's libtorch is the one built against, and theirs to match to the driver.
if [ "$flavor" = cuda ] && [ -z "${Torch_DIR:-}" ]; then
  scripts/check_cuda_driver.sh "${TORCH_CUDA_NEEDS:-13.0}" "$torch_req" || exit 1
fi

# --- Python virtual environment with the torch wheel -------------------------------------------
# matplotlib/pytest serve the report step and its tests (pytest-xdist: a worker a core); numpy silences
# torch's start-up warning.
reqs="$torch_req numpy matplotlib pytest pytest-xdist"
stamp="$venv/.gpt2bench-requirements"
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv"
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$reqs" ]; then
  say "installing into $venv: $reqs"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $reqs >"$venv/pip-install.log" 2>&1 \
    || { tail -30 "$venv/pip-install.log" >&2; exit 1; }
  echo "$reqs" > "$stamp"
fi

# cuDNN's frontend headers, for the CUDA build's own attention graphs (none: the build goes on without them).
if [ "$flavor" = cuda ]; then
  scripts/fetch_cudnn_frontend.sh "$venv/bin/python" || say "building without cuDNN's frontend: cudnn_attention will say so"
fi

# --- CMake build directory --------------------------------------------------------------------
if [ ! -f "$build/CMakeCache.txt" ]; then
  # Torch_DIR: an unpacked libtorch (its share/cmake/Torch) instead of the venv's wheel.
  if [ -n "${Torch_DIR:-}" ]; then
    prefix=$(cd "$Torch_DIR/../../.." && pwd)
  else
    prefix=$("$venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
  fi
  say "configuring $build (libtorch from $prefix, CUDA=$cuda)"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DGPT2BENCH_CUDA="$cuda" \
    -DPython3_EXECUTABLE="$root/$venv/bin/python" "${extra_cmake[@]}" >"$venv/cmake-configure-$flavor.log" 2>&1 \
    || { cat "$venv/cmake-configure-$flavor.log" >&2; rm -rf "$build"; exit 1; }
fi
