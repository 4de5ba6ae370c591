"""Time to converge N CRs and peak memory, for the Rust host and each
framework, one after another against one local control plane
(`make bench-controllers`; not a test).

Each controller starts alone on an empty namespace and is given 3 s to
settle; then N CRs (every third one with monitoring, a PDB and a
NetworkPolicy) are created, and the clock stops when every CR has the
children the Rust operator's `render` lists for it and a status for its
generation. Memory: the peak resident set of the controller's processes
(metacontroller: its binary plus the hook server), sampled every 100 ms.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time
from pathlib import Path

from cluster import MANIFEST, OPERATOR, ControlPlane, eventually, owned_children, settled
from frameworks import FRAMEWORKS, Metacontroller, Rust


def crs(count: int) -> list[dict]:
    result = []
    for i in range(count):
        spec: dict = {"replicas": 1 + i % 3}
        if i % 3 == 0:
            spec["monitoring"] = {"enabled": True}
            spec["highAvailability"] = {"podDisruptionBudget": {"enabled": True}}
            spec["security"] = {"networkPolicy": {"enabled": True}}
        result.append({"apiVersion": MANIFEST.parent.api_version, "kind": MANIFEST.parent.kind,
                       "metadata": {"name": f"cache-{i:04d}", "namespace": "bench"}, "spec": spec})
    return result


def expected_children(objects: list[dict]) -> dict[str, set[str]]:
    """Per CR, the children `memcached-operator render` prints for it."""
    documents = "".join(f"---\n{json.dumps(obj)}\n" for obj in objects)
    rendered = subprocess.run([OPERATOR, "render", "-f", "-", "-o", "json"], input=documents, capture_output=True,
                              text=True, check=True).stdout
    want: dict[str, set[str]] = {obj["metadata"]["name"]: set() for obj in objects}
    for child in json.loads(rendered)["items"]:
        owner = child["metadata"]["ownerReferences"][0]["name"]
        want[owner].add(f"{child['kind']}/{child['metadata']['name']}")
    return want


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks (100 Hz)
    except OSError:
        return 0.0


class PeakMemory:
    def __init__(self, pids: list[int]):
        self.pids, self.peak, self.cpu, self.running = pids, 0, {}, True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, sum(rss_kib(p) for p in self.pids))
            for p in self.pids:
                self.cpu[p] = max(self.cpu.get(p, 0.0), cpu_seconds(p))
            time.sleep(0.1)

    def stop(self) -> tuple[float, float]:
        self.running = False
        self.thread.join()
        return self.peak / 1024, sum(self.cpu.values())


def bench(plane: ControlPlane, make, objects: list[dict], want: dict[str, set[str]]) -> dict:
    namespace = "bench"
    controller = make(plane, namespace).start()
    try:
        time.sleep(3)
        memory = PeakMemory(controller.pids())
        started = time.monotonic()
        plane.apply(namespace, objects)
        created = time.monotonic() - started

        def converged() -> bool:
            children = owned_children(plane, namespace)
            have = {name: {f"{c['kind']}/{c['metadata']['name']}" for c in objs} for name, objs in children.items()}
            return all(have.get(name) == kinds for name, kinds in want.items()) and settled(plane, namespace, len(want))

        eventually(converged, 600, f"{controller.name} to converge {len(objects)} CRs", interval=0.5)
        took = time.monotonic() - started
        peak, cpu = memory.stop()
        return {"name": controller.name, "created": created, "converged": took, "peak_mib": peak, "cpu_s": cpu}
    finally:
        controller.stop()
        plane.delete_all(namespace, timeout=300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--crs", type=int, default=100)
    parser.add_argument("--only", action="append", help="rust, kopf, metacontroller or node (repeatable; default: all)")
    args = parser.parse_args()
    objects = crs(args.crs)
    want = expected_children(objects)
    # No pods: the table is about the controllers' own work.
    plane = ControlPlane(pods=False)
    try:
        plane.create_namespace("bench")
        makers = [Rust, *(FRAMEWORKS[name] for name in sorted(FRAMEWORKS))]
        makers = [m for m in makers if not args.only or m.name in args.only]
        rows = []
        for make in makers:
            # metacontroller's client-go allows 5 requests/s by default; lifted
            # so the table measures the framework, not that throttle.
            factory = (lambda p, n: Metacontroller(p, n, qps=200, burst=400)) if make is Metacontroller else make
            rows.append(bench(plane, factory, objects, want))
            print(f"{rows[-1]['name']}: {rows[-1]}", flush=True)
    finally:
        plane.stop()
    print(f"\n| controller | {args.crs} CRs created (s) | converged (s) | peak memory (MiB) | CPU (s) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        cells = [f"{row['created']:.1f}", f"{row['converged']:.1f}", f"{row['peak_mib']:.0f}", f"{row['cpu_s']:.1f}"]
        print(f"| {row['name']} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
