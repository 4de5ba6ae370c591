#!/usr/bin/env bash
# Print the path of a sigstore `cosign` CLI (signs the logic modules the
# module-signature tests push to the loopback registry).
#
#   cosign="$(scripts/cosign.sh | tail -n1)"
#
# stdout carries only the path; progress goes to stderr.
#  - COSIGN_BINARY set: check it runs and print it; build nothing.
#  - otherwise build github.com/sigstore/cosign/v2/cmd/cosign with the
#    machine's `go`, at the version pinned in tests/cosign/go.mod, into a cache
#    folder outside the repo keyed by that version. A second run finds it.
#
# Knobs: COSIGN_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/cosign),
#        GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'cosign: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/scripts/lib/go-cache.sh"
build_go_command cosign github.com/sigstore/cosign/v2 cmd/cosign COSIGN_BINARY COSIGN_CACHE_DIR
