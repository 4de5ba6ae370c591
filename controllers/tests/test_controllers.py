"""kopf, metacontroller and the Node.js controller, each running the logic
component against a real kube-apiserver: after every step (create, update,
a feature turned off) its children and status equal what the Rust operator
made for the same CRs, and a second pass over unchanged CRs writes nothing
(audit log).

One control plane for the module. The Rust operator's results are taken
once, first, in a namespace of their own, and then removed:
metacontroller watches every namespace, so each framework runs alone."""

from __future__ import annotations

import copy
import time

import pytest

from cluster import MANIFEST, ControlPlane, eventually, settled, snapshot
from frameworks import FRAMEWORKS, Rust

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cache-sasl"},
          "stringData": {"password-file": "user:secret\n"}}


def parent(name: str, spec: dict) -> dict:
    # The version the module reconciles, from its manifest: not hard-coded.
    return {"apiVersion": MANIFEST.parent.api_version, "kind": MANIFEST.parent.kind,
            "metadata": {"name": name}, "spec": spec}


FEATURED = {
    "replicas": 3,
    "monitoring": {"enabled": True, "serviceMonitor": {"interval": "15s"}},
    "highAvailability": {"podDisruptionBudget": {"enabled": True, "minAvailable": 2}},
    "security": {"networkPolicy": {"enabled": True}},
}
SECURED = {"replicas": 2, "security": {"sasl": {"enabled": True, "credentialsSecretRef": {"name": "cache-sasl"}}}}


def steps() -> list[tuple[str, list[dict]]]:
    """The CRs after each step; each step applies its list."""
    created = [parent("plain", {}), parent("featured", FEATURED), parent("secured", SECURED)]
    updated = copy.deepcopy(created)
    updated[0]["spec"] = {"replicas": 2, "memcached": {"maxMemoryMB": 128}}
    updated[2]["spec"]["memcached"] = {"verbosity": 1}
    disabled = copy.deepcopy(updated)
    # Monitoring and the PDB off: the ServiceMonitor and the PDB must go.
    disabled[1]["spec"]["monitoring"] = {"enabled": False}
    disabled[1]["spec"]["highAvailability"] = {"podDisruptionBudget": {"enabled": False}}
    return [("create", created), ("update", updated), ("disable", disabled)]


CRS = len(steps()[0][1])
STEP_TIMEOUT = 40


@pytest.fixture(scope="module")
def plane():
    plane = ControlPlane()
    yield plane
    plane.stop()


def all_ready(plane: ControlPlane, namespace: str) -> bool:
    return all(
        any(c.get("type") == "Ready" and c.get("status") == "True" for c in (p.get("status") or {}).get("conditions", []))
        for p in plane.list(MANIFEST.parent, namespace)
    )


def run_steps(plane: ControlPlane, namespace: str, on_step) -> None:
    plane.create_namespace(namespace)
    plane.apply(namespace, [SECRET])
    for step, crs in steps():
        plane.apply(namespace, crs)
        on_step(step)


@pytest.fixture(scope="module")
def reference(plane):
    """The Rust operator's children and status after each step."""
    namespace = "ns-reference-rust"
    rust = Rust(plane, namespace).start()
    results = {}

    def take(step: str) -> None:
        # Settled: a status for every generation, and nothing changing for a second.
        eventually(lambda: settled(plane, namespace, CRS), STEP_TIMEOUT, f"the Rust operator to settle ({step})")
        if plane.pods:  # pods start: wait for them, or a framework would settle later than this snapshot
            eventually(lambda: all_ready(plane, namespace), STEP_TIMEOUT, f"every CR to be Ready ({step})")
        previous = None
        while (now := snapshot(plane, namespace)) != previous:
            previous = now
            time.sleep(1.0)
        results[step] = now

    try:
        run_steps(plane, namespace, take)
    finally:
        rust.stop()
    plane.delete_all(namespace)
    return results


def test_the_reference_shows_each_step(plane, reference):
    """The steps change what the comparison sees: the ServiceMonitor and PDB
    go in the last step, the update shows in the children."""
    created, updated, disabled = (reference[s] for s, _ in steps())
    assert "ServiceMonitor/featured" in created["featured"]["children"]
    assert "PodDisruptionBudget/featured" in created["featured"]["children"]
    assert "ServiceMonitor/featured" not in disabled["featured"]["children"]
    assert "PodDisruptionBudget/featured" not in disabled["featured"]["children"]
    assert created["plain"]["children"] != updated["plain"]["children"]
    assert created["plain"]["status"], "the reference wrote no status"
    if plane.pods:  # the status the frameworks must match includes ready pods
        assert created["secured"]["status"].get("readyReplicas") == SECURED["replicas"], created["secured"]["status"]


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_framework_matches_the_rust_operator_and_idles_without_writes(plane, reference, framework):
    namespace = f"ns-under-test-{framework}"
    controller = FRAMEWORKS[framework](plane, namespace).start()
    try:
        def check(step: str) -> None:
            want = reference[step]
            try:
                eventually(lambda: snapshot(plane, namespace) == want, STEP_TIMEOUT, f"{framework} to match ({step})")
            except TimeoutError:
                got = snapshot(plane, namespace)
                assert got == want, f"{framework} after {step} differs from the Rust operator\n{controller.log()}"

        first = plane.audit_mark()
        run_steps(plane, namespace, check)
        plane.audit_sync()
        # The audit log sees this controller's writes: children and the status subresource.
        first_pass = [w["verb"] + " " + w["uri"] for w in plane.writes_since(first, namespace)]
        assert any("/status" in w for w in first_pass), f"no status write by {framework}: {first_pass}"
        assert any(w.startswith("create") and "/deployments" in w for w in first_pass), first_pass
        assert any(w.startswith("delete") and "/servicemonitors/" in w for w in first_pass), first_pass

        if framework != "metacontroller":  # metacontroller reports no child changes as events
            events = plane.api.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
            reasons = {e.get("reason") for e in events if (e.get("regarding") or {}).get("kind") == MANIFEST.parent.kind}
            assert {"Created", "Deleted"} <= reasons, f"{framework}'s events on the parents: {reasons}"

        # The second pass: a restarted controller handles every unchanged CR again.
        time.sleep(2)  # the last step's trailing events
        mark = plane.audit_sync()
        controller.restart()
        eventually(lambda: controller.reconciles() >= CRS, STEP_TIMEOUT, f"{framework} to handle every CR again")
        time.sleep(2)  # writes a handler makes after its log line
        plane.audit_sync()
        writes = plane.writes_since(mark, namespace)
        assert writes == [], f"{framework} wrote on a pass over unchanged CRs: {writes}\n{controller.log()}"
        assert snapshot(plane, namespace) == reference[steps()[-1][0]]
    finally:
        controller.stop()
        plane.delete_all(namespace)
