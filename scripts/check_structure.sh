#!/usr/bin/env bash
# The structure the README's Layout states, checked: each library includes only those listed above it; no function
# over 60 lines, class over 150 or file over 600 (ladder.cpp 500) in the C++ and Python sources, the Layout's figures
# as they are; no rung-name parsing ("_top+"); no build-kind #ifdef (bench/runtime/backend.h is the one seam).
set -uo pipefail
cd "$(dirname "$0")/.."
bad=0
# The libraries in the order the README's Layout lists them ("- `dir/`: ..." lines), top first.
mapfile -t order < <(sed -n '/^## Layout/,/^## /p' README.md | sed -n 's/^- `\([a-z_/]*\/\)`:.*/\1/p')
[ ${#order[@]} -ge 10 ] || { echo "structure: README's Layout lists ${#order[@]} libraries (expected 10+)"; exit 1; }
for ((i = 0; i < ${#order[@]}; i++)); do
  dir=${order[i]%/}
  for ((j = i + 1; j < ${#order[@]}; j++)); do
    hits=$(grep -rn --include='*.h' --include='*.cpp' --include='*.cu' "#include \"${order[j]}" "$dir" 2>/dev/null)
    [ -n "$hits" ] && { echo "structure: $dir/ must not include ${order[j]}* (below it in the README's Layout):"
                        echo "$hits" | sed 's/^/  /'; bad=1; }
  done
done
sources=$(git ls-files bench config model variants kernels common reports/gpt2bench_report reference 2>/dev/null \
          | grep -E '\.(cpp|h|cu|py)$' || find bench config model variants kernels common reports/gpt2bench_report \
          reference -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.py')
sizes=$(python3 scripts/long_functions.py 60 150 600 $sources) ||
  { echo "$sizes"; echo "structure: functions over 60 lines, classes over 150 or files over 600 (above)"; bad=1; }
# The figures the README's Layout gives, as they are now.
last=$(echo "$sizes" | tail -1)
bench_sources=$(git ls-files bench 2>/dev/null | grep -E '\.(cpp|h|cu)$' || find bench -name '*.cpp' -o -name '*.h' -o -name '*.cu')
figures=$(python3 - "$last" "$(cat $bench_sources | wc -l)" "$(echo "$bench_sources" | wc -l)" <<'PY'
import re, sys
m = re.match(r"(\d+) files; the longest function (\d+) lines .*; the largest class (\d+) lines \((?:struct|class) (\w+)", sys.argv[1])
print(f"{m[1]} C++ and Python sources, the longest function {m[2]} lines, the largest class {m[3]} (`{m[4]}`); "
      f"`bench/` {int(sys.argv[2]):,} lines in {sys.argv[3]} files")
PY
)
tr '\n' ' ' < README.md | tr -s ' ' | grep -qF "$figures" ||
  { echo "structure: the README's Layout should say: $figures"; bad=1; }
n=$(wc -l < bench/ladder/ladder.cpp)
[ "$n" -le 500 ] || { echo "structure: bench/ladder/ladder.cpp is $n lines (at most 500)"; bad=1; }
hits=$(grep -rn --include='*.cpp' --include='*.h' --include='*.py' '_top+' bench model variants config reports/gpt2bench_report)
[ -n "$hits" ] && { echo "structure: rung names parsed (use rungs.json's kind/compare_to):"; echo "$hits"; bad=1; }
hits=$(grep -rn --include='*.cpp' --include='*.h' 'GPT2BENCH_WITH_CUDA' bench model variants config common tests fuzz)
[ -n "$hits" ] && { echo "structure: #ifdef on the build kind (ask cuda_backend() instead):"; echo "$hits"; bad=1; }
[ $bad -eq 0 ] && echo "structure: includes in the Layout's order, no function over 60 lines, no class over 150," \
                       "no file over 600, no name parsing, no build-kind #ifdef; $figures"
exit $bad
