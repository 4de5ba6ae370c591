# Sourced by the scripts that build a Go tool once, with the machine's `go`,
# into a cache folder outside the repo keyed by its version (registry.sh,
# helm.sh, metacontroller.sh, go-operator.sh). The caller defines log and
# die, and sets CACHE_ROOT (the tool's cache) and OUT (this version's folder)
# before using these.

# Prints RESULT and exits when CHECK (a command and its arguments) passes:
# what an earlier run built.
#   use_cached RESULT CHECK...
use_cached() {
  local result="$1"
  shift
  if "$@"; then
    log "cached: $result"
    printf '%s\n' "$result"
    exit 0
  fi
}

# Sets GO: $GO, else `go` on PATH, else /usr/local/go/bin/go.
go_toolchain() {
  GO="${GO:-}"
  if [ -z "$GO" ]; then
    if command -v go >/dev/null 2>&1; then GO=go
    elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
    else die "no go toolchain found (set GO=/path/to/go)"
    fi
  fi
}

# One build per version at a time (parallel test binaries, make -j): holds
# $OUT.lock until the script exits, and when another run built it meanwhile,
# prints RESULT and exits.
#   lock_build RESULT CHECK...
lock_build() {
  local result="$1"
  shift
  command -v flock >/dev/null 2>&1 || return 0
  exec 9>"$OUT.lock"
  if ! flock -n 9; then
    log "another build holds $OUT.lock; waiting"
    flock 9
  fi
  if "$@"; then
    log "cached (built by another run): $result"
    printf '%s\n' "$result"
    exit 0
  fi
}

# Sets STAGE, a fresh folder in the cache (same file system, so the result
# moves into place atomically), removed when the script exits.
make_stage() {
  STAGE="$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")"
  trap 'rm -rf "$STAGE"' EXIT
}

# True when $1 is an executable file.
is_binary() { [ -f "$1" ] && [ -x "$1" ]; }
