#!/usr/bin/env bash
# ctest GtestShards: scripts/gtest_shards.sh (make asan) with a fake test binary whose second shard fails:
# every shard runs with its index, each one's output is printed, and the failure is the exit status.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\necho "shard $GTEST_SHARD_INDEX of $GTEST_TOTAL_SHARDS: $*"\n[ "$GTEST_SHARD_INDEX" != 1 ] || exit 7\n' \
  > "$tmp/fake_tests"
chmod +x "$tmp/fake_tests"
source "$here/expect.sh"
for said in "shard 2 of 3: exit 7" "shard 0 of 3: --gtest_brief=1" "shard 1 of 3: --gtest_brief=1" "shard 2 of 3: --gtest_brief=1"; do
  expect 7 "$said" -- "$here/gtest_shards.sh" 3 "$tmp/fake_tests" --gtest_brief=1
done
expect 0 "shard 0 of 1: " -- "$here/gtest_shards.sh" 1 "$tmp/fake_tests"
expect 2 "N='0': expected a count, 1 or more" -- "$here/gtest_shards.sh" 0 "$tmp/fake_tests"
expect 2 "usage: gtest_shards.sh N BINARY" -- "$here/gtest_shards.sh" 2
[ "$fail" = 0 ] && echo "gtest_shards.sh: all cases pass"
exit $fail
