#!/usr/bin/env bash
# Print the path of a CNCF distribution `registry` binary (the OCI registry the
# module-distribution tests run on loopback).
#
#   registry="$(scripts/registry.sh | tail -n1)"
#
# stdout carries only the path; progress goes to stderr.
#  - REGISTRY_BINARY set: check it runs and print it; build nothing.
#  - otherwise build github.com/distribution/distribution/v3/cmd/registry with
#    the machine's `go`, at the version pinned in tests/registry/go.mod, into a
#    cache folder outside the repo keyed by that version. A second run finds it.
#
# Knobs: REGISTRY_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/registry),
#        GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'registry: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/scripts/lib/go-cache.sh"
build_go_command registry github.com/distribution/distribution/v3 cmd/registry REGISTRY_BINARY REGISTRY_CACHE_DIR
