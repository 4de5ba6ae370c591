#!/usr/bin/env bash
# Installs what the build and tests need and a fresh machine lacks.
#   install-deps.sh wasm   Debian's rustc-web toolchain (rustc 1.96 with the
#                          standard library's source), when rustup has no
#                          wasm32-unknown-unknown target.
#   install-deps.sh browser  Debian's chromium, which the playground's browser
#                          test drives (playwright's own browser downloads
#                          are not reachable here).
#   install-deps.sh cxx    a C++ compiler, which libFuzzer (fuzz/) is built with.
set -euo pipefail

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "install-deps: need root to run: $*" >&2; exit 1
    fi
}

apt_install() {
    local missing=()
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "install-deps: installing ${missing[*]}" >&2
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

for what in "$@"; do
    case "$what" in
        wasm)
            if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
                apt_install rustc-web cargo-web rust-web-src rust-web-llvm lld-22
            fi
            ;;
        browser)
            [ -x /usr/bin/chromium ] || apt_install chromium
            ;;
        cxx)
            command -v c++ >/dev/null || apt_install g++
            ;;
        *) echo "install-deps: unknown set $what" >&2; exit 2 ;;
    esac
done
