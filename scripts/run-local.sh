#!/usr/bin/env bash
# `make run`: the operator against a cluster, from a fresh machine.
#
# Without a cluster in the environment (no KUBECONFIG, no ~/.kube/config):
#   starts the local control plane in its pods mode (etcd, kube-apiserver,
#   kube-controller-manager with every controller a cluster runs,
#   kube-scheduler, kwok as the fake kubelet of three fake Nodes, all from
#   `make envtest`, and a default StorageClass whose claims get hostPath
#   volumes) in $RUN_DIR, installs the Memcached CRD, a
#   ServiceMonitor CRD and the defaults policy (deploy/admission/), starts
#   the operator against it, applies samples,
#   waits until every CR is converged and Ready (its Pods scheduled, given
#   an IP and Ready; no container really runs), prints the objects the
#   operator created, the Pods with their addresses and each CR's status,
#   then keeps running (the operator's log follows) until Ctrl-C, and tears
#   everything down.
# With KUBECONFIG set (or ~/.kube/config present):
#   installs the Memcached CRD there with `kubectl apply` and runs the
#   operator in the foreground against that cluster; applies nothing else.
# With MODULE=path/to/module.wasm (any logic module, `make run MODULE=...`):
#   the same cluster (the local control plane in its pods mode, else the
#   kubeconfig's), then `wasm-operator --module MODULE dev` on it in the
#   foreground: it installs the module's CRD, runs the host on the file
#   (replace the file and the new version is verified and swapped in),
#   applies SAMPLES (files or folders) and prints the parents' status, the
#   objects they own and their events as they change, until Ctrl-C.
#
# Knobs (environment):
#   RUN_ONCE=1         exit after printing (local control plane only; used by tests)
#   LOCAL_CLUSTER=1    use the local control plane even when a kubeconfig exists
#   RUN_DIR            working folder for the local control plane (default target/run)
#   SAMPLES            samples to apply, names under deploy/samples (default "minimal everything");
#                      with MODULE: files or folders (YAML or JSON), space-separated (default none)
#   MODULE             a logic module file: run it with `wasm-operator dev` instead of Memcached
#   METRICS_ADDRESS    operator --metrics-bind-address (default 127.0.0.1:0, a free port), plain
#                      HTTP (--metrics-secure=false; OPERATOR_ARGS=--metrics-secure=true for HTTPS)
#   HEALTH_ADDRESS     operator --health-probe-bind-address (default 127.0.0.1:0)
#   OPERATOR_ARGS      more flags for `memcached-operator run`
#   CONVERGE_TIMEOUT   seconds to wait for the samples to converge and be Ready (default 120)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CALLER_DIR="$PWD"
cd "$ROOT"
OPERATOR="$ROOT/target/release/memcached-operator"
CONTROL_PLANE="$ROOT/target/release/control-plane"
RUN_DIR="${RUN_DIR:-$ROOT/target/run}"
SAMPLES_SET_BY_USER="${SAMPLES:+1}"
SAMPLES="${SAMPLES:-minimal everything}"
METRICS_ADDRESS="${METRICS_ADDRESS:-127.0.0.1:0}"
HEALTH_ADDRESS="${HEALTH_ADDRESS:-127.0.0.1:0}"
CONVERGE_TIMEOUT="${CONVERGE_TIMEOUT:-120}"
# Every kind the operator may own, for `kubectl get`.
OWNED_KINDS="deployments,services,poddisruptionbudgets,horizontalpodautoscalers,servicemonitors,networkpolicies"

if [ -t 2 ]; then
  log() { printf '\033[1mrun:\033[0m %s\n' "$*" >&2; }
else
  log() { printf 'run: %s\n' "$*" >&2; }
fi
die() { log "error: $*"; exit 1; }

# MODULE mode: `wasm-operator dev` on the module, its samples as paths (from
# where the script was started).
HOST="$ROOT/target/release/wasm-operator"
MODULE="${MODULE:-}"
DEV_ARGS=()
if [ -n "$MODULE" ]; then
  absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$CALLER_DIR/$1" ;; esac; }
  [ -x "$HOST" ] || die "$HOST is missing; \`make run MODULE=...\` builds it"
  MODULE="$(absolute "$MODULE")"
  [ -f "$MODULE" ] || die "no module file $MODULE"
  for sample in ${SAMPLES_SET_BY_USER:+$SAMPLES}; do
    sample="$(absolute "$sample")"
    [ -e "$sample" ] || die "no sample $sample"
    DEV_ARGS+=(-f "$sample")
  done
  [ "${RUN_ONCE:-}" = 1 ] && DEV_ARGS+=(--once --timeout "${CONVERGE_TIMEOUT}s")
  DEV_ARGS+=(--metrics-bind-address "$METRICS_ADDRESS" --health-probe-bind-address "$HEALTH_ADDRESS")
else
  [ -x "$OPERATOR" ] || die "$OPERATOR is missing; \`make run\` builds it"
fi

# ---------------------------------------------------------------------------
# An existing cluster: install the CRD, run the operator in the foreground.
# ---------------------------------------------------------------------------
if [ "${LOCAL_CLUSTER:-}" != 1 ] && { [ -n "${KUBECONFIG:-}" ] || [ -f "$HOME/.kube/config" ]; }; then
  KUBECTL="$(command -v kubectl || true)"
  if [ -z "$KUBECTL" ]; then
    log "no kubectl on PATH; using the one \`make envtest\` builds"
    KUBECTL="$(bash scripts/envtest.sh | tail -n1)/kubectl"
  fi
  context="$("$KUBECTL" config current-context 2>/dev/null || echo '?')"
  log "using the cluster from ${KUBECONFIG:-$HOME/.kube/config} (context $context)"
  if [ -n "$MODULE" ]; then
    log "wasm-operator dev on $MODULE (Ctrl-C stops it)"
    # shellcheck disable=SC2086 # OPERATOR_ARGS is a list of flags
    exec "$HOST" --module "$MODULE" dev "${DEV_ARGS[@]}" ${OPERATOR_ARGS:-}
  fi
  log "installing the Memcached CRD there: kubectl apply -f deploy/crd/"
  "$KUBECTL" apply --server-side --field-manager memcached-operator-make-run -f deploy/crd/
  "$KUBECTL" wait --for condition=established --timeout 60s crd/memcacheds.memcached.c5c3.io >/dev/null
  log "starting the operator (Ctrl-C stops it); try: kubectl apply -f deploy/samples/minimal.yaml"
  # A local run acts as you, as `dev` does (--module-identity=operator);
  # deploy/ gives the module its own ServiceAccount.
  # shellcheck disable=SC2086 # OPERATOR_ARGS is a list of flags
  exec "$OPERATOR" run --leader-elect=false --log-format text --module-identity=operator \
    --metrics-bind-address "$METRICS_ADDRESS" --metrics-secure=false --health-probe-bind-address "$HEALTH_ADDRESS" ${OPERATOR_ARGS:-}
fi

# ---------------------------------------------------------------------------
# The local control plane.
# ---------------------------------------------------------------------------
[ -x "$CONTROL_PLANE" ] || die "$CONTROL_PLANE is missing; \`make run\` builds it"
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
PIDS_FILE="$RUN_DIR/pids"

# One `make run` per folder: a live one keeps its processes in $PIDS_FILE.
if [ -f "$PIDS_FILE" ]; then
  while read -r pid; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      die "another run uses $RUN_DIR (pid $pid is alive); stop it, or set RUN_DIR"
    fi
  done <"$PIDS_FILE"
fi
rm -f "$PIDS_FILE" "$RUN_DIR/kubeconfig" "$RUN_DIR/operator.kubeconfig"

log "finding the control plane binaries (make envtest; the first time builds them, about 5 minutes)"
KUBEBUILDER_ASSETS="$(bash scripts/envtest.sh | tail -n1)"
export KUBEBUILDER_ASSETS
KUBECTL="$KUBEBUILDER_ASSETS/kubectl"
[ -x "$KUBECTL" ] || die "no kubectl in $KUBEBUILDER_ASSETS"

CP_PID=""
OPERATOR_PID=""
TAIL_PID=""

stop_process() { # pid name: SIGTERM, wait up to 30 s, then SIGKILL
  local pid="$1" name="$2" i
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name (pid $pid) did not stop in 30 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$?
  set +e # a failing step (even a log line to a closed pipe) must not stop the teardown
  trap - EXIT INT TERM
  # A closed terminal or a reader that went away must not cut the teardown short.
  trap '' HUP PIPE
  [ -n "$TAIL_PID" ] && { kill "$TAIL_PID" 2>/dev/null || true; wait "$TAIL_PID" 2>/dev/null || true; }
  if [ -n "$OPERATOR_PID$CP_PID" ]; then
    log "stopping the operator and the control plane"
  fi
  stop_process "$OPERATOR_PID" "the operator"
  stop_process "$CP_PID" "the control plane"
  rm -f "$PIDS_FILE"
  [ -n "$CP_PID" ] && log "stopped (logs in $RUN_DIR)"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE

log "starting the control plane with kube-scheduler and kwok in $RUN_DIR (log: $RUN_DIR/control-plane.log)"
"$CONTROL_PLANE" up --pods --dir "$RUN_DIR" >"$RUN_DIR/control-plane.log" 2>&1 &
CP_PID=$!
echo "$CP_PID" >>"$PIDS_FILE"
echo "control plane pid $CP_PID"

for _ in $(seq 1 1200); do
  [ -f "$RUN_DIR/kubeconfig" ] && break
  kill -0 "$CP_PID" 2>/dev/null || { tail -n 30 "$RUN_DIR/control-plane.log" >&2; die "the control plane exited"; }
  sleep 0.1
done
[ -f "$RUN_DIR/kubeconfig" ] || { tail -n 30 "$RUN_DIR/control-plane.log" >&2; die "the control plane was not up in 120 s"; }
export KUBECONFIG="$RUN_DIR/kubeconfig"
kubectl() { "$KUBECTL" "$@"; }

if [ -n "$MODULE" ]; then
  log "wasm-operator dev on $MODULE as the cluster admin (Ctrl-C stops it and the control plane)"
  log "  export KUBECONFIG=$KUBECONFIG  # for kubectl ($KUBECTL) beside it"
  # shellcheck disable=SC2086 # OPERATOR_ARGS is a list of flags
  "$HOST" --module "$MODULE" dev "${DEV_ARGS[@]}" ${OPERATOR_ARGS:-} &
  OPERATOR_PID=$!
  echo "$OPERATOR_PID" >>"$PIDS_FILE"
  echo "dev pid $OPERATOR_PID"
  status=0
  wait "$OPERATOR_PID" || status=$?
  OPERATOR_PID=""
  exit "$status"
fi

log "installing the CRDs (deploy/crd/, and tests/crds/ for ServiceMonitor)"
kubectl apply --server-side -f deploy/crd/ -f tests/crds/ >/dev/null
kubectl wait --for condition=established --timeout 60s \
  crd/memcacheds.memcached.c5c3.io crd/servicemonitors.monitoring.coreos.com >/dev/null

# The local control plane serves MutatingAdmissionPolicy (beta, switched on),
# so CRs read back with the defaults the Go operator's webhook stored. A
# policy takes effect once the API server has loaded it: wait until a
# server-side dry run of a CR without replicas comes back with its default.
log "installing the Memcached defaults policy (deploy/admission/)"
kubectl apply -k deploy/admission/ >/dev/null
probe='{"apiVersion":"memcached.c5c3.io/v1beta1","kind":"Memcached","metadata":{"name":"defaults-probe","namespace":"default"},"spec":{}}'
for _ in $(seq 1 150); do
  probed="$(printf '%s' "$probe" | kubectl create --dry-run=server -o 'jsonpath={.spec.replicas}' -f - 2>/dev/null || true)"
  [ "$probed" = 1 ] && break
  sleep 0.2
done
[ "${probed:-}" = 1 ] || die "the defaults policy (deploy/admission/) was not in effect after 30 s"

OPERATOR_LOG="$RUN_DIR/operator.log"
log "starting the operator as the cluster admin (log: $OPERATOR_LOG)"
# As the cluster admin, not as the module's own ServiceAccount (deploy/'s).
# shellcheck disable=SC2086 # OPERATOR_ARGS is a list of flags
NO_COLOR=1 "$OPERATOR" run --leader-elect=false --log-format text --module-identity=operator \
  --metrics-bind-address "$METRICS_ADDRESS" --metrics-secure=false --health-probe-bind-address "$HEALTH_ADDRESS" ${OPERATOR_ARGS:-} \
  >"$OPERATOR_LOG" 2>&1 &
OPERATOR_PID=$!
echo "$OPERATOR_PID" >>"$PIDS_FILE"
echo "operator pid $OPERATOR_PID"

# The HTTP status of GET http://HOST:PORT/PATH, with bash alone (no curl needed).
http_status() { # host:port path
  local host="${1%:*}" port="${1##*:}" line=""
  if exec 3<>"/dev/tcp/$host/$port"; then
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
    read -r -t 5 _ line _ <&3 || true
    exec 3<&- 3>&-
  fi 2>/dev/null
  printf '%s\n' "$line"
}

# The operator logs the addresses it bound (free ports by default).
address_of() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$OPERATOR_LOG" | head -n1; }
health=""
for _ in $(seq 1 300); do
  kill -0 "$OPERATOR_PID" 2>/dev/null || { cat "$OPERATOR_LOG" >&2; die "the operator exited"; }
  [ -n "$health" ] || health="$(address_of health_address)"
  if [ -n "$health" ] && [ "$(http_status "$health" /readyz)" = 200 ]; then
    break
  fi
  sleep 0.1
done
[ -n "$health" ] || die "the operator logged no health address (see $OPERATOR_LOG)"
metrics="$(address_of metrics_address)"
log "operator ready: http://$health/readyz, http://$metrics/metrics"

# ---------------------------------------------------------------------------
# Samples.
# ---------------------------------------------------------------------------
for sample in $SAMPLES; do
  file="deploy/samples/$sample.yaml"
  [ -f "$file" ] || die "no sample $file"
  namespace="$(sed -n 's/^  namespace: *//p' "$file" | head -n1)"
  if [ -n "$namespace" ] && ! kubectl get namespace "$namespace" >/dev/null 2>&1; then
    kubectl create namespace "$namespace" >/dev/null
  fi
  if [ "$sample" = everything ]; then
    # The Secrets it references (placeholders: kwok runs no container).
    log "creating the Secrets everything.yaml references, in namespace $namespace"
    kubectl -n "$namespace" create secret generic memcached-sasl \
      --from-literal=password-file='memcached:local-password' --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    kubectl -n "$namespace" create secret generic memcached-tls \
      --from-literal=tls.crt=placeholder --from-literal=tls.key=placeholder --from-literal=ca.crt=placeholder \
      --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  fi
  log "applying $file"
  kubectl apply -f "$file"
done

# The CRs not yet converged and Ready: Ready needs status.observedGeneration
# == metadata.generation, the Ready condition True, and readyReplicas equal to
# the Deployment's replicas, which an HPA must first have raised to its
# minReplicas (until then an autoscaled CR is "1/1 Ready").
pending_memcacheds() {
  local listing namespace name generation status observed conditions ready_replicas replicas min
  # A filter ([?(@.type=="Ready")]) fails on a status without conditions; a range does not.
  if ! listing="$(kubectl get memcacheds -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name} {.metadata.generation} {.status.observedGeneration}/{range .status.conditions[*]}{.type}={.status},{end}/{.status.readyReplicas}{"\n"}{end}' 2>&1)"; then
    printf '(kubectl get memcacheds failed: %s)\n' "$listing"
    return 0
  fi
  while read -r namespace name generation status; do
    [ -n "$name" ] || continue
    IFS=/ read -r observed conditions ready_replicas <<<"$status"
    replicas="$(kubectl -n "$namespace" get deployment "$name" -o jsonpath='{.spec.replicas}' 2>/dev/null || true)"
    min="$(kubectl -n "$namespace" get horizontalpodautoscaler "$name" -o jsonpath='{.spec.minReplicas}' 2>/dev/null || true)"
    if [ "$observed" != "$generation" ] || [[ ",$conditions" != *",Ready=True,"* ]] || [ "$ready_replicas" != "$replicas" ] ||
      { [ -n "$min" ] && [ "${replicas:-0}" -lt "$min" ]; }; then
      printf '%s/%s\n' "$namespace" "$name"
    fi
  done <<<"$listing"
}

log "waiting until every Memcached is converged and Ready (its Pods scheduled and Ready)"
converged=""
for _ in $(seq 1 $((CONVERGE_TIMEOUT * 2))); do
  kill -0 "$OPERATOR_PID" 2>/dev/null || { tail -n 30 "$OPERATOR_LOG" >&2; die "the operator exited"; }
  pending="$(pending_memcacheds)"
  if [ -z "$pending" ]; then converged=1; break; fi
  sleep 0.5
done
if [ -z "$converged" ]; then
  tail -n 30 "$OPERATOR_LOG" >&2
  kubectl get memcacheds,deployments,pods -A -o wide >&2 || true
  die "not converged and Ready in ${CONVERGE_TIMEOUT}s: $pending"
fi

echo
echo "== Objects the operator created"
kubectl get "$OWNED_KINDS" -A -o wide
echo
echo "== Pods (scheduled by kube-scheduler onto kwok's fake Nodes, which give them an IP and make them Ready)"
kubectl get pods -A -o wide
echo
echo "== Memcached status"
kubectl get memcacheds -A
kubectl get memcacheds -A -o jsonpath='{range .items[*]}{"\n"}{.metadata.namespace}/{.metadata.name} (generation {.metadata.generation}, observedGeneration {.status.observedGeneration}):{"\n"}  replicas={.spec.replicas} readyReplicas={.status.readyReplicas} serverList={.status.serverList}{"\n"}{range .status.conditions[*]}  {.type}={.status} {.reason}: {.message}{"\n"}{end}{end}'
echo
echo "== Pod addresses behind each Memcached's Service (its EndpointSlices)"
kubectl get memcacheds -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name}{"\n"}{end}' |
  while read -r namespace name; do
    # address=ready pairs (a filter would fail on a slice without endpoints).
    endpoints="$(kubectl -n "$namespace" get endpointslices -l "kubernetes.io/service-name=$name" \
      -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]}={.conditions.ready} {end}' || true)"
    addresses=""
    for endpoint in $endpoints; do
      if [ "${endpoint#*=}" = true ]; then addresses="$addresses ${endpoint%%=*}"; fi
    done
    printf '%s/%s:%s\n' "$namespace" "$name" "$addresses"
  done
echo
echo "== Events"
kubectl get events -A --field-selector involvedObject.kind=Memcached --sort-by=.lastTimestamp | tail -n 20
echo

if [ "${RUN_ONCE:-}" = 1 ]; then
  log "RUN_ONCE=1: done"
  exit 0
fi

cat >&2 <<EOF
$(log "running; Ctrl-C stops the operator and the control plane")
  export KUBECONFIG=$KUBECONFIG
  $KUBECTL get memcacheds -A
  curl -s http://$metrics/metrics
The operator's log follows.
EOF
tail -n 0 -f "$OPERATOR_LOG" &
TAIL_PID=$!
# Returns when the operator exits, or when a signal runs the traps.
wait "$OPERATOR_PID" || true
log "the operator exited"
