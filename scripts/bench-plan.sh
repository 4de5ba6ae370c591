#!/usr/bin/env bash
# `make bench-plan`: `wasm-operator plan -f` of the Greeting module's v2
# against v1 over 1000 and 10,000 parents (PLAN_COUNTS=1000,10000), each
# with the ConfigMap v1 wrote for it, so every parent plans one update.
# Prints wall time, CPU time and peak resident memory per size (GNU time),
# and checks that the plan counted every update. Not a timed test.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOST="${HOST:-$ROOT/target/release/wasm-operator}"
COUNTS="${PLAN_COUNTS:-1000,10000}"
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench-plan: GNU time ($TIME) is needed (apt install time)" >&2; exit 1; }
for file in "$HOST" "$ROOT/target/greeting.wasm" "$ROOT/target/greeting-v2.wasm"; do
    [ -e "$file" ] || { echo "bench-plan: $file is missing (make build target/greeting-v2.wasm)" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "plan: greeting v2 against v1, -f over N parents each with its ConfigMap (one update per parent)"
echo "| parents | wall s | CPU s | peak RSS MiB | µs CPU per parent | updates planned |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in ${COUNTS//,/ }; do
    python3 - "$n" "$work" <<'PY'
import json, sys
n, work = int(sys.argv[1]), sys.argv[2]
with open(f"{work}/parents-{n}.json", "w") as parents, open(f"{work}/owned-{n}.json", "w") as owned:
    items, children = [], []
    for i in range(n):
        uid = f"00000000-0000-4000-8000-{i:012d}"
        items.append({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                      "metadata": {"name": f"g-{i}", "namespace": "bench", "uid": uid, "generation": 1},
                      "spec": {"message": f"hi {i}"}})
        children.append({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": f"g-{i}", "namespace": "bench", "resourceVersion": "1",
                                      "labels": {"app.kubernetes.io/managed-by": "greeting-operator",
                                                 "example.c5c3.io/greeting": f"g-{i}"},
                                      "ownerReferences": [{"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                                                           "name": f"g-{i}", "uid": uid, "controller": True,
                                                           "blockOwnerDeletion": True}]},
                         "data": {"message": f"hi {i}"}})
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, parents)
    json.dump({"apiVersion": "v1", "kind": "List", "items": children}, owned)
PY
    status=0
    "$TIME" -f "%e %U %S %M" -o "$work/time-$n" "$HOST" plan \
        --module "$ROOT/target/greeting-v2.wasm" --against "$ROOT/target/greeting.wasm" \
        -f "$work/parents-$n.json" --owned "$work/owned-$n.json" --now 2026-01-01T00:00:00Z -o json \
        >"$work/plan-$n.json" 2>"$work/stderr-$n" || status=$?
    if [ "$status" != 2 ]; then
        echo "bench-plan: plan over $n parents exited $status (2 expected: changes):" >&2
        tail -5 "$work/stderr-$n" >&2
        exit 1
    fi
    # GNU time notes a non-zero exit on a line of its own first.
    read -r wall user sys rss < <(tail -1 "$work/time-$n")
    updated="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["updated"])' "$work/plan-$n.json")"
    [ "$updated" = "$n" ] || { echo "bench-plan: $updated updates planned over $n parents, $n expected" >&2; exit 1; }
    awk -v n="$n" -v wall="$wall" -v user="$user" -v sys="$sys" -v rss="$rss" -v up="$updated" 'BEGIN {
        cpu = user + sys
        printf "| %d | %.2f | %.2f | %.1f | %.0f | %d |\n", n, wall, cpu, rss / 1024, cpu * 1e6 / n, up
    }'
done
