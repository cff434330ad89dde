#!/usr/bin/env bash
# ctest GpuSession: scripts/gpu_session.sh's mechanics, with a fake device kit and fake binaries (no GPU here):
# usage errors, a failing _CUDA test failing the stage with its line shown, a crash followed by each test alone,
# the ladder stage's profile (gpu-124m with the budget the call has left) and tarred run directory under $OUT, a
# ladder process that lost the device or crashed followed by a new one (--resume), a
# ladder stopped before the call's deadline with its run kept and tarred, a call the build left too little of,
# the resume stage, the first stage (a 15-minute lease's one call: kernels' tests and timings, then the ladder), the
# ncu stage (Nsight Compute over our kernels), the sanitize stage (compute-sanitizer over their tests), and
# carried binaries (scripts/prebuild_gpu.sh) run with no build, or the build when they are another tree's or fail;
# prebuild_gpu.sh refusing a checkout with uncommitted changes or without the kit, and building with the kit's build.sh.
set -u
SCRIPT="$(cd "$(dirname "$0")" && pwd)/gpu_session.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export TMPDIR=$T/tmp  # what the script's calls leave there: nothing, unless killed (checked before that case)
mkdir -p "$TMPDIR"
fail=0
check() {  # check WHAT CONDITION...
  local what=$1; shift
  if "$@"; then :; else echo "FAIL: $what"; fail=1; fi
}

cd "$T" && mkdir -p checkout/.device-kit checkout/build-cuda checkout/profiles out fakebuild && cd checkout
out=$(OUT="$T/out" "$SCRIPT" 2>&1); rc=$?
check "no stage: exit 2 with the usage" [ $rc -eq 2 ]
check "no stage: usage shown" grep -q "usage: OUT=DIR scripts/gpu_session.sh tests|ladder|resume|first .* | ncu" <<<"$out"
out=$("$SCRIPT" tests 2>&1); rc=$?
check "no OUT: exit 2" [ $rc -eq 2 ]
check "no OUT: said" grep -q "set OUT" <<<"$out"
out=$(OUT="$T/out" "$SCRIPT" tests 2>&1); rc=$?
check "no kit: exit 2" [ $rc -eq 2 ]
check "no kit: said" grep -q "copy ../shared/device to .device-kit" <<<"$out"

# the fakes: the kit's build.sh "builds" (puts the fake binaries in build-cuda/, logs the call) and runs its
# command; the test binary fails one _CUDA test; gpt2bench ladder writes a run directory
cat >.device-kit/build.sh <<EOF
#!/bin/bash
echo "\$*" >>"$T/build-calls"
echo "the build" >>"\${OUT:-/tmp}/device-build.log"  # as the kit's build.sh logs
cp "$T"/fakebuild/* build-cuda/
[ "\$#" -gt 0 ] && exec "\$@"
EOF
cat >"$T/fakebuild/gpt2bench_tests" <<'EOF'
#!/bin/bash
case "$*" in
*--gtest_list_tests*) printf 'CudaTest.\n  Fine_CUDA\n  Crashes_CUDA\nKernelsCuda.\n  Kernel_CUDA\n'; exit 0 ;;
*=CudaTest.Crashes_CUDA) kill -SEGV $$ ;;
*=CudaTest.Fine_CUDA | *=KernelsCuda.Kernel_CUDA) exit 0 ;;
esac
case "$*" in *KernelsCuda*) [ -n "${FAKE_KERNELS_HANG:-}" ] && { sleep 60 & wait $!; } ;; esac
case "$*" in *KernelsCuda*) if [ -n "${FAKE_WARM_S:-}" ]; then  # the warm processes started (on a loaded machine a
  for _ in $(seq 50); do  # Python takes a while to start), still running
    [ "$(cat "$FAKE_WARM_DIR/warm-calls" 2>/dev/null | wc -l)" -ge 3 ] && break
    sleep 0.2
  done
  [ "$(ls "$FAKE_WARM_DIR"/warm-done-* 2>/dev/null | wc -l)" -lt \
    "$(cat "$FAKE_WARM_DIR/warm-calls" 2>/dev/null | wc -l)" ] && echo "tests: beside the warm"
fi ;; esac
echo "[  PASSED  ] 3 tests."
case "$*" in *KernelsCuda*) exit 0 ;; esac
[ -n "${FAKE_CRASH:-}" ] && kill -SEGV $$
echo "[  FAILED  ] CudaTest.Something_CUDA"; exit 1
EOF
cat >"$T/fakebuild/gpt2bench" <<'EOF'
#!/bin/bash
[ "$1" = doctor ] && { echo "doctor: fake"; exit 0; }
[ "$1" = reference-config ] && { echo '{"name": "ref_torch_compile"}'; exit 0; }
if [ "$1" = kernels ]; then  # whether any process warming compile's caches was still running (FAKE_WARM_DIR)
  calls=$(cat "$FAKE_WARM_DIR/warm-calls" 2>/dev/null | wc -l) done=$(ls "$FAKE_WARM_DIR"/warm-done-* 2>/dev/null | wc -l)
  [ "$calls" -gt 0 ] && { [ "$done" -eq "$calls" ] && echo "kernels: timed after the warm" || echo "kernels: timed DURING the warm"; }
  case "$*" in *--only*) echo "kernels: $*"; exit 0 ;; esac  # under ncu (gpu_session.sh ncu): no file asked for
  echo '{"cases": []}' >"${@: -1}"; echo "kernels: fake timings"; exit 0
fi
args="$*"
while [ $# -gt 0 ]; do case "$1" in --out | --resume) out=$2; shift ;; --profile) prof=$2; shift ;; esac; shift; done
mkdir -p "$out/reference" "$out/breakdown" && cp "$prof" "$out/profile.yaml" && echo "$args" >>"$out/calls"
echo tokens >"$out/reference/ref_torch_eager_b8.tokens"  # as the reference rungs leave them
head -c "${FAKE_TRACE_B:-100}" /dev/urandom >"$out/breakdown/00_baseline.trace.json"
if [ "$(wc -l <"$out/calls")" -le "${FAKE_LOSE_DEVICE:-0}" ]; then  # a rung lost the device: this process ends
  echo '{"status": "aborted"}' >"$out/rungs.json"
  echo "ladder: a rung lost the device"
  sleep "${FAKE_LOSE_AFTER_S:-0}"
  exit 3
fi
if [ "$(wc -l <"$out/calls")" -le "${FAKE_LADDER_CRASH:-0}" ]; then  # a crash in a rung: nothing recorded
  echo '{"status": "running"}' >"$out/rungs.json"
  echo "ladder: crashed in a rung"
  kill -SEGV $$
fi
if [ -n "${FAKE_HANG:-}" ]; then  # a ladder that would run past the call: stopped by SIGTERM, keeping its rungs
  echo '{"status": "running"}' >"$out/rungs.json"
  trap 'echo "{\"status\": \"interrupted\"}" >"$out/rungs.json"; exit 130' TERM
  sleep 60 &
  wait $!
fi
echo '{"status": "complete"}' >"$out/rungs.json"
echo "ladder: done"
EOF
chmod +x .device-kit/build.sh "$T"/fakebuild/*
printf 'name: gpu-124m\nbatch: 8\n' >profiles/gpu-124m.yaml
# the Python reference's --warm: logs its arguments with the config it was given, takes FAKE_WARM_S, says it warmed
mkdir -p reference && cat >reference/gpt2bench_ref.py <<'PY'
import json, os, sys, time
d, form = os.environ["FAKE_WARM_DIR"], sys.argv[-1]
with open(os.path.join(d, "warm-calls"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + " " + open(sys.argv[2]).read().strip() + "\n")
time.sleep(float(os.environ.get("FAKE_WARM_S", "0")))
open(os.path.join(d, "warm-done-" + form), "w").close()
print(json.dumps({"warmed": {form: 1.0}}))
PY
export FAKE_WARM_DIR="$T"

out=$(OUT="$T/out" "$SCRIPT" tests 2>&1); rc=$?
check "tests: a failing _CUDA test fails the stage" [ $rc -eq 1 ]
check "tests: the failing test's line shown" grep -q "FAILED  \] CudaTest.Something_CUDA" <<<"$out"
check "tests: logs under OUT" [ -s "$T/out/kernels.log" -a -s "$T/out/cuda-tests.log" ]
check "tests: the machine's versions and the doctor's report under OUT" \
  bash -c "[ -s '$T/out/machine-tests.txt' ] && grep -q 'doctor: fake' '$T/out/machine-tests.txt'"
check "tests: the kernels' tests and timings in one log" \
  bash -c "grep -q 'PASSED' '$T/out/kernels.log' && grep -q 'kernels: fake timings' '$T/out/kernels.log'"
check "tests: no crash, no test run alone" bash -c "! grep -q 'each _CUDA test alone' '$T/out/cuda-tests.log'"
check "tests: the kernels' timings under OUT, and shown" [ -s "$T/out/kernels.json" ]
check "tests: torch.compile's caches not warmed (the first stage's)" [ ! -e "$T/warm-calls" ]
check "tests: ... and shown" grep -q "kernels: fake timings" <<<"$out"
rm -rf "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_CRASH=1 "$SCRIPT" tests 2>&1); rc=$?
check "tests: a crash fails the stage" [ $rc -eq 1 ]
check "tests: after a crash each test alone, the crashing one named" \
  grep -qE "^  CudaTest.Crashes_CUDA: CRASHED \(exit 139\)" <<<"$out"
check "tests: ... and the ones that pass" grep -q "^  KernelsCuda.Kernel_CUDA: passed" "$T/out/cuda-tests.log"
check "tests, built, a crash: no more files under OUT than come back (8)" [ "$(find "$T/out" -type f | wc -l)" -le 8 ]

out=$(OUT="$T/out" "$SCRIPT" ladder 2>&1); rc=$?
check "ladder: exit 0" [ $rc -eq 0 ]
check "ladder: its output logged" grep -q "ladder: done" "$T/out/ladder.log"
check "ladder: gpu-124m with the budget a warm call leaves (600 s less 100, about 8.3 minutes)" \
  grep -qE "^budget_minutes: 8\.[23] " runs/*-gpu-124m/profile.yaml
tgz=$(ls "$T"/out/*-gpu-124m.tgz 2>/dev/null | head -1)
check "ladder: the run directory tarred under OUT" [ -n "$tgz" ]
[ -n "$tgz" ] && check "ladder: the tarball holds rungs.json and the profile as run" \
  bash -c "tar -tzf '$tgz' | grep -q 'rungs.json' && tar -xzOf '$tgz' --wildcards '*/profile.yaml' | grep -q 'name: gpu-124m'"
[ -n "$tgz" ] && check "ladder: ... its traces, not the reference rungs' token files" \
  bash -c "tar -tzf '$tgz' | grep -q 'trace.json' && ! tar -tzf '$tgz' | grep -q '[.]tokens'"
# traces that would take the tarball over what a file under OUT may hold (here 50 kB) are left out of it, said
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_TRACE_B=80000 GPU_SESSION_FILE_MAX_B=50000 "$SCRIPT" ladder 2>&1); rc=$?
tgz=$(ls "$T"/out/*-gpu-124m.tgz 2>/dev/null | head -1)
check "ladder, large traces: tarred without them, said" \
  bash -c "[ -n '$tgz' ] && ! tar -tzf '$tgz' | grep -q 'trace.json' && tar -tzf '$tgz' | grep -q rungs.json" &&
  grep -q "without the Chrome traces" <<<"$out"
check "ladder, large traces: under the limit" [ "$(stat -c %s "$tgz")" -le 50000 ]
out=$(OUT="$T/out" FAKE_TRACE_B=80000 GPU_SESSION_FILE_MAX_B=50 "$SCRIPT" ladder 2>&1); rc=$?
check "ladder, a tarball over the limit anyway: said" grep -q "is still over 50 bytes: it will not come back" <<<"$out"

# a rung that lost the device (exit 3): the rest in a new process, --resume, with the budget then left
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_LOSE_DEVICE=1 "$SCRIPT" ladder --rung x 2>&1); rc=$?
check "lost device: exit 0 (the second process finished)" [ $rc -eq 0 ]
check "lost device: said" grep -q "a rung left the device unusable .*: the rest in a new process" <<<"$out"
check "lost device: a new run, then --resume on it, the arguments passed on to both" bash -c \
  "head -1 runs/*-gpu-124m/calls | grep -qE -- '--out runs/[0-9-]+-gpu-124m --rung x' &&
   sed -n 2p runs/*-gpu-124m/calls | grep -qE -- '--resume runs/[0-9-]+-gpu-124m --rung x' && [ \$(wc -l <runs/*-gpu-124m/calls) -eq 2 ]"
check "lost device: both processes in the log" \
  bash -c "grep -q 'ladder: a rung lost the device' '$T/out/ladder.log' && grep -q 'ladder: done' '$T/out/ladder.log'"
check "lost device: the finished run tarred" \
  bash -c "tar -xzOf '$T'/out/*-gpu-124m.tgz --wildcards '*/rungs.json' | grep -q complete"
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_LOSE_DEVICE=99 GPU_SESSION_ROUNDS=3 "$SCRIPT" ladder 2>&1); rc=$?
check "lost device each time: exit 3 after ROUNDS processes" bash -c "[ $rc -eq 3 ] && [ \$(wc -l <runs/*-gpu-124m/calls) -eq 3 ]"
check "lost device each time: the next call named" grep -q "no new process was started for the rest (3 processes" <<<"$out"
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_LOSE_DEVICE=99 FAKE_LOSE_AFTER_S=3 GPU_SESSION_LIMIT_S=162 "$SCRIPT" ladder 2>&1); rc=$?
check "lost device, under a minute of budget left after it (62 s, then 3 s gone): no new process" \
  bash -c "[ $rc -eq 3 ] && [ \$(wc -l <runs/*-gpu-124m/calls) -eq 1 ]"

# a crash in a rung (a signal): the rest in a new process, --resume, as after a lost device; a crash each time:
# ROUNDS processes, the signal and the next call said
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_LADDER_CRASH=1 "$SCRIPT" ladder --rung x 2>&1); rc=$?
check "crash: exit 0 (the second process finished)" [ $rc -eq 0 ]
check "crash: said, with the rung's second chance" grep -q "gpu_session: gpt2bench ladder ended by signal 11 (a crash or a \
kill: ladder.log; the rung it was in runs once more, and is an error after a second such end): the rest in a new \
process, --resume" <<<"$out"
check "crash: a new run, then --resume on it" bash -c \
  "sed -n 2p runs/*-gpu-124m/calls | grep -qE -- '--resume runs/[0-9-]+-gpu-124m --rung x' && [ \$(wc -l <runs/*-gpu-124m/calls) -eq 2 ]"
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_LADDER_CRASH=99 GPU_SESSION_ROUNDS=3 "$SCRIPT" ladder 2>&1); rc=$?
check "crash each time: exit 139 after ROUNDS processes" bash -c "[ $rc -eq 139 ] && [ \$(wc -l <runs/*-gpu-124m/calls) -eq 3 ]"
check "crash each time: the next call named" \
  grep -q "ended by signal 11, and no new process was started for the rest (3 processes" <<<"$out"

# a cold machine's build that leaves less than a minute of budget: no ladder started
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" GPU_SESSION_LIMIT_S=150 "$SCRIPT" ladder 2>&1); rc=$?
check "little time left: exit 1" [ $rc -eq 1 ]
check "little time left: said" grep -q "too little for a ladder" <<<"$out"
check "little time left: no ladder started" [ ! -d runs ]

# a ladder running on towards the call's limit: SIGTERM before it, the run kept and tarred, resume told
out=$(OUT="$T/out" FAKE_HANG=1 GPU_SESSION_LIMIT_S=200 GPU_SESSION_STOP_S=197 "$SCRIPT" ladder --rung x 2>&1); rc=$?
check "stopped: exit 124" [ $rc -eq 124 ]
check "stopped: the next call named" grep -q "scripts/gpu_session.sh resume" <<<"$out"
check "stopped: the arguments passed on" grep -q -- "--rung x" runs/*-gpu-124m/calls
tgz=$(ls "$T"/out/*-gpu-124m.tgz 2>/dev/null | head -1)
check "stopped: tarred" [ -n "$tgz" ]
[ -n "$tgz" ] && check "stopped: the tarball holds the run as the ladder left it" \
  bash -c "tar -xzOf '$tgz' --wildcards '*/rungs.json' | grep -q interrupted"

# resume: the newest run finished by gpt2bench ladder --resume
out=$(OUT="$T/out" "$SCRIPT" resume 2>&1); rc=$?
check "resume: exit 0" [ $rc -eq 0 ]
check "resume: gpt2bench ladder --resume on the run" grep -qE -- "--resume runs/[0-9-]+-gpu-124m" runs/*-gpu-124m/calls
check "resume: its output logged" grep -q "ladder: done" "$T/out/resume.log"
[ -n "$tgz" ] && check "resume: the run tarred again, finished" \
  bash -c "tar -xzOf '$tgz' --wildcards '*/rungs.json' | grep -q complete"

# resume on a lease of the other kind: the run (an H100's) kept as it is, a new run on this device (an H200)
rm -rf runs && mkdir -p runs/20261122-100000-gpu-124m "$T/smi"
printf '{"device": {"name": "NVIDIA H100 80GB HBM3"}, "status": "interrupted"}\n' \
  >runs/20261122-100000-gpu-124m/rungs.json
printf '#!/bin/sh\necho "NVIDIA H200"\n' >"$T/smi/nvidia-smi" && chmod +x "$T/smi/nvidia-smi"
out=$(PATH="$T/smi:$PATH" OUT="$T/out" "$SCRIPT" resume 2>&1); rc=$?
check "resume on another device: exit 0" [ $rc -eq 0 ]
check "resume on another device: said, with both" grep -q \
  "runs/20261122-100000-gpu-124m was run on NVIDIA H100 80GB HBM3, this is NVIDIA H200: a new run here" <<<"$out"
check "resume on another device: that run untouched" bash -c \
  "[ ! -e runs/20261122-100000-gpu-124m/calls ] && grep -q interrupted runs/20261122-100000-gpu-124m/rungs.json"
check "resume on another device: a new run here" \
  bash -c "ls runs | grep -v 20261122-100000 | grep -q gpu-124m && grep -qE -- '--out runs/[0-9-]+-gpu-124m' runs/*/calls"
rm -rf runs && mkdir -p runs/20261122-100000-gpu-124m
printf '{"device": {"name": "NVIDIA H200"}, "status": "interrupted"}\n' >runs/20261122-100000-gpu-124m/rungs.json
out=$(PATH="$T/smi:$PATH" OUT="$T/out" "$SCRIPT" resume 2>&1); rc=$?
check "resume on the same device: resumed" \
  grep -q -- "--resume runs/20261122-100000-gpu-124m" runs/20261122-100000-gpu-124m/calls
rm -rf runs
out=$(OUT="$T/out" "$SCRIPT" resume 2>&1); rc=$?
check "resume with no run: exit 2" [ $rc -eq 2 ]
check "resume with no run: what to carry said" grep -q "carry runs/<name>" <<<"$out"
check "no temporary file left behind by the calls so far" [ -z "$(ls -A "$TMPDIR")" ]

# a call ended from outside before the script's own stop (the device tool's limit where less device time was left,
# a lost machine): the run as packed while the ladder ran is under OUT, whole
rm -rf runs && mkdir -p "$T/out9"
OUT="$T/out9" FAKE_HANG=1 GPU_SESSION_CHECKPOINT_S=1 setsid "$SCRIPT" ladder >/dev/null 2>&1 &
pid=$!
disown "$pid"  # its end not reported
for _ in $(seq 50); do ls "$T"/out9/*-gpu-124m.tgz >/dev/null 2>&1 && break; sleep 0.2; done
for p in /proc/[0-9]*; do  # the whole session killed, as the machine's end would: gpt2bench under timeout too
  read -r _ _ _ _ _ sid _ <"$p/stat" 2>/dev/null && [ "$sid" = "$pid" ] && kill -KILL "${p#/proc/}" 2>/dev/null
done
killed=$(ls "$T"/out9/*-gpu-124m.tgz 2>/dev/null | head -1)
check "killed from outside: the run as the ladder had it then, packed under OUT" \
  bash -c "[ -n '$killed' ] && tar -xzOf '$killed' --wildcards '*/rungs.json' | grep -q running"

# first: the kernels' tests (bounded), their timings, then the ladder on what is left, all in one call
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" "$SCRIPT" first 2>&1); rc=$?
check "first: exit 0" [ $rc -eq 0 ]
check "first: the kernels' tests logged" grep -q PASSED "$T/out/kernels.log"
check "first: ... and their verdict shown" grep -q PASSED <<<"$out"
check "first: the kernels' timings under OUT" [ -s "$T/out/kernels.json" ]
check "first: the ladder that loses its device tested after the timings, logged, its verdict shown" bash -c \
  "grep -A2 '== gpt2bench kernels' '$T/out/kernels.log' | grep -q 'kernels: fake timings' &&
   grep -A2 '== a ladder losing its device' '$T/out/kernels.log' | grep -q PASSED" &&
  grep -q "AFaultLosesTheDeviceInALadderRung\*) exited" <<<"$out"
check "first: the ladder ran, logged" grep -q "ladder: done" "$T/out/first.log"
check "first: not every _CUDA test (the tests stage's)" [ ! -f "$T/out/cuda-tests.log" ]
check "first, built: no more files under OUT than come back (8)" [ "$(find "$T/out" -type f | wc -l)" -le 8 ]
check "first: the run tarred" bash -c "ls '$T'/out/*-gpu-124m.tgz >/dev/null"
check "first: the kernels' timings in the tarred run directory, as written" \
  bash -c "tar -xzOf '$T'/out/*-gpu-124m.tgz --wildcards '*/kernels.json' | cmp - '$T/out/kernels.json'"
check "first: torch.compile's caches warmed, said" grep -q "caches warmed in .*s (3 of 3 forms" <<<"$out"
# the warm processes take longer than the kernels' tests: the tests run beside them, the timings wait for them, and
# the kernel checks' window moves on by that wait (here 4 s, less than the 6 s wait: without it no timings; with it
# some 4 s for them, a margin for a loaded machine: at 2 s and 3 s a fresh-clone CI beside other tests once failed)
rm -rf runs "$T/out" "$T"/warm-* && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_WARM_S=6 GPU_SESSION_FIRST_TESTS_S=4 "$SCRIPT" first 2>&1); rc=$?
check "first, warm: exit 0, the ladder ran" bash -c "[ $rc -eq 0 ] && grep -q 'ladder: done' '$T/out/first.log'"
check "first, warm: a process a form" [ "$(wc -l <"$T/warm-calls")" -eq 3 ]
for f in parity model model_and_loss; do
  check "first, warm: $f warmed with the config gpt2bench printed" \
    grep -qE -- "^--warm [^ ]*/ref_torch_compile.json $f [{]\"name\": \"ref_torch_compile\"[}]$" "$T/warm-calls"
done
check "first, warm: the kernels' tests beside it" grep -q "tests: beside the warm" "$T/out/kernels.log"
check "first, warm: the timings after it, in the window moved on by the wait" \
  bash -c "grep -q 'kernels: timed after the warm' '$T/out/kernels.log' && [ -s '$T/out/kernels.json' ]"
check "first, warm: what it said in the machine's file" grep -q '"warmed": {"model_and_loss": 1.0}' "$T/out/machine-first.txt"
check "first, warm: no more files under OUT than come back (8)" [ "$(find "$T/out" -type f | wc -l)" -le 8 ]
# a warm process that hangs is stopped at GPU_SESSION_WARM_S, said, and the call goes on
rm -rf runs "$T/out" "$T"/warm-* && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_WARM_S=60 GPU_SESSION_WARM_S=2 "$SCRIPT" first 2>&1); rc=$?
check "first, warm hung: exit 0, the timings and the ladder ran" \
  bash -c "[ $rc -eq 0 ] && [ -s '$T/out/kernels.json' ] && grep -q 'ladder: done' '$T/out/first.log'"
check "first, warm hung: stopped, said" grep -q "caches warmed in [0-9]*s (0 of 3 forms" <<<"$out"
rm -f "$T"/warm-*
# kernels' tests that hang are stopped at FIRST_TESTS_S and the ladder still runs, on the budget left
rm -rf runs "$T/out" && mkdir "$T/out"
out=$(OUT="$T/out" FAKE_KERNELS_HANG=1 GPU_SESSION_FIRST_TESTS_S=2 "$SCRIPT" first 2>&1); rc=$?
check "first, hung tests: exit 0 (the ladder ran)" [ $rc -eq 0 ]
check "first, hung tests: their stop said" grep -q "KernelsCuda.\* and two device tests exited 124" <<<"$out"
check "first, hung tests: the ladder's budget is what they left (600 s less 2, less 100)" \
  grep -qE "^budget_minutes: 8\.[2-3] " runs/*-gpu-124m/profile.yaml
rm -rf runs

# ncu: the kernels' cases under Nsight Compute (a fake: logs its arguments, "profiles", writes its report, runs the
# program; --import prints a CSV page); where it cannot read the counters (gVisor) or is missing, said, exit 1
mkdir -p "$T/ncu" && cat >"$T/ncu/ncu" <<EOF
#!/bin/bash
echo "\$*" >>"$T/ncu-calls"
case "\$1" in
--version) printf 'NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (fake)\n'; exit 0 ;;
--import) printf '"ID","Kernel Name","Metric Name","Metric Value"\n"0","add_ln","DRAM","48"\n'; exit 0 ;;
esac
[ -n "\${FAKE_NCU_GVISOR:-}" ] && { echo "==ERROR== Failed to initialize the profiler: LibraryNotLoaded"; exit 1; }
while [ "\$1" != build-cuda/gpt2bench ]; do [ "\$1" = --export ] && rep=\$2; shift; done
echo '==PROF== Profiling "add_ln_backward_kernel": 0%....50%....100% - 40 passes'
echo report >"\$rep.ncu-rep"
exec "\$@"
EOF
chmod +x "$T/ncu/ncu"
rm -rf "$T/out" "$T/ncu-calls" && mkdir "$T/out"
out=$(PATH="$T/ncu:$PATH" OUT="$T/out" "$SCRIPT" ncu 2>&1); rc=$?
check "ncu: exit 0" [ $rc -eq 0 ]
check "ncu: the report and its CSV page under OUT" \
  bash -c "grep -q report '$T/out/ncu.ncu-rep' && grep -q '\"add_ln\"' '$T/out/ncu.csv'"
check "ncu: our kernels' first launches, 40 at most, the clocks left alone" \
  grep -qF -- "--clock-control none --kernel-name-base demangled --kernel-id ::regex:gpt2::kernels::|direct_copy:1 \
--launch-count 40 " \
  "$T/ncu-calls"
check "ncu: ... the kernels' cases, one round, the memory-bound ones" grep -qF -- "build-cuda/gpt2bench kernels \
--profile profiles/gpu-124m.yaml --rounds 1 --only fused_residual_norm|bias_gelu_backward|softmax_xent|" "$T/ncu-calls"
check "ncu: the program's output logged" grep -q "kernels: kernels --profile" "$T/out/ncu.log"
check "ncu: said" grep -qF "ncu profiled 1 launches of fused_residual_norm|" <<<"$out"
check "ncu: ncu's version in the machine's file" grep -q "Version 2025.3.1.0 (fake)" "$T/out/machine-ncu.txt"
check "ncu: no more files under OUT than come back (8)" [ "$(find "$T/out" -type f | wc -l)" -le 8 ]
out=$(PATH="$T/ncu:$PATH" OUT="$T/out" NCU_KERNELS=softmax "$SCRIPT" ncu 'softmax_xent' 2>&1); rc=$?
check "ncu, its cases and kernels named: exit 0" [ $rc -eq 0 ]
check "ncu, its cases and kernels named: passed on" \
  bash -c "tail -2 '$T/ncu-calls' | grep -q -- '--kernel-id ::regex:softmax:1 .* --only softmax_xent\$'"
rm -rf "$T/out" && mkdir "$T/out"
out=$(PATH="$T/ncu:$PATH" OUT="$T/out" FAKE_NCU_GVISOR=1 "$SCRIPT" ncu 2>&1); rc=$?
check "ncu, no counters (gVisor): exit 1" [ $rc -eq 1 ]
check "ncu, no counters (gVisor): said, with ncu's words" \
  grep -q "wrote no report: ==ERROR== Failed to initialize the profiler: LibraryNotLoaded (on gVisor" <<<"$out"
out=$(PATH="/usr/bin:/bin" OUT="$T/out" "$SCRIPT" ncu 2>&1); rc=$?
check "ncu, none on PATH: exit 1" [ $rc -eq 1 ]
check "ncu, none on PATH: said" grep -q "no ncu on this machine (PATH, /opt/nvidia/nsight-compute, CUDA)" <<<"$out"

# sanitize: our kernels' tests under compute-sanitizer (a fake: logs its arguments, runs the tests, then says its
# summary; FAKE_SAN_RACE: racecheck finds hazards); where it refuses the device (gVisor) or is missing, said, exit 1
mkdir -p "$T/san" && cat >"$T/san/compute-sanitizer" <<EOF
#!/bin/bash
echo "\$*" >>"$T/san-calls"
[ "\$1" = --version ] && { printf 'NVIDIA (R) Compute Sanitizer\nVersion 2025.3.1.0 (fake)\n'; exit 0; }
[ -n "\${FAKE_SAN_GVISOR:-}" ] && { echo "========= Error: Device not supported"; exit 1; }
tool=\$2
while [ "\$1" != build-cuda/gpt2bench_tests ]; do shift; done
"\$@"
if [ "\$tool" = racecheck ] && [ -n "\${FAKE_SAN_RACE:-}" ]; then
  echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)"; exit 1
fi
[ "\$tool" = racecheck ] && echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" ||
  echo "========= ERROR SUMMARY: 0 errors"
EOF
chmod +x "$T/san/compute-sanitizer"
rm -rf "$T/out" "$T/san-calls" && mkdir "$T/out"
out=$(PATH="$T/san:$PATH" OUT="$T/out" "$SCRIPT" sanitize 2>&1); rc=$?
check "sanitize: exit 0" [ $rc -eq 0 ]
check "sanitize: memcheck, then racecheck, each failing on an error" \
  bash -c "grep -v -- --version '$T/san-calls' | cut -d' ' -f1-4 | paste -sd' ' | \
grep -qx -- '--tool memcheck --error-exitcode 1 --tool racecheck --error-exitcode 1'"
check "sanitize: ... over our kernels' tests by default" grep -qF -- "--gtest_brief=1 \
--gtest_filter=KernelsCuda.KernelMatches*:KernelsCuda.BiasGelu*:KernelsCuda.ColumnSums*:KernelsCuda.AddLayerNorm*" \
  "$T/san-calls"
check "sanitize: both tools' output, the tests' too, in sanitize.log" \
  bash -c "grep -q '^== racecheck' '$T/out/sanitize.log' && [ \$(grep -c PASSED '$T/out/sanitize.log') -eq 2 ]"
check "sanitize: memcheck's summary said" grep -q "memcheck exit 0: ========= ERROR SUMMARY: 0 errors" <<<"$out"
check "sanitize: racecheck's summary said" grep -q "racecheck exit 0: ========= RACECHECK SUMMARY: 0 hazards" <<<"$out"
check "sanitize: its version in the machine's file" grep -q "Version 2025.3.1.0 (fake)" "$T/out/machine-sanitize.txt"
out=$(PATH="$T/san:$PATH" OUT="$T/out" FAKE_SAN_RACE=1 "$SCRIPT" sanitize 'KernelsCuda.Fp8*' 2>&1); rc=$?
check "sanitize, a race found: exit 1" [ $rc -eq 1 ]
check "sanitize, a race found: said" grep -q "racecheck exit 1: ========= RACECHECK SUMMARY: 2 hazards" <<<"$out"
check "sanitize, its tests named: passed on" grep -q -- "--gtest_filter=KernelsCuda.Fp8\*$" "$T/san-calls"
out=$(PATH="$T/san:$PATH" OUT="$T/out" FAKE_SAN_GVISOR=1 "$SCRIPT" sanitize 2>&1); rc=$?
check "sanitize, the device refused (gVisor): exit 1" [ $rc -eq 1 ]
check "sanitize, the device refused (gVisor): said" \
  grep -q "memcheck exit 1: its output in sanitize.log (on gVisor it refuses the device: KINDS.md)" <<<"$out"
out=$(PATH="/usr/bin:/bin" OUT="$T/out" "$SCRIPT" sanitize 2>&1); rc=$?
check "sanitize, none on PATH: exit 1" [ $rc -eq 1 ]
check "sanitize, none on PATH: said" grep -q "no compute-sanitizer on this machine (PATH, CUDA)" <<<"$out"

# first with carried binaries (scripts/prebuild_gpu.sh): built from these very files and starting here, they run
# with no build, from build-cuda/ and with their compiled-in source folder linked here; else the build, said why
mkdir -p .device-prebuilt && cp "$T"/fakebuild/* .device-prebuilt/
sed -i 's/doctor: fake/doctor: carried/' .device-prebuilt/gpt2bench
sha256sum profiles/gpu-124m.yaml >.device-prebuilt/sources.sha256
printf 'source_dir %s\ngit 0123abc\ntorch 2.11.0+cu130\n' "$T/src" >.device-prebuilt/build.txt
rm -rf runs build-cuda/* "$T/out" "$T/build-calls" && mkdir "$T/out"
out=$(OUT="$T/out" "$SCRIPT" first 2>&1); rc=$?
check "carried: exit 0" [ $rc -eq 0 ]
check "carried: said, with what they are" grep -q "running the carried binaries (source_dir $T/src git 0123abc" <<<"$out"
check "carried: no build" [ ! -e "$T/build-calls" ]
check "carried: run from build-cuda/" cmp -s build-cuda/gpt2bench .device-prebuilt/gpt2bench
check "carried: their doctor's report under OUT" grep -q "doctor: carried" "$T/out/machine-first.txt"
check "carried: no more files under OUT than come back (8)" [ "$(find "$T/out" -type f | wc -l)" -le 8 ]
check "carried: their source folder leads here" [ "$(readlink "$T/src")" = "$PWD" ]
check "carried: the kernels' tests and the ladder ran" \
  bash -c "grep -q PASSED '$T/out/kernels.log' && grep -q 'ladder: done' '$T/out/first.log'"
rm -rf runs "$T/out" && mkdir "$T/out"
echo "# changed" >>profiles/gpu-124m.yaml
out=$(OUT="$T/out" "$SCRIPT" first 2>&1); rc=$?
check "carried, other sources: exit 0" [ $rc -eq 0 ]
check "carried, other sources: said" grep -q "built from other sources (1 of its files differ here" <<<"$out"
check "carried, other sources: built here" grep -q "^true" "$T/build-calls"
check "carried, other sources: the build's binaries run" grep -q "doctor: fake" "$T/out/machine-first.txt"
check "carried, other sources: which, in the machine's file" grep -q "profiles/gpu-124m.yaml: FAILED" "$T/out/machine-first.txt"
sha256sum profiles/gpu-124m.yaml >.device-prebuilt/sources.sha256
printf '#!/bin/bash\necho "gpt2bench: error while loading shared libraries: libtorch_cuda.so: cannot open shared object file"\nexit 127\n' \
  >.device-prebuilt/gpt2bench
rm -rf runs build-cuda/* "$T/out" "$T/build-calls" && mkdir "$T/out"
out=$(OUT="$T/out" "$SCRIPT" first 2>&1); rc=$?
check "carried, not starting: exit 0" [ $rc -eq 0 ]
check "carried, not starting: said, with the loader's words" \
  grep -q "the carried gpt2bench does not start here (gpt2bench: error while loading shared libraries" <<<"$out"
check "carried, not starting: built here, and the build's binaries run" \
  bash -c "grep -q '^true' '$T/build-calls' && grep -q 'doctor: fake' '$T/out/machine-first.txt' && grep -q 'ladder: done' '$T/out/first.log'"
rm -rf runs .device-prebuilt

# prebuild_gpu.sh builds HEAD's binaries only: a checkout with uncommitted changes is refused before anything is done
mkdir -p "$T/repo/scripts" && cp "$(dirname "$SCRIPT")/prebuild_gpu.sh" "$T/repo/scripts/" && cd "$T/repo"
git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm x && echo "# changed" >>scripts/prebuild_gpu.sh
out=$(PREBUILD_SRC="$T/src2" scripts/prebuild_gpu.sh 2>&1); rc=$?
check "prebuild, uncommitted changes: exit 2" [ $rc -eq 2 ]
check "prebuild, uncommitted changes: said" grep -q "uncommitted changes; commit them first" <<<"$out"
check "prebuild, uncommitted changes: nothing done" [ ! -e "$T/src2" -a ! -e .device-prebuilt -a ! -e .venv-prebuilt ]
out=$(scripts/prebuild_gpu.sh --help 2>&1); rc=$?
check "prebuild --help: exit 0" [ $rc -eq 0 ]
check "prebuild --help: what it builds and how to carry it" \
  bash -c 'grep -q "^Builds here, with no GPU" <<<"$0" && grep -q "carry .device-prebuilt" <<<"$0"' "$out"
out=$(scripts/prebuild_gpu.sh --now 2>&1); rc=$?
check "prebuild, an argument: exit 2" [ $rc -eq 2 ]
check "prebuild, an argument: said" grep -q "got '--now'" <<<"$out"
git checkout -q scripts/prebuild_gpu.sh
out=$(PREBUILD_SRC="$T/src2" scripts/prebuild_gpu.sh 2>&1); rc=$?
check "prebuild, no kit: exit 2" [ $rc -eq 2 ]
check "prebuild, no kit: said" grep -q "copy ../shared/device to .device-kit first" <<<"$out"
check "prebuild, no kit: nothing done" [ ! -e "$T/src2" -a ! -e .device-prebuilt ]

# prebuild_gpu.sh builds with the kit's own build.sh (fake here: it logs how it was called and "builds"), in a
# clone at the fixed path, with the device's torch's python3 first on PATH (a fake venv of plain files), and
# leaves the binaries, the sums of the files they were built from and what they are
mkdir -p .device-kit .venv-prebuilt/bin "$T/bin"
cat >.device-kit/build.sh <<EOF
#!/bin/bash
echo "cwd=\$PWD python3=\$(command -v python3) targets=\${TARGETS:-} out=\${OUT:-} args=\$*" >>"$T/prebuild-calls"
[ -n "\${FAKE_BUILD_FAILS:-}" ] && { echo "error: the fake build failed"; exit 1; }
mkdir -p build-cuda && printf '#!/bin/sh\n' >build-cuda/gpt2bench && chmod +x build-cuda/gpt2bench &&
  cp build-cuda/gpt2bench build-cuda/gpt2bench_tests
[ "\$#" -gt 0 ] && exec "\$@"
EOF
printf '#!/bin/sh\necho 2.11.0+fake\n' >.venv-prebuilt/bin/python && cp .venv-prebuilt/bin/python .venv-prebuilt/bin/python3
echo "torch==2.11.0" >.venv-prebuilt/.gpt2bench-requirements
printf '#!/bin/sh\necho "Cuda compilation tools, release 13.0, fake"\n' >"$T/bin/nvcc"
printf '#!/bin/sh\nexit 0\n' >scripts/setup.sh
printf '#!/bin/sh\nmkdir -p third_party/cudnn-frontend/include && echo "$1" >third_party/cudnn-frontend/fetched-with\n' \
  >scripts/fetch_cudnn_frontend.sh
chmod +x .device-kit/build.sh .venv-prebuilt/bin/python .venv-prebuilt/bin/python3 "$T/bin/nvcc" scripts/setup.sh \
  scripts/fetch_cudnn_frontend.sh
git add scripts/setup.sh scripts/fetch_cudnn_frontend.sh && git -c user.name=t -c user.email=t@t commit -qm setup
out=$(PATH="$T/bin:$PATH" PREBUILD_SRC="$T/src2" scripts/prebuild_gpu.sh 2>&1); rc=$?
check "prebuild: exit 0" [ $rc -eq 0 ]
check "prebuild: the kit's build.sh, once, in the clone, with the tests, its log there, the device's python3" \
  grep -qx "cwd=$T/src2 python3=$T/repo/.venv-prebuilt/bin/python3 targets=gpt2bench_tests out=$T/src2 args=true" \
  "$T/prebuild-calls"
check "prebuild: the two binaries left" [ -x .device-prebuilt/gpt2bench -a -x .device-prebuilt/gpt2bench_tests ]
check "prebuild: cuDNN's frontend fetched with the device's python and in the clone" \
  grep -qx "$T/repo/.venv-prebuilt/bin/python" "$T/src2/third_party/cudnn-frontend/fetched-with"
check "prebuild: the sums of the files they were built from, true here" sha256sum --quiet -c .device-prebuilt/sources.sha256
check "prebuild: what they are" bash -c "grep -qx 'source_dir $T/src2' .device-prebuilt/build.txt &&
  grep -qx 'git $(git rev-parse HEAD)' .device-prebuilt/build.txt && grep -qx 'torch 2.11.0+fake' .device-prebuilt/build.txt"
out=$(FAKE_BUILD_FAILS=1 PATH="$T/bin:$PATH" PREBUILD_SRC="$T/src2" scripts/prebuild_gpu.sh 2>&1); rc=$?
check "prebuild, the build failing: exit 1" [ $rc -eq 1 ]
check "prebuild, the build failing: the build's words shown" grep -q "error: the fake build failed" <<<"$out"
cd "$T/checkout"

[ $fail -eq 0 ] && echo "gpu_session: usage errors, a failing test's stage, a crash, the ladder's budget and tarball, the deadline, resume, first, ncu, sanitize, carried binaries: ok"
exit $fail
