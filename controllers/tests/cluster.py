"""What the controller tests and the benchmark share: a local control plane
(tests/control-plane's `control-plane up`), REST calls as its admin, the API
server's audit log, controller processes, and the comparison of what two
controllers made (children and status, normalized)."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "python"))
sys.path.insert(0, str(ROOT / "controllers" / "kopf"))
from memcached_logic import Logic  # noqa: E402
from writes import Writer, collection_path  # noqa: E402

# Writes these make are the control plane's, not a controller's under test.
CONTROL_PLANE_AGENTS = ("kube-controller-manager/", "kube-scheduler/")
MANIFEST = Logic(os.environ.get("MEMCACHED_WASM") or ROOT / "target" / "memcached.wasm").instance().manifest()
# How often `apply` reads again after a 409 before it gives up.
CONFLICT_RETRIES = 5
PYTHON = ROOT / "target" / "venv-controllers" / "bin" / "python"
KOPF = ROOT / "target" / "venv-controllers" / "bin" / "kopf"
CONTROL_PLANE = ROOT / "target" / "release" / "control-plane"
OPERATOR = ROOT / "target" / "release" / "memcached-operator"

# What the API server or the framework fills in, not what the logic decided.
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "namespace")
# Framework bookkeeping on children, named so a reader sees every exception:
# metacontroller's 3-way-merge memory and the label its generated selector
# claims children by.
FRAMEWORK_ANNOTATIONS = ("metacontroller.k8s.io/last-applied-configuration",)
FRAMEWORK_LABELS = ("controller-uid",)


class ControlPlane:
    """`control-plane up` as a child process: etcd, kube-apiserver (audit
    log on) and kube-controller-manager on loopback."""

    def __init__(self, pods: bool = True) -> None:
        # With pods that start (kube-scheduler and kwok's fake nodes) where the
        # binary offers them, so Deployments become ready and the status shows it.
        usage = subprocess.run([str(CONTROL_PLANE), "--help"], capture_output=True, text=True).stderr
        self.pods = pods and "--pods" in usage
        self.process = subprocess.Popen(
            [str(CONTROL_PLANE), "up", *(["--pods"] if self.pods else [])],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.env: dict[str, str] = {}
        for line in self.process.stdout:
            key, _, value = line.strip().partition("=")
            self.env[key] = value
            if key == "KUBEBUILDER_ASSETS":
                break
        if "KUBECONFIG" not in self.env:
            raise RuntimeError(f"control-plane up did not start: {self.process.stderr.read()[-2000:]}")
        threading.Thread(target=self.process.stderr.read, daemon=True).start()  # drain
        self.kubeconfig = self.env["KUBECONFIG"]
        # Without --dir the kubeconfig sits in the plane's own folder, beside audit.log.
        self.audit_log = Path(self.kubeconfig).parent / "audit.log"
        self.api = Writer(kube_config.new_client_from_config(self.kubeconfig), "controller-tests")
        metacontroller_crds = ROOT / "third_party" / "metacontroller" / "manifests" / "production"
        for path in [ROOT / "tests" / "crds", *sorted((ROOT / "deploy" / "crd").glob("*.yaml")),
                     metacontroller_crds / "metacontroller-crds-v1.yaml"]:
            self.kubectl("apply", "--server-side", "-f", str(path))
        self.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

    def kubectl(self, *args: str, input: Optional[str] = None) -> str:
        kubectl = Path(self.env["KUBEBUILDER_ASSETS"]) / "kubectl"
        done = subprocess.run([str(kubectl), "--kubeconfig", self.kubeconfig, *args], input=input,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr}")
        return done.stdout

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()

    # ---- objects ----

    def list(self, kind: Any, namespace: str) -> list[dict]:
        answer = self.api.request("GET", collection_path(kind, namespace))
        api_version = kind.api_version
        return [{**item, "apiVersion": api_version, "kind": kind.kind} for item in answer["items"]]

    def create_namespace(self, name: str) -> None:
        self.api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def apply(self, namespace: str, objects: Iterable[dict]) -> None:
        """Creates each object, or replaces it keeping the server's resourceVersion."""
        for obj in objects:
            obj = copy.deepcopy(obj)
            obj["metadata"]["namespace"] = namespace
            kind = kind_of(obj)
            # The controller writes status at the same time; like any client doing a
            # read-modify-write, a 409 means read again and retry.
            for attempt in range(CONFLICT_RETRIES):
                current = self.api.get(kind, namespace, obj["metadata"]["name"])
                try:
                    if current is None:
                        self.api.create(kind, namespace, obj)
                    else:
                        obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                        obj["status"] = current.get("status")
                        self.api.replace(kind, namespace, obj)
                    break
                except ApiException as err:
                    if err.status != 409 or attempt == CONFLICT_RETRIES - 1:
                        raise

    def delete_all(self, namespace: str, timeout: float = 60) -> None:
        """Deletes the parents in `namespace` and waits until they and their children are gone."""
        for parent in self.list(MANIFEST.parent, namespace):
            try:
                self.api.request("DELETE", f"{collection_path(MANIFEST.parent, namespace)}/{parent['metadata']['name']}")
            except ApiException as err:
                if err.status != 404:
                    raise
        eventually(lambda: not self.list(MANIFEST.parent, namespace) and not any(owned_children(self, namespace).values()),
                   timeout, f"the parents in {namespace} and their children to be gone")

    # ---- audit log ----

    def audit_mark(self) -> int:
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def audit_sync(self) -> int:
        """Sends a marker request and waits until the audit log has it: every
        request before it is in the log. Answers the log's end."""
        marker = f"audit-mark-{uuid.uuid4().hex[:12]}"
        try:
            self.api.request("GET", f"/api/v1/namespaces/default/configmaps/{marker}")
        except ApiException:
            pass
        eventually(lambda: marker in self.audit_log.read_text(), 30, "the audit log to catch up")
        return self.audit_mark()

    def writes_since(self, mark: int, namespace: str, user: str = "admin") -> list[dict]:
        """Write requests by `user` logged after `mark` in `namespace`, but
        the control plane's own: kube-controller-manager (the endpointslice
        controller updates a Service's slices whenever it likes) and
        kube-scheduler use the same admin credentials here."""
        with open(self.audit_log, "rb") as log:
            log.seek(mark)
            events = [json.loads(line) for line in log if line.strip()]
        return [
            {"verb": e["verb"], "uri": e["requestURI"], "agent": e.get("userAgent", ""),
             "code": e.get("responseStatus", {}).get("code")}
            for e in events
            if e.get("stage") == "ResponseComplete"
            and e["verb"] in ("create", "update", "patch", "delete", "deletecollection")
            and e.get("user", {}).get("username") == user
            and not e.get("userAgent", "").startswith(CONTROL_PLANE_AGENTS)
            and (e.get("objectRef") or {}).get("namespace") == namespace
        ]


def kind_of(obj: dict) -> Any:
    group, _, version = obj["apiVersion"].rpartition("/")
    for kind in [MANIFEST.parent, *MANIFEST.owned, *MANIFEST.reads]:
        if (kind.group, kind.kind) == (group, obj["kind"]):
            return kind
    raise KeyError(f"{obj['apiVersion']} {obj['kind']} is no kind of the module's manifest")


def owned_children(plane: ControlPlane, namespace: str) -> dict[str, list[dict]]:
    """Objects of the owned kinds in `namespace` controlled by a parent, by parent name."""
    children: dict[str, list[dict]] = {}
    for kind in MANIFEST.owned:
        for obj in plane.list(kind, namespace):
            for ref in obj["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == MANIFEST.parent.kind:
                    children.setdefault(ref["name"], []).append(obj)
    return children


def snapshot(plane: ControlPlane, namespace: str) -> dict:
    """What the controller made in `namespace`, in a form two namespaces and
    two runs can be compared in: per parent its status and its children,
    without what the API server fills in (uids, versions, times) and without
    the framework bookkeeping named above; the namespace reads NS."""
    children = owned_children(plane, namespace)
    result = {}
    for parent in plane.list(MANIFEST.parent, namespace):
        name = parent["metadata"]["name"]
        status = copy.deepcopy(parent.get("status") or {})
        for condition in status.get("conditions") or []:
            condition.pop("lastTransitionTime", None)
        result[name] = {
            "generation": parent["metadata"].get("generation"),
            "status": status,
            "children": {f"{c['kind']}/{c['metadata']['name']}": _normalized_child(c) for c in children.get(name, [])},
        }
    # Also inside strings (DNS names such as `cache.NS:11211`): namespaces are
    # named so that they occur nowhere else.
    return json.loads(json.dumps(result, sort_keys=True).replace(namespace, "NS"))


def _normalized_child(obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    meta = obj["metadata"]
    for key in SERVER_METADATA:
        meta.pop(key, None)
    for ref in meta.get("ownerReferences") or []:
        ref.pop("uid", None)
    for key, names in (("annotations", FRAMEWORK_ANNOTATIONS), ("labels", FRAMEWORK_LABELS)):
        values = {k: v for k, v in (meta.get(key) or {}).items() if k not in names}
        if values:
            meta[key] = values
        else:
            meta.pop(key, None)
    return obj


def settled(plane: ControlPlane, namespace: str, count: int) -> bool:
    """Every parent has a status for its current generation."""
    parents = plane.list(MANIFEST.parent, namespace)
    return len(parents) == count and all(
        (p.get("status") or {}).get("observedGeneration") == p["metadata"].get("generation") for p in parents
    )


def eventually(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f}s for {what}")
        time.sleep(interval)


class Process:
    """A controller process whose stdout and stderr lines are kept, to count
    the lines that say it reconciled."""

    def __init__(self, name: str, args: list[str], env: Optional[dict] = None):
        self.name = name
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {})}, cwd=ROOT,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def count(self, pattern: str) -> int:
        return sum(1 for line in list(self.lines) if re.search(pattern, line))

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])


def load_yaml(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]
