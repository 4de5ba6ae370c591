#!/usr/bin/env bash
# The RUSTC_WRAPPER of the fuzz build (scripts/fuzz.sh): adds sanitizer
# coverage, as cargo-fuzz passes it with `--sanitizer none`, to the code under
# test only: the crates fuzz/Cargo.toml gives line tables (a profile
# override, so their artifacts are their own, never the ones `make build`
# links; a crate without it is never instrumented). Every other crate is
# compiled as the main workspace compiles it, so the fuzz build reuses those
# artifacts. Build scripts and proc macros run in the compiler, without
# libFuzzer: never instrumented.
set -euo pipefail
rustc=$1
shift
case "${CARGO_PKG_NAME:-}" in
    wasm-operator | memcached-logic-fuzzed | wasm-operator-fuzz) ;;
    *) exec "$rustc" "$@" ;;
esac
args=" $* "
if [[ $args != *" -C debuginfo=line-tables-only "* || $args == *" --crate-name build_script_"* ||
    $args == *" --crate-type proc-macro "* ]]; then
    exec "$rustc" "$@"
fi
exec "$rustc" "$@" \
    -Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares \
    --cfg fuzzing --check-cfg 'cfg(fuzzing)'
