#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/) and runs each for a while; prints a table.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   fuzz each target SECONDS (default 60)
#   scripts/fuzz.sh merge [TARGET...]       minimize fuzz/corpus/<target> (a set cover of its features) with
#                                           what the runs found (target/fuzz/corpus)
#
# Every run starts by executing the kept corpus (fuzz/corpus/<target>) and the
# crash reproducers (fuzz/regressions/<target>), then mutates from there; what
# it finds goes to target/fuzz/corpus/<target>, a crash to
# target/fuzz/artifacts/<target>/. Exits 1 when a target crashed (or leaked,
# ran out of memory or time on one input).
#
# Nothing to install: libFuzzer comes with the libfuzzer-sys crate (built
# with the C++ compiler the Rust build already uses). The coverage flags are
# added by scripts/fuzz-rustc.sh to the code under test only; every other
# crate is the artifact the main workspace built (fuzz/Cargo.toml).
#
# FUZZ_FRESH=1 starts from the kept corpus alone (what earlier runs found in
# target/fuzz/corpus is left out and kept), as make test does: the same short
# run on every machine.
# FUZZ_OPT_LEVEL (default 0) is the code under test's opt-level: 0 builds in
# seconds, 1 takes minutes more and runs 3 to 5 times as many inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh cxx

TARGETS_ALL=(memcached watch_event answer quantity)
OPT_LEVEL=${FUZZ_OPT_LEVEL:-0}
WORK=target/fuzz

mode=run
seconds=60
if [ "${1:-}" = merge ]; then
    mode=merge
    shift
elif [[ ${1:-} =~ ^[0-9]+$ ]]; then
    seconds=$1
    shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${TARGETS_ALL[@]}")
for target in "${targets[@]}"; do
    [[ " ${TARGETS_ALL[*]} " == *" $target "* ]] || { echo "fuzz: no target $target (${TARGETS_ALL[*]})" >&2; exit 2; }
done

# The fuzz workspace must resolve the main workspace's versions, or its build
# is a second, cold one: every package it locks, but its own, as ../Cargo.lock.
locked() { awk '/^name = /{n=$3} /^version = /{print n, $3}' "$1" | tr -d '"' | sort -u; }
stale=$(comm -23 <(locked fuzz/Cargo.lock | grep -vE '^(libfuzzer-sys|memcached-logic-fuzzed|wasm-operator-fuzz) ') \
    <(locked Cargo.lock) || true)
if [ -n "$stale" ]; then
    echo "fuzz: fuzz/Cargo.lock differs from Cargo.lock in:" >&2
    echo "$stale" | sed 's/^/  /' >&2
    echo "fuzz: refresh it: cp Cargo.lock fuzz/Cargo.lock && cargo update --manifest-path fuzz/Cargo.toml -p libfuzzer-sys" >&2
    exit 2
fi

echo "fuzz: building the targets (code under test at opt-level $OPT_LEVEL)" >&2
build_start=$(date +%s)
RUSTC_WRAPPER="$PWD/scripts/fuzz-rustc.sh" cargo build --release --locked --quiet \
    --manifest-path fuzz/Cargo.toml --target-dir target \
    --config "profile.release.package.wasm-operator.opt-level=$OPT_LEVEL" \
    --config "profile.release.package.memcached-logic-fuzzed.opt-level=$OPT_LEVEL" \
    --config "profile.release.package.wasm-operator-fuzz.opt-level=$OPT_LEVEL"
echo "fuzz: built in $(($(date +%s) - build_start)) s" >&2

if [ "$mode" = merge ]; then
    for target in "${targets[@]}"; do
        merged=$WORK/merged/$target
        rm -rf "$merged"
        mkdir -p "$merged" "$WORK/corpus/$target"
        target/release/fuzz-"$target" -set_cover_merge=1 -rss_limit_mb=2048 "$merged" "fuzz/corpus/$target" \
            "$WORK/corpus/$target" 2>&1 | grep -E '^MERGE-OUTER: [0-9]+ new files' >&2 || true
        rm -rf "fuzz/corpus/$target"
        mv "$merged" "fuzz/corpus/$target"
        echo "fuzz: fuzz/corpus/$target: $(find "fuzz/corpus/$target" -type f | wc -l) inputs, $(du -sh --apparent-size "fuzz/corpus/$target" | cut -f1)" >&2
    done
    exit 0
fi

status=0
rows=()
for target in "${targets[@]}"; do
    corpus=$WORK/corpus/$target
    if [ "${FUZZ_FRESH:-0}" = 1 ]; then
        corpus=$WORK/fresh/$target
        rm -rf "$corpus"
    fi
    artifacts=$WORK/artifacts/$target
    log=$WORK/logs/$target.log
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")" "fuzz/regressions/$target"
    rm -f "$artifacts"/*
    echo "fuzz: $target for $seconds s" >&2
    # -timeout: seconds one input may take; -rss_limit_mb: the process's memory.
    if target/release/fuzz-"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" \
        "$corpus" "fuzz/corpus/$target" "fuzz/regressions/$target" >"$log" 2>&1; then
        :
    else
        status=1
    fi
    runs=$(awk '/^stat::number_of_executed_units:/{print $2}' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    crashes=$(find "$artifacts" -type f | wc -l)
    if [ "$crashes" -gt 0 ]; then
        status=1
        echo "fuzz: $target crashed; reproduce with target/release/fuzz-$target $(find "$artifacts" -type f | head -1)" >&2
        grep -m1 -A4 -E 'panicked at|ERROR: libFuzzer' "$log" >&2 || true
    elif [ "$status" -ne 0 ] && [ -z "$runs" ]; then
        echo "fuzz: $target did not run; see $log" >&2
        tail -5 "$log" >&2
    fi
    rows+=("$(printf '| %-11s | %7s | %10s | %6s | %8s | %7s |' "$target" "$seconds" "${runs:-?}" "${cov:-?}" "${ft:-?}" "$crashes")")
done

echo
echo "| target      | seconds |       runs |  edges | features | crashes |"
echo "|-------------|---------|------------|--------|----------|---------|"
printf '%s\n' "${rows[@]}"
exit $status
