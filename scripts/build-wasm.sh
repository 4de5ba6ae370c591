#!/usr/bin/env bash
# Builds a logic module for wasm32-unknown-unknown and turns it into a
# component with zero imports: by default the guest, at target/memcached.wasm;
# `build-wasm.sh DIR PACKAGE OUT [FEATURES]` builds another (the tests'
# second module, and its variants by cargo feature).
#
# With a rustup toolchain that has the wasm32-unknown-unknown target, that
# toolchain builds it. Otherwise (this project's machines: rustup's target
# cannot be downloaded) Debian's rustc-web toolchain builds the standard
# library from source with -Zbuild-std; scripts/install-deps.sh installs it.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-guest}
package=${2:-memcached-logic}
out=${3:-target/memcached.wasm}
features=${4:-}
root=$(pwd)
core=target/wasm/wasm32-unknown-unknown/release/${package//-/_}.wasm

# The guest wants speed and size: fat LTO, one codegen unit, and no
# unwinding machinery (a panic traps; the guest is written not to panic).
# Given to the wasm build alone: the host's build below, with them, would be
# another build of the whole host (ten minutes cold on 2 cores) that no
# other build shares.
wasm_profile=(CARGO_PROFILE_RELEASE_LTO=true CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_PROFILE_RELEASE_PANIC=abort)
# A 512 KiB stack, and a 2 MiB initial memory: stack, data, and room for a
# reconcile's heap, which the guest's allocator takes from the initial pages
# (guest/src/heap.rs) so that a fresh instance never grows its memory (each
# growth costs a pooling host two mprotect calls). Pages never touched cost
# a pooling host nothing to reset.
#
# LLVM's inline threshold lowered from 225: at the default, serde's
# derived deserializers of the Kubernetes types (a Deployment's PodSpec and
# Volumes) are inlined into a few giant functions, and compiling the
# component then takes ~0.8 GiB (cranelift's register allocator on those
# functions) and ~12 s. The Memcached module (hand-written serializers) at
# 75 takes ~190 MiB and ~4 s, its code is smaller, and a reconcile's call
# runs as fast (`make bench-compile`, `make bench`; README "Compiling new
# versions"). A module on the Rust SDK deserializes whole k8s-openapi types
# (the StaticSite's Deployment): at 75 its compile still needs 512-768 MiB,
# at 25 under 192 MiB, inside the operator's default bound of 256 MiB.
threshold=25
if [ "$package" = memcached-logic ]; then threshold=75; fi
wasm_profile+=("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS=-C link-arg=-zstack-size=524288 -C link-arg=--initial-memory=2097152 -C llvm-args=-inline-threshold=$threshold")

if rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    echo "build-wasm: using rustup's wasm32-unknown-unknown target" >&2
    env "${wasm_profile[@]}" cargo build --release -p "$package" --lib --target wasm32-unknown-unknown --target-dir target/wasm \
        ${features:+--features "$features"}
else
    if [ ! -x /usr/bin/cargo ] || [ ! -d /usr/lib/rustlib/src/rust/library ]; then
        bash scripts/install-deps.sh wasm
    fi
    echo "build-wasm: using Debian's rustc-web with -Zbuild-std" >&2
    # /usr/bin first, so that this cargo runs its own rustc, not rustup's.
    (cd "$dir" && env "${wasm_profile[@]}" PATH=/usr/bin:$PATH RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
        /usr/bin/cargo build --release --lib --target wasm32-unknown-unknown \
        -Zbuild-std=std,panic_abort --target-dir "$root/target/wasm" ${features:+--features "$features"})
fi

# `wasm-operator componentize` wraps the core module into a component: the
# Memcached module must import nothing; others may import the contract's log.
# The Memcached module's functions that a reconcile runs are laid out first
# (guest/link/serving-functions.txt, `make guest-code-order`): the operator
# maps the compiled code from its file, and together they fault in a third
# as many pages.
only=()
if [ "$package" = memcached-logic ]; then only=(--no-imports --function-order guest/link/serving-functions.txt); fi
# Built as every other build here is (`--workspace --bin`), with the
# workspace's features: `cargo run -p` would resolve them anew and rebuild
# wasmtime and kube for it.
cargo build --quiet --release --workspace --bin wasm-operator
target/release/wasm-operator componentize "$core" "$out" "${only[@]}"
