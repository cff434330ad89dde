#!/usr/bin/env bash
# A lent GPU's runbook (docs/gpu-runbook.md): one stage a device call, everything it writes under $OUT (logs,
# the tarred run directory, the machine's versions), each stage finished before the call's 10-minute limit
# whatever the build took. From the checkout's root, with the device kit copied in and carried
# (cp -r ../shared/device .device-kit; ignored via .git/info/exclude):
#   scripts/gpu_session.sh tests    build gpt2bench and its tests; our kernels' tests and timings (gpt2bench
#                                   kernels: kernels.json), then every _CUDA test
#                                   (after a crash, each _CUDA test alone: which ones crash)
#   scripts/gpu_session.sh ladder   gpu-124m whole (its references, extra rungs and breakdown passes) under the
#                                   time the call has left after the build, less a reserve; stopped cleanly
#                                   (SIGTERM: the finished rungs kept) if it runs on towards the limit; after a
#                                   rung that lost the device (exit 3) or a crash, the rest in a new process
#                                   (--resume: the rung a crash ended runs once more, an error after a second); the
#                                   run directory tarred into $OUT, ready for reports/reference/<device>/ as written
#   scripts/gpu_session.sh first    a lease of 15 minutes in one call: the build with the tests, our kernels'
#                                   tests (KernelsCuda.*) and timings (kernels.json, also put in the run
#                                   directory) and three device tests the ladder relies on, at most
#                                   FIRST_TESTS_S (kernel_checks); beside the tests, ref_torch_compile's
#                                   compilations at the profile's batch warmed into torch.compile's caches
#                                   (warm_start: the timings wait for them), then
#                                   the ladder stage on what the call has left; `resume` on the warm machine
#                                   after it if the lease has 4 minutes left, else the next lease resumes
#   scripts/gpu_session.sh resume   the newest runs/*-gpu-124m finished (gpt2bench ladder --resume): the rungs
#                                   and references not done, under the same deadline. On a machine that went
#                                   cold, untar the last call's tarball in the checkout and carry runs/<name>.
#                                   On another GPU model than the run's (gpt2bench refuses to resume it
#                                   there): a new run on this one, said.
#   scripts/gpu_session.sh ncu [CASES]  Nsight Compute's counters of our kernels (the first launch of each) in
#                                   `gpt2bench kernels --only CASES --rounds 1` (CASES: the memory-bound kernels'
#                                   cases by default): ncu.ncu-rep and its details page as ncu.csv (speed of
#                                   light, memory, occupancy, launch, warp stalls); where ncu cannot read the
#                                   counters (gVisor), said
#   scripts/gpu_session.sh sanitize [FILTER]  our kernels' tests (a gtest filter; SAN_TESTS by default) under
#                                   compute-sanitizer: memcheck (out-of-bounds, misaligned), then racecheck
#                                   (shared-memory hazards); sanitize.log; where it refuses the device (gVisor), said
# ladder and resume pass further arguments to gpt2bench ladder (e.g. --rung '^1[2-9]'). A warm machine reuses
# the build; a cold one builds first (1.5-4 minutes), and the ladder's budget is what is left. Carried binaries
# (.device-prebuilt, scripts/prebuild_gpu.sh) are run instead of a build where they were built from the very files
# here (their sources.sha256) and start here (gpt2bench doctor); else the build, with the reason said.
# The call's clock (tests of this script set them): GPU_SESSION_LIMIT_S, the call's limit (600);
# GPU_SESSION_STOP_S, how long before it gpt2bench is stopped (40: the stop, the tar and the way back);
# GPU_SESSION_RESERVE_S, how long before it the budget ends (100: a rung at its floor, a reference's compile);
# GPU_SESSION_FIRST_TESTS_S, the first stage's bound on its kernel checks: tests, timings and device tests together (90);
# GPU_SESSION_FILE_MAX_B, the most bytes a file under OUT may hold to come back (15 MiB: the tool's 16, less a margin);
# GPU_SESSION_CHECKPOINT_S, how often the run is packed again under OUT while the ladder runs, if it changed (20);
# GPU_SESSION_ROUNDS, the most gpt2bench ladder processes a call starts, one more after each that lost the device (6);
# GPU_SESSION_WARM_S, the most seconds each process warming torch.compile's caches may take (first stage; 150).
# The ncu stage: NCU_S, its most seconds (300); NCU_COUNT, the most launches profiled (40); NCU_KERNELS, which
# kernels (a regex: ours, and the copy their GB/s are set against). The sanitize stage: SAN_S, each tool's most
# seconds (150); SAN_TESTS, the tests of our kernels (kernels/cuda/) it runs by default.
set -u
stage=${1:-}
case "$stage" in tests | ladder | resume | first | ncu | sanitize) shift ;; *)
  echo "usage: OUT=DIR scripts/gpu_session.sh tests|ladder|resume|first [gpt2bench ladder options] | ncu [CASES]" \
    "| sanitize [FILTER]" >&2
  exit 2
  ;;
esac
[ -n "${OUT:-}" ] || { echo "gpu_session: set OUT to the folder that comes back" >&2; exit 2; }
KIT=.device-kit
[ -x "$KIT/build.sh" ] || { echo "gpu_session: copy ../shared/device to $KIT first (and carry it)" >&2; exit 2; }
LIMIT_S=${GPU_SESSION_LIMIT_S:-600} STOP_S=${GPU_SESSION_STOP_S:-40} RESERVE_S=${GPU_SESSION_RESERVE_S:-100}
FIRST_TESTS_S=${GPU_SESSION_FIRST_TESTS_S:-90} FILE_MAX_B=${GPU_SESSION_FILE_MAX_B:-$((15 * 1024 * 1024))}
CHECKPOINT_S=${GPU_SESSION_CHECKPOINT_S:-20} ROUNDS=${GPU_SESSION_ROUNDS:-6} WARM_S=${GPU_SESSION_WARM_S:-150}
NCU_S=${NCU_S:-300} NCU_COUNT=${NCU_COUNT:-40} NCU_KERNELS=${NCU_KERNELS:-'gpt2::kernels::|direct_copy'}
ours='KernelsCuda.KernelMatches*:KernelsCuda.BiasGelu*:KernelsCuda.ColumnSums*:KernelsCuda.AddLayerNorm*'
ours+=':KernelsCuda.ScaledGradient*:KernelsCuda.Fp8*:KernelsCuda.AdamWOneLaunchTrains*'
SAN_S=${SAN_S:-150} SAN_TESTS=${SAN_TESTS:-$ours}
SECONDS=0
left_s() { echo $((LIMIT_S - SECONDS)); }
capped_s() { local c=$((LIMIT_S - STOP_S - SECONDS)); echo $(($1 < c ? $1 : c)); }  # N s, within the call's stop
mkdir -p "$OUT"
SCRATCH=$(mktemp -d)  # this call's own files (the reference's config, the warm log, the budgeted profile)
trap 'rm -rf "$SCRATCH"' EXIT
# What comes back from OUT is at most 8 files (the device tool's limit; the rest are left out): so a stage writes
# at most 6 there: machine-STAGE.txt (the machine's versions, the carried binaries' check, the doctor's report),
# kernels.log and kernels.json, cuda-tests.log (tests), STAGE.log and the tarred run (ladder stages; while it is
# packed again, its .part.tgz beside it), and the kit's device-build.log where it builds.
M="$OUT/machine-$stage.txt"
{
  date -u +%FT%TZ
  git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  nvcc --version 2>&1 | grep release
} >"$M"
cat "$M"

# The binaries, build-cuda/gpt2bench and build-cuda/gpt2bench_tests, run through "${RUN[@]}": the kit's build.sh
# (a no-op build once built, then its libraries' path: /tmp/deps), or where the carried ones serve (carried=true),
# env with that path and libtorch's exported.
PRE=.device-prebuilt
RUN=("$KIT/build.sh")
carried=false
use_prebuilt() {
  [ -x "$PRE/gpt2bench" ] && [ -x "$PRE/gpt2bench_tests" ] && [ -f "$PRE/build.txt" ] || return 1
  local check doctor
  if ! check=$(sha256sum --quiet -c "$PRE/sources.sha256" 2>&1); then
    printf '== the carried binaries: built from other sources\n%s\n' "$check" >>"$M"
    echo "gpu_session: $PRE was built from other sources ($(grep -c FAILED <<<"$check") of its files differ" \
      "here: $M): building here"
    return 1
  fi
  local src
  src=$(awk '$1 == "source_dir" { print $2 }' "$PRE/build.txt")
  if [ -z "$src" ] || { [ -e "$src" ] && [ ! -L "$src" ]; }; then
    echo "gpu_session: $PRE's source_dir '$src' is missing from build.txt or is a real folder here: building here"
    return 1
  fi
  ln -sfn "$PWD" "$src"  # the paths compiled into the binaries (presets, the Python reference, gpt2bench) lead here
  local deps=/tmp/deps f torch_lib
  if [ ! -d $deps/usr ] && compgen -G "$KIT/debs/*.deb" >/dev/null; then  # as build.sh unpacks them
    mkdir -p $deps && for f in "$KIT"/debs/*.deb; do dpkg -x "$f" $deps; done
  fi
  # libtorch from the machine's torch; the CUDA libraries from the toolkit first, as a build there finds them (its
  # run path), then from the wheel's nvidia packages (CUPTI where the toolkit has none; cuDNN: cudnn_attention)
  torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
  local libs=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
  [ -n "$torch_lib" ] && libs=$torch_lib:$libs:$torch_lib/../../nvidia/cu13/lib:$torch_lib/../../nvidia/cudnn/lib
  export LD_LIBRARY_PATH=$libs:$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  mkdir -p build-cuda
  cp "$PRE/gpt2bench" "$PRE/gpt2bench_tests" build-cuda/
  if ! doctor=$(build-cuda/gpt2bench doctor 2>&1); then
    printf '== the carried gpt2bench doctor: did not start\n%s\n' "$doctor" >>"$M"
    echo "gpu_session: the carried gpt2bench does not start here ($(grep -m1 -iE 'error|not found' <<<"$doctor" ||
      head -1 <<<"$doctor")): building here"
    rm -f build-cuda/gpt2bench build-cuda/gpt2bench_tests
    return 1
  fi
  printf '== gpt2bench doctor (the carried binaries)\n%s\n' "$doctor" >>"$M"
  # the commit they were built at, which the files here match (checked above): what the runs record, where this
  # checkout's own git may hold another HEAD (the device tool's copy kept an older one)
  GPT2BENCH_GIT_SHA=$(awk '$1 == "git" { print substr($2, 1, 12) }' "$PRE/build.txt")
  export GPT2BENCH_GIT_SHA
  printf '== the carried binaries were built at %s\n' "$GPT2BENCH_GIT_SHA" >>"$M"
  carried=true
  RUN=(env)
  echo "gpu_session: running the carried binaries ($(tr '\n' ' ' <"$PRE/build.txt")), no build"
}
use_prebuilt || true

# run_until SECONDS CMD...: CMD, sent SIGTERM (its process group) after SECONDS, killed 10 s later; 124 when stopped
run_until() {
  local s=$1; shift
  [ "$s" -gt 0 ] || { echo "gpu_session: no time left in this call for: $*" >&2; return 124; }
  timeout -s TERM -k 10 "$s" "$@"
}

# The build with the test binary, and the doctor's report.
build_with_tests() {
  $carried && return 0  # built already, its doctor's report written
  TARGETS=gpt2bench_tests "$KIT/build.sh" true || exit 1
  echo "gpu_session: built in ${SECONDS}s; $(left_s)s of the call left"
  { echo "== gpt2bench doctor"; "$KIT/build.sh" build-cuda/gpt2bench doctor 2>&1; } >>"$M"
}

# warm_start: ref_torch_compile's compilations at the profile's batch (its parity run's form and both compile scopes),
# one process a form (reference/gpt2bench_ref.py --warm, at most WARM_S each), filling torch.compile's on-disk caches
# beside our kernels' tests, which time nothing: the ladder's reference, minutes later in its own process, then
# compiles from the caches (every graph a cache hit: pytest test_warming_makes_the_references_compilations_cache_hits),
# where cold they take minutes of the call. Only their time is saved; what they compile is the reference's own. At a
# lower CPU priority than the tests (nice 10): those are bounded by FIRST_TESTS_S, the warm only waited for after them.
warmers=() warm_log="" warm_began=0
warm_start() {
  local cfg form
  cfg=$SCRATCH/ref_torch_compile.json warm_log=$SCRATCH/warm.log
  if ! "${RUN[@]}" build-cuda/gpt2bench reference-config --profile profiles/gpu-124m.yaml >"$cfg" 2>>"$warm_log"; then
    { echo "== torch.compile's caches: not warmed (no reference config)"; cat "$warm_log"; } >>"$M"
    echo "gpu_session: torch.compile's caches not warmed: gpt2bench reference-config failed ($M)"
    return 0
  fi
  warm_began=$SECONDS
  for form in parity model model_and_loss; do
    run_until "$WARM_S" nice -n 10 "${GPT2BENCH_PYTHON:-python3}" reference/gpt2bench_ref.py --warm "$cfg" "$form" \
      >>"$warm_log" 2>&1 &
    warmers+=($!)
  done
  echo "gpu_session: warming torch.compile's caches for ref_torch_compile at the profile's batch beside the kernels'" \
    "tests (parity, model, model_and_loss: a process each, at most ${WARM_S}s)"
}
# warm_wait: the warm processes waited for (none: at once); `waited`, the seconds waited here; their output in $M.
waited=0
warm_wait() {
  waited=0
  [ "${#warmers[@]}" -gt 0 ] || return 0
  local began=$SECONDS
  wait "${warmers[@]}"
  waited=$((SECONDS - began))
  warmers=()
  { echo "== torch.compile's caches warmed for ref_torch_compile ($((SECONDS - warm_began))s)"; cat "$warm_log"; } >>"$M"
  echo "gpu_session: torch.compile's caches warmed in $((SECONDS - warm_began))s ($(grep -c '"warmed"' "$warm_log")" \
    "of 3 forms; waited ${waited}s after the kernels' tests)"
}

# kernel_checks UNTIL_S: our kernels' tests (KernelsCuda.*) with two of the device's that the ladder relies on (its
# description and UUID; lost_context after a real fault and after an out-of-memory), then the kernels against what
# they replace, op by op, at gpu-124m's shapes (kernels.json), then a ladder losing its device to a real fault (two
# tiny ladders: last, so that it never takes the timings' time), each stopped at second UNTIL_S of the call, all
# logged in kernels.log; the first failure's exit. The timings wait for the warm processes (no other process on
# the device while they time), and UNTIL_S moves on by that wait: the references gain it back.
kernel_checks() {
  local until_s=$1 rc=0 one=0 lost=0
  run_until $((until_s - SECONDS)) "${RUN[@]}" build-cuda/gpt2bench_tests \
    --gtest_filter='KernelsCuda.*:CudaTest.DescribesTheDevice_CUDA:CudaTest.AFaultLosesTheDeviceAndAnOutOfMemoryDoesNot_CUDA' \
    >"$OUT/kernels.log" 2>&1 || rc=$?
  echo "gpu_session: KernelsCuda.* and two device tests exited $rc"
  grep -hE '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/kernels.log"
  warm_wait
  until_s=$((until_s + waited))
  echo "== gpt2bench kernels" >>"$OUT/kernels.log"
  run_until $((until_s - SECONDS)) "${RUN[@]}" build-cuda/gpt2bench kernels --profile profiles/gpu-124m.yaml \
    --out "$OUT/kernels.json" 2>&1 | tee -a "$OUT/kernels.log"
  one=${PIPESTATUS[0]}
  echo "== a ladder losing its device" >>"$OUT/kernels.log"
  run_until $((until_s - SECONDS)) "${RUN[@]}" build-cuda/gpt2bench_tests \
    --gtest_filter='CudaTest.AFaultLosesTheDeviceInALadderRung*' >>"$OUT/kernels.log" 2>&1 || lost=$?
  echo "gpu_session: a ladder losing its device to a real fault (CudaTest.AFaultLosesTheDeviceInALadderRung*) exited $lost"
  [ $rc -ne 0 ] && return $rc
  [ $one -ne 0 ] && return $one
  return $lost
}

if [ "$stage" = tests ]; then
  build_with_tests
  rc=0
  kernel_checks $((LIMIT_S - STOP_S)) || rc=$?
  all=0
  run_until $(($(left_s) - STOP_S)) "${RUN[@]}" build-cuda/gpt2bench_tests --gtest_filter='*_CUDA' \
    >"$OUT/cuda-tests.log" 2>&1 || all=$?
  grep -hE '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/cuda-tests.log"
  [ $all -ne 0 ] && rc=$all
  if [ $all -gt 128 ]; then  # a crash ends the process with the tests after it unrun: each test alone
    echo "gpu_session: the _CUDA tests crashed (exit $all); each alone, after them in cuda-tests.log:"
    echo "== each _CUDA test alone" >>"$OUT/cuda-tests.log"
    for t in $("${RUN[@]}" build-cuda/gpt2bench_tests --gtest_list_tests --gtest_filter='*_CUDA' |
      awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }'); do
      one=0
      run_until $(($(left_s) - STOP_S)) "${RUN[@]}" build-cuda/gpt2bench_tests --gtest_filter="$t" \
        >>"$OUT/cuda-tests.log" 2>&1 || one=$?
      case $one in 0) said=passed ;; 1) said=FAILED ;; 124) said="stopped at the call's deadline" ;; *) said="CRASHED (exit $one)" ;; esac
      echo "  $t: $said" | tee -a "$OUT/cuda-tests.log"
      [ $one -eq 124 ] && break
    done
  fi
  [ $rc -eq 124 ] && echo "gpu_session: stopped at the call's deadline; the logs under OUT end where the tests were"
  [ $rc -eq 0 ] || exit 1
  exit 0
fi

# ncu: the kernels' cases under Nsight Compute, one round, each of our kernels' first launch profiled (kernel replay:
# its passes run it again on the same inputs), the clocks left as they are (METHOD.md); the report, then its
# details page as CSV (ncu --import: no device). On gVisor ncu cannot read the counters (KINDS.md): said, exit 1.
if [ "$stage" = ncu ]; then
  $carried || "$KIT/build.sh" true || exit 1
  cases=${1:-'fused_residual_norm|bias_gelu_backward|softmax_xent|scaled_gradient|quantize_fp8|adamw_one_launch'}
  ncu=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -1)
  [ -n "$ncu" ] || { echo "gpu_session: no ncu on this machine (PATH, /opt/nvidia/nsight-compute, CUDA)" >&2; exit 1; }
  "$ncu" --version | tail -1 >>"$M"
  rc=0
  run_until "$(capped_s "$NCU_S")" \
    "${RUN[@]}" "$ncu" --clock-control none --kernel-name-base demangled --kernel-id "::regex:$NCU_KERNELS:1" \
    --launch-count "$NCU_COUNT" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --export "$OUT/ncu" --force-overwrite \
    build-cuda/gpt2bench kernels --profile profiles/gpu-124m.yaml --rounds 1 --only "$cases" >"$OUT/ncu.log" 2>&1 || rc=$?
  if [ ! -s "$OUT/ncu.ncu-rep" ]; then
    said=$(grep -m1 -E '^==(ERROR|WARNING)==' "$OUT/ncu.log")
    grep -q LibraryNotLoaded "$OUT/ncu.log" && said+=" (on gVisor ncu cannot read the counters: KINDS.md)"
    echo "gpu_session: ncu exited $rc and wrote no report: ${said:-its output in ncu.log}" >&2
    exit 1
  fi
  "$ncu" --import "$OUT/ncu.ncu-rep" --csv --page details >"$OUT/ncu.csv" 2>>"$OUT/ncu.log" ||
    echo "gpu_session: the report is under OUT, its CSV page not (ncu --import failed: ncu.log)"
  echo "gpu_session: ncu profiled $(grep -c '^==PROF== Profiling' "$OUT/ncu.log") launches of $cases (exit $rc):" \
    "ncu.csv, ncu.ncu-rep"
  [ "$(stat -c %s "$OUT/ncu.ncu-rep")" -le "$FILE_MAX_B" ] ||
    echo "gpu_session: ncu.ncu-rep is over $FILE_MAX_B bytes: it will not come back (ncu.csv holds its figures)"
  [ $rc -eq 124 ] && echo "gpu_session: stopped at ${NCU_S}s or the call's deadline; the report holds what ran"
  exit $rc
fi

# sanitize: our kernels' tests under compute-sanitizer, each tool bounded by SAN_S and the call's deadline; a tool
# that finds errors, is stopped or cannot run the device: exit 1. On gVisor it refuses the device (KINDS.md).
if [ "$stage" = sanitize ]; then
  build_with_tests
  san=$(command -v compute-sanitizer || ls -d /usr/local/cuda/{bin,compute-sanitizer}/compute-sanitizer 2>/dev/null |
    head -1)
  [ -n "$san" ] || { echo "gpu_session: no compute-sanitizer on this machine (PATH, CUDA)" >&2; exit 1; }
  "$san" --version | tail -1 >>"$M"
  : >"$OUT/sanitize.log"
  worst=0
  for tool in memcheck racecheck; do
    echo "== $tool" >>"$OUT/sanitize.log"
    rc=0
    run_until "$(capped_s "$SAN_S")" \
      "${RUN[@]}" "$san" --tool "$tool" --error-exitcode 1 --print-limit 20 \
      build-cuda/gpt2bench_tests --gtest_brief=1 --gtest_filter="${1:-$SAN_TESTS}" >>"$OUT/sanitize.log" 2>&1 ||
      rc=$?
    said=$(sed -n "/^== $tool\$/,\$p" "$OUT/sanitize.log" | grep -E '^========= (ERROR|RACECHECK) SUMMARY' | tail -1)
    [ $rc -eq 124 ] && said="stopped at ${SAN_S}s or the call's deadline"
    said=${said:-its output in sanitize.log}
    grep -q "Device not supported" "$OUT/sanitize.log" && said+=" (on gVisor it refuses the device: KINDS.md)"
    echo "gpu_session: $tool exit $rc: $said"
    [ $rc -eq 0 ] || worst=1
  done
  exit $worst
fi

# first: the build with the tests, our kernels checked and timed within FIRST_TESTS_S (a failure said, not
# stopping the call), then on as the ladder stage
if [ "$stage" = first ]; then
  build_with_tests
  warm_start
  kernel_checks $((SECONDS + FIRST_TESTS_S))
fi

# ladder / resume / first: the run directory, and gpu-124m with the budget that fits what the build left of the call
resume=()  # gpt2bench ladder's --resume RUN, or --out RUN for a new run
if [ "$stage" = resume ]; then
  run=$(ls -dt runs/*-gpu-124m 2>/dev/null | head -1)
  [ -n "$run" ] && [ -f "$run/rungs.json" ] || {
    echo "gpu_session: no runs/*-gpu-124m with a rungs.json to resume here (on a fresh machine: untar the last" \
      "call's tarball in the checkout and carry runs/<name>)" >&2
    exit 2
  }
  resume=(--resume "$run")
  # a run is one device's: on another GPU model gpt2bench refuses to resume it, so a new run here
  was=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["device"]["name"])' "$run/rungs.json" 2>/dev/null)
  here=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  if [ -n "$was" ] && [ -n "$here" ] && [ "$was" != "$here" ]; then
    echo "gpu_session: $run was run on $was, this is $here: a new run here instead (that one resumes" \
      "only on a lease of its own GPU model)"
    resume=()
  fi
fi
if [ "${#resume[@]}" -eq 0 ]; then  # ladder, first, or resume on another device: a new run
  run="runs/$(date -u +%Y%m%d-%H%M%S)-gpu-124m"
  resume=(--out "$run")
fi
$carried || "$KIT/build.sh" true || exit 1
profile=$SCRATCH/gpu-124m.yaml  # not under OUT (its files are few); rungs.json records the budget
# budget_profile: gpu-124m with the budget the call has left less the reserve, into $profile; 1 under a minute
budget_profile() {
  budget_s=$(($(left_s) - RESERVE_S))
  [ "$budget_s" -ge 60 ] || return 1
  budget_min=$(awk -v s="$budget_s" 'BEGIN { printf "%.1f", s / 60 }')
  { cat profiles/gpu-124m.yaml; echo "budget_minutes: $budget_min   # scripts/gpu_session.sh: what the call had left"; } >"$profile"
}
budget_profile || {
  echo "gpu_session: the build left $(left_s)s of this call: too little for a ladder; call again (warm: no build)" >&2
  exit 1
}
# pack [quiet]: the run directory tarred under OUT, with this call's kernels.json (first: where the report shows it
# beside the ladder) and without the reference rungs' token files (the data's first tokens, up to 8 MB each, written
# again by each reference run); without the Chrome traces (breakdown/*.trace.json) too where with them it would be
# over what a file under OUT may hold to come back. Written beside it and renamed: the tarball there is always whole.
pack() {
  [ -d "$run" ] || return 0
  [ "$stage" = first ] && [ -s "$OUT/kernels.json" ] && cp "$OUT/kernels.json" "$run/kernels.json"
  local tgz part
  tgz="$OUT/$(basename "$run").tgz" part="$OUT/$(basename "$run").part.tgz"
  tar_run() { tar -czf "$part" --warning=no-file-changed --ignore-failed-read --exclude='*.tokens' "$@" "$run" 2>/dev/null; }
  tar_run
  if [ "$(stat -c %s "$part")" -gt "$FILE_MAX_B" ]; then
    tar_run --exclude='*.trace.json'
    [ -n "${1:-}" ] || echo "gpu_session: $(basename "$tgz") without the Chrome traces (breakdown/*.trace.json):" \
      "with them it was over the $FILE_MAX_B bytes a file under OUT may hold to come back"
  fi
  mv -f "$part" "$tgz"
  [ -n "${1:-}" ] || [ "$(stat -c %s "$tgz")" -le "$FILE_MAX_B" ] ||
    echo "gpu_session: $(basename "$tgz") is still over $FILE_MAX_B bytes: it will not come back (see what it holds)"
}
# While the ladder runs, the run packed again (at the lowest CPU priority) whenever its rungs.json has changed, every
# CHECKPOINT_S: a call ended before this script's own stop (less device time left than LIMIT_S, a lost machine)
# still brings back the rungs finished by then.
checkpoints() {
  renice -n 19 "$BASHPID" >/dev/null 2>&1
  trap 'kill "$!" 2>/dev/null; wait "$!"; exit 0' TERM  # the sleep too: nothing left running after the call
  local last="" now
  while sleep "$CHECKPOINT_S" & wait "$!"; do
    now=$(stat -c %y "$run/rungs.json" 2>/dev/null) || continue
    [ "$now" = "$last" ] && continue
    last=$now
    pack quiet
  done
}

echo "gpu_session: ${SECONDS}s into the call; $run under a ${budget_min}-minute budget, stopped by $((LIMIT_S - STOP_S))s"
checkpoints >/dev/null 2>&1 &
checkpointing=$!
: >"$OUT/$stage.log"
# A rung that leaves the device unusable (gpt2bench ladder's exit 3: a kernel's illegal address loses the process's
# CUDA context) ends its process; so does a crash (a signal: SIGSEGV 139, SIGABRT 134) or a kill (137: the
# out-of-memory killer's). The rest in a new one (--resume keeps a device fault's rung as the error it was; the rung
# a crash ended runs once more, and after a second such end is an error it keeps), while the call has a minute of
# budget left, at most ROUNDS processes in all. Where this script's own deadline killed it, no minute is left.
for ((round = 1; ; round++)); do
  run_until $(($(left_s) - STOP_S)) "${RUN[@]}" build-cuda/gpt2bench ladder --profile "$profile" "${resume[@]}" "$@" 2>&1 |
    tee -a "$OUT/$stage.log"
  rc=${PIPESTATUS[0]}
  case $rc in
  3) why="a rung left the device unusable (its error in $stage.log and rungs.json)" ;;
  13[1-9] | 1[4-9][0-9])
    why="gpt2bench ladder ended by signal $((rc - 128)) (a crash or a kill: $stage.log; the rung it was in runs"
    why+=" once more, and is an error after a second such end)" ;;
  *) break ;;
  esac
  [ "$round" -lt "$ROUNDS" ] && [ -f "$run/rungs.json" ] && budget_profile || break
  echo "gpu_session: $why: the rest in a new process, --resume, under a ${budget_min}-minute budget"
  resume=(--resume "$run")
done
kill "$checkpointing" 2>/dev/null
wait "$checkpointing" 2>/dev/null
pack
case $rc in
0) ;;
124 | 130) echo "gpu_session: $run stopped before its end, the finished rungs kept; next call: OUT=... scripts/gpu_session.sh resume" ;;
3) echo "gpu_session: $run: a rung left the device unusable, and no new process was started for the rest ($round" \
  "processes, $(left_s)s of the call left); next call: OUT=... scripts/gpu_session.sh resume" ;;
13[1-9] | 1[4-9][0-9]) echo "gpu_session: $run: gpt2bench ladder ended by signal $((rc - 128)), and no new process was" \
  "started for the rest ($round processes, $(left_s)s of the call left); next call: OUT=... scripts/gpu_session.sh resume" ;;
*) echo "gpu_session: gpt2bench ladder exited $rc (its log: $OUT/$stage.log)" ;;
esac
exit "$rc"
