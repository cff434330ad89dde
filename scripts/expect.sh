# Sourced by the script tests: `expect CODE TEXT -- command...` runs the command, and where its exit status
# is not CODE or its output lacks TEXT says so and sets fail=1.
fail=0
expect() {
  local code=$1 text=$2; shift 3
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = "$code" ] || { echo "FAIL: '$*' exited $rc, expected $code: $out"; fail=1; }
  case "$out" in *"$text"*) ;; *) echo "FAIL: '$*' did not say '$text': $out"; fail=1 ;; esac
}
