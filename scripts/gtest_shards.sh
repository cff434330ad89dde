#!/usr/bin/env bash
# gtest_shards.sh N BINARY [ARGS...]: a GoogleTest binary as N shards at once (GTEST_TOTAL_SHARDS), one
# process each: what ctest -j does, without a process start a test (1.3 s under ASan). Each shard's output
# is printed when all have ended; the exit status is the first failing shard's, else 0.
set -uo pipefail
(($# >= 2)) || { echo "usage: gtest_shards.sh N BINARY [ARGS...]" >&2; exit 2; }
n=$1; shift
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "gtest_shards.sh: N='$n': expected a count, 1 or more" >&2; exit 2; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for ((i = 0; i < n; i++)); do
  GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i "$@" >"$logs/$i" 2>&1 &
  pids+=($!)
done
rc=0
for ((i = 0; i < n; i++)); do
  wait "${pids[$i]}"; code=$?
  echo "--- shard $((i + 1)) of $n: exit $code"
  cat "$logs/$i"
  ((rc == 0)) && rc=$code
done
exit $rc
