# Sourced by the scripts that build a Go tool once, with the machine's `go`,
# into a cache folder outside the repo keyed by its version (registry.sh,
# helm.sh, metacontroller.sh, go-operator.sh, cosign.sh). The caller defines log and
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

# The whole of a script that builds one command of a Go module: prints its
# path. The version is the module's in tests/NAME/go.mod; the cache is
# $CACHE_DIR_VAR, else ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/NAME;
# $BINARY_VAR (a path) skips the build. Used by registry.sh and cosign.sh.
#   build_go_command NAME MODULE COMMAND_PACKAGE BINARY_VAR CACHE_DIR_VAR
build_go_command() {
  local name="$1" module="$2" package="$3" binary_var="$4" cache_var="$5"
  local given="${!binary_var:-}"
  if [ -n "$given" ]; then
    [ -x "$given" ] || die "$binary_var=$given is not an executable file"
    log "using $binary_var=$given"
    printf '%s\n' "$given"
    exit 0
  fi
  local mod="$ROOT/tests/$name" version
  version="$(awk -v m="$module" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { print ($1 == "require") ? $3 : $2; exit }' "$mod/go.mod")"
  [ -n "$version" ] || die "no $module version in $mod/go.mod"
  local cache_dir="${!cache_var:-}"
  CACHE_ROOT="${cache_dir:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/$name}"
  OUT="$CACHE_ROOT/${version#v}"
  local binary="$OUT/$name"
  mkdir -p "$CACHE_ROOT"
  use_cached "$binary" is_binary "$binary"
  go_toolchain
  lock_build "$binary" is_binary "$binary"
  make_stage
  log "building $module $version (minutes on 2 cores when the Go caches are cold)"
  local start=$SECONDS
  (cd "$mod" && CGO_ENABLED=0 "$GO" build -p 2 -mod=readonly -trimpath -ldflags="-s -w" \
    -o "$STAGE/$name" "$module/$package")
  mkdir -p "$OUT"
  mv -f "$STAGE/$name" "$binary"
  log "built in $((SECONDS - start))s: $binary"
  printf '%s\n' "$binary"
}
