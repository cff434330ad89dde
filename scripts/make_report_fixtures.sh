#!/usr/bin/env bash
# Regenerates reports/tests/fixtures/ with the built gpt2bench: real tiny-model CPU runs (vocab 97,
# T=16, C=32, 2 layers), 5 repetitions of 3 steps, their profile/ traces removed to keep them small; beside the
# 5-variant ladder, `gpt2bench kernels` on the same model (kernels.json).
# Use: scripts/make_report_fixtures.sh [build/gpt2bench]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/gpt2bench}
out=$root/reports/tests/fixtures
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/models"
printf 'name: tiny\nvocab_size: 97\ncontext: 16\nn_embd: 32\nn_head: 4\nn_layer: 2\ndropout: 0.0\n' > "$work/models/tiny.yaml"
common='model: tiny\ndata: synthetic\ndevice: cpu\nbatch: 4\nwarmup_steps: 1\nsteps: 3\nrepetitions: 5\nparity_steps: 2\nprofile_steps: 1\nseed: 3\n'
three='variants: [fused_adamw, native_layers, sdpa]\n'
printf "name: fixture-ladder\n${common}variants: [mask_on_the_fly, tf32, fused_adamw, native_layers, sdpa]\n" > "$work/ladder.yaml"
printf "name: fixture-add-one\n${common}plan: add_one\n${three}" > "$work/add.yaml"
printf "name: fixture-leave-one-out\n${common}plan: leave_one_out\n${three}" > "$work/loo.yaml"
run() {  # name profile [env]
  local name=$1 profile=$2; shift 2
  rm -rf "${out:?}/$name"
  (cd "$work" && env "$@" "$bin" ladder --profile "$profile" --out "$work/$name" >/dev/null 2>"$work/$name.log") \
    || { cat "$work/$name.log"; exit 1; }
  mkdir -p "$out/$name"
  cp "$work/$name/results.json" "$work/$name/rungs.json" "$out/$name/"
  echo "wrote $out/$name"
}
run cpu_2threads ladder.yaml OMP_NUM_THREADS=2
# our ops against what they replace, beside that ladder (the report's kernel table)
(cd "$work" && OMP_NUM_THREADS=2 "$bin" kernels --profile ladder.yaml --rounds 5 --out "$out/cpu_2threads/kernels.json" \
  >/dev/null 2>"$work/kernels.log") || { cat "$work/kernels.log"; exit 1; }
echo "wrote $out/cpu_2threads/kernels.json"
run cpu_1thread ladder.yaml OMP_NUM_THREADS=1
run add_one add.yaml OMP_NUM_THREADS=2
run leave_one_out loo.yaml OMP_NUM_THREADS=2
