#!/usr/bin/env bash
# Every suite of `make test`, in two phases:
#  1. compiling every Rust test binary, and what the other suites build
#     first (make test-prerequisites), one after the other;
#  2. side by side: the Rust test binaries, which mostly wait on API
#     servers and processes, a few at a time (scripts/rust-tests.py) on one
#     side; on the other the linters (whose CPU the waiting leaves free),
#     the fuzz smoke, the Python and TypeScript suites, the embeddings, the
#     controllers and the browser.
#     The linters start a moment after the tests: cargo holds the target
#     folder's lock only while it builds, and the tests' cargo finds
#     everything built and lets go of it at once.
# The Rust tests stream to standard output; the other side's output goes to
# target/test-logs/<suite>.log and is printed once both sides are done.
# Every suite runs even when an earlier one fails; the exit status says if
# any did. Ends with each suite's wall time.
#
# Knobs: CARGO (default: cargo), MAKE (default: make), RUST_TEST_JOBS
# (Rust test binaries at once, default 2).
set -uo pipefail
cd "$(dirname "$0")/.."

CARGO="${CARGO:-cargo}"
MAKE="${MAKE:-make}"
LOGS=target/test-logs
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log "$LOGS"/*.took "$LOGS"/*.failed

# suite NAME COMMAND...: runs it, noting its wall time (and a failure) in $LOGS.
suite() {
  local name="$1" start
  shift
  start=$(date +%s)
  "$@" || touch "$LOGS/$name.failed"
  printf '%6d s  %s\n' $(($(date +%s) - start)) "$*" > "$LOGS/$name.took"
}

# The other side: each suite's output into its log.
others() {
  local name
  sleep 15
  for name in lint test-fuzz test-python-module test-python-sdk test-typescript test-embeddings test-controllers test-browser; do
    suite "$name" "$MAKE" --no-print-directory "$name" > "$LOGS/$name.log" 2>&1
  done
}

suite build-tests "$CARGO" test --release --workspace --no-run
suite prerequisites "$MAKE" --no-print-directory test-prerequisites

others &
others_pid=$!
suite cargo-test python3 scripts/rust-tests.py
wait "$others_pid"

for name in lint test-fuzz test-python-module test-python-sdk test-typescript test-embeddings test-controllers test-browser; do
  printf '\n===== %s =====\n' "$name"
  cat "$LOGS/$name.log" 2>/dev/null
done

status=0
{
  echo "make test: wall time per suite (the Rust tests beside the rest)"
  for name in build-tests prerequisites cargo-test lint test-fuzz test-python-module test-python-sdk test-typescript test-embeddings \
    test-controllers test-browser; do
    cat "$LOGS/$name.took" 2>/dev/null
    if [ -e "$LOGS/$name.failed" ]; then
      echo "        FAILED: $name"
      status=1
    fi
  done
} >&2
exit $status
