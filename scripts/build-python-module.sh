#!/usr/bin/env bash
# Builds a Python logic module into a component with componentize-py:
#
#   scripts/build-python-module.sh [MODULE_DIR] [OUT]
#
# MODULE_DIR (default tests/modules/echo-py) holds app.py, which exports
# `Reconciler`; OUT defaults to target/<folder name>.wasm (the Echo module:
# target/echo-py.wasm). It is built against wit/controller (world
# `logic-module-reach`), with the Python SDK (sdk/python/src: the package
# wasm_operator_sdk, nothing else) on its path, from the SDK's entry
# (wasm_operator_sdk.entry: app.py's `Reconciler`, `Writes`, the write
# model its module declares, and `Reach` and `Admission`: its `desired`
# told the time, with the timer it asks for). Installs what is missing first: a venv at
# target/venv-componentize with the pinned tests/modules/echo-py/requirements.txt
# (componentize-py and pytest), reinstalled when that file changes.
#
# Knobs (environment): PYTHON (default python3) makes the venv; WIT_DIR
# (default wit/controller) is the contract; OUT, the output when no argument
# names it;
# STUB_WASI=1 replaces every WASI import by a trapping stub (componentize-py
# -s), for a component that imports nothing (its PRNG seed is then fixed at
# build time; the module uses no randomness, clock, file or stdout).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=target/venv-componentize
module=${1:-tests/modules/echo-py}
# The toolchain's pins, whichever module is built.
requirements=tests/modules/echo-py/requirements.txt
stamp=$venv/.requirements-installed
wit=${WIT_DIR:-wit/controller}
out=${2:-${OUT:-target/$(basename "$module").wasm}}

if [ ! -x "$venv/bin/python" ]; then
    mkdir -p target
    "$python" -m venv "$venv"
fi
if ! cmp -s "$requirements" "$stamp"; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$stamp"
fi

mkdir -p "$(dirname "$out")"
# componentize-py bundles every file of the folders on its path, and writes
# bytecode into them as it imports the module: no bytecode a test run left in
# the module's folder, and the SDK from a copy, so that sdk/python/src (which
# the host binary embeds, host/build.rs) never changes and never makes cargo
# rebuild the host.
find "$module" -name __pycache__ -type d -prune -exec rm -rf {} +
sdk_copy=target/python-sdk-src
rm -rf "$sdk_copy"
mkdir -p "$sdk_copy"
cp -r sdk/python/src/wasm_operator_sdk "$sdk_copy/"
find "$sdk_copy" -name __pycache__ -type d -prune -exec rm -rf {} +
# componentize-py adds a venv's site-packages to the module's path: with no
# VIRTUAL_ENV it asks whichever `python` is first on PATH, so name ours (its
# packages are pinned; the module imports none of them).
export VIRTUAL_ENV="$(pwd)/$venv"
# Write next to the output and rename, so a failed build leaves no half file.
stub=()
if [ "${STUB_WASI:-0}" = 1 ]; then stub=(-s); fi
"$venv/bin/componentize-py" -d "$wit" -w logic-module-reach \
    componentize wasm_operator_sdk.entry -p "$module" -p "$sdk_copy" "${stub[@]}" -o "$out.tmp"
mv "$out.tmp" "$out"
echo "built $(pwd)/$out ($(wc -c < "$out") bytes)"
