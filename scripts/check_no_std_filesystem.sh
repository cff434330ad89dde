#!/usr/bin/env bash
# Fails when any of the given binaries or archives defines or references a std::filesystem symbol.
# Torch wheels export statically linked libstdc++ std::filesystem symbols (pytorch/pytorch#133437):
# code linked with libtorch that calls std::filesystem may be bound to libtorch's copies, which
# crashed on the H100 machine (a jump to address 0 from remove_all). common/files.h is the one place
# for file operations, on POSIX calls.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY_OR_ARCHIVE..." >&2; exit 2; }
command -v nm >/dev/null || { echo "check_no_std_filesystem: nm not found (binutils)" >&2; exit 2; }
bad=0
for f in "$@"; do
  hits=$(nm -C "$f" 2>/dev/null | grep -E 'std::(__cxx11::)?filesystem::|std::experimental::filesystem' || true)
  if [ -n "$hits" ]; then
    echo "$f references std::filesystem ($(echo "$hits" | wc -l) symbols), e.g.:"
    echo "$hits" | head -5 | sed 's/^/  /'
    bad=1
  fi
done
if [ $bad -ne 0 ]; then
  echo "use common/files.h instead: libtorch's copies of these symbols may take the place of libstdc++'s"
  exit 1
fi
echo "no std::filesystem symbols in: $*"
