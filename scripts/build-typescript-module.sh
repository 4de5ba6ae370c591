#!/usr/bin/env bash
# Builds a TypeScript logic module into a component with componentize-js,
# against wit/controller (world `logic-module-reach`):
#
#   scripts/build-typescript-module.sh [MODULE_DIR] [OUT]
#
# MODULE_DIR (default tests/modules/notice-ts) holds package.json,
# package-lock.json and src/app.ts, the entry that exports `reconciler`; OUT
# defaults to target/<folder name>.wasm. Steps: `npm ci` (the pinned
# dependencies: componentize-js, esbuild, the SDK) when node_modules is
# missing or older than the lock, in sdk/typescript and in the module; the
# SDK compiled (tsc, into sdk/typescript/dist); the module and the SDK bundled
# into one ES module by esbuild (componentize-js takes one source; the
# contract's `wasm-operator:controller/...` imports stay imports; `*.yaml`
# files are imported as text), from an entry that exports what src/app.ts
# exports and `writes`, the write model its `reconciler` was defined with
# (the SDK's `writesOf`), `reach`, its `desired` told the time with the timer
# it asks for (`reachOf`), and `admission` (the SDK's: no part); then
# componentize-js.
#
# Knobs (environment): WIT_DIR (default wit/controller); JS_FEATURES, the
# componentize-js engine features to keep (default none: the component then
# imports no WASI at all, only what the module imports of the contract; any of
# stdio random clocks http fetch-event; `now` comes from the host, and
# without `random` Math.random is deterministic).
set -euo pipefail
cd "$(dirname "$0")/.."

module=${1:-tests/modules/notice-ts}
name=$(basename "$module")
out=${2:-target/$name.wasm}
wit=${WIT_DIR:-wit/controller}
sdk=sdk/typescript

# npm ci when node_modules is missing or older than package-lock.json (npm ci
# writes node_modules/.package-lock.json).
install() {
    local dir=$1 stamp=$1/node_modules/.package-lock.json
    if [ ! -f "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
        (cd "$dir" && npm ci --no-audit --no-fund)
    fi
}

install "$sdk"
(cd "$sdk" && npm run --silent build)
install "$module"

disable=()
for feature in stdio random clocks http fetch-event; do
    case " ${JS_FEATURES:-} " in
        *" $feature "*) ;;
        *) disable+=("$feature") ;;
    esac
done
disable_flags=()
if [ ${#disable[@]} -gt 0 ]; then disable_flags=(--disable "${disable[@]}"); fi

mkdir -p "$(dirname "$out")"
bundle=$out.bundle.js
bundle_path="$(cd "$(dirname "$bundle")" && pwd)/$(basename "$bundle")"
bin=$module/node_modules/.bin
# The entry is read from standard input in the module's folder, which resolves
# its imports as src/app.ts resolves its own (the same SDK).
(cd "$module" && node_modules/.bin/esbuild --bundle --format=esm --platform=neutral --log-level=warning \
    --loader:.yaml=text '--external:wasm-operator:*' --sourcefile=component.ts --loader=ts \
    --outfile="$bundle_path") <<'END'
export * from "./src/app.ts";
import { reconciler } from "./src/app.ts";
import { reachOf, writesOf } from "@wasm-operator/sdk";
export const writes = writesOf(reconciler);
export const reach = reachOf(reconciler);
export { admission } from "@wasm-operator/sdk";
END
# Write next to the output and rename, so a failed build leaves no half file.
"$bin/componentize-js" --wit "$wit" --world-name logic-module-reach "${disable_flags[@]}" -o "$out.tmp" "$bundle"
mv "$out.tmp" "$out"
echo "built $(pwd)/$out ($(wc -c < "$out") bytes)"
