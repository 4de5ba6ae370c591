#!/usr/bin/env bash
# Print the path of a Toxiproxy server binary (the TCP proxy `make soak` puts
# between each operator replica and the API server to inject latency,
# connection resets and partitions).
#
#   toxiproxy="$(scripts/toxiproxy.sh | tail -n1)"
#
# stdout carries only the path; progress goes to stderr.
#  - TOXIPROXY_BINARY set: check it runs and print it; build nothing.
#  - otherwise build github.com/Shopify/toxiproxy/v2/cmd/server with the
#    machine's `go`, at the version pinned in tests/toxiproxy/go.mod, into a
#    cache folder outside the repo keyed by that version. A second run finds it.
#
# Knobs: TOXIPROXY_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/toxiproxy),
#        GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'toxiproxy: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/scripts/lib/go-cache.sh"
build_go_command toxiproxy github.com/Shopify/toxiproxy/v2 cmd/server TOXIPROXY_BINARY TOXIPROXY_CACHE_DIR
