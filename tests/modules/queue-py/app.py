"""The Queue module (tests/modules/queue in Python): a Queue owns a
StatefulSet with a volume claim template, a headless Service, a ConfigMap of
settings and, when asked, a PodDisruptionBudget. Each object holds only the
fields the module sets (no `targetPort`, no `volumeMode`, no `replicas`
unless the spec has them), written by server-side apply (`writes = "apply"`).
`scripts/build-python-module.sh tests/modules/queue-py` builds it.
"""

from wasm_operator_sdk import (
    Context,
    Invalid,
    JsonObject,
    Kind,
    Manifest,
    Module,
    StatusContext,
    observed_generation,
    read_text,
    reconciler,
)

PORT = 5672
STATEFUL_SET = Kind("apps", "v1", "StatefulSet", "statefulsets")
SERVICE = Kind("", "v1", "Service", "services")
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")
BUDGET = Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")


def selector(queue: JsonObject) -> dict[str, str]:
    return {"app.kubernetes.io/instance": queue["metadata"]["name"]}


def metadata(name: str, queue: JsonObject) -> JsonObject:
    labels = {**queue["spec"].get("labels", {}), "app.kubernetes.io/name": "queue", **selector(queue)}
    return {"name": name, "labels": labels}


def ports(queue: JsonObject, number: str) -> list[JsonObject]:
    """The named ports, the number under the key `number`: the queue's, and
    the metrics one when the spec has it."""
    found = [{"name": "queue", number: PORT}]
    if queue["spec"].get("metricsPort") is not None:
        found.append({"name": "metrics", number: queue["spec"]["metricsPort"]})
    return found


def stateful_set(queue: JsonObject, storage: str) -> JsonObject:
    spec = queue["spec"]
    name = queue["metadata"]["name"]
    container: JsonObject = {
        "name": "queue",
        "image": spec["image"],
        "ports": ports(queue, "containerPort"),
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/queue"}],
    }
    if spec.get("env"):
        container["env"] = [{"name": key, "value": value} for key, value in sorted(spec["env"].items())]
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(name, queue),
        "spec": {
            "replicas": spec.get("replicas"),
            "serviceName": name,
            "selector": {"matchLabels": selector(queue)},
            "template": {"metadata": {"labels": selector(queue)}, "spec": {"containers": [container]}},
            "volumeClaimTemplates": [claim],
        },
    }


class Queue(Module):
    manifest = Manifest(
        name="queue-py",
        version="0.1.0",
        parent=Kind("example.c5c3.io", "v1", "Queue", "queues"),
        # Read when componentize-py imports this file at build time: the component carries the text.
        crd=read_text(__file__, "crd.yaml"),
        owned=[STATEFUL_SET, SERVICE, CONFIG_MAP, BUDGET],
    )
    writes = "apply"

    def desired(self, parent: JsonObject, ctx: Context) -> list[JsonObject]:
        spec = parent["spec"]
        storage = spec.get("storage", "1Gi")
        problems = []
        if not spec.get("image"):
            problems.append(("spec.image", "must name an image"))
        if not storage:
            problems.append(("spec.storage", "must be a quantity such as 1Gi"))
        if problems:
            raise Invalid(problems)
        name = parent["metadata"]["name"]
        objects = [
            stateful_set(parent, storage),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": metadata(name, parent),
                "spec": {"clusterIP": "None", "selector": selector(parent), "ports": ports(parent, "port")},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(f"{name}-settings", parent),
                "data": spec.get("settings", {}),
            },
        ]
        if spec.get("disruptionBudget"):
            objects.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": metadata(name, parent),
                    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(parent)}},
                }
            )
        return objects

    def status(self, parent: JsonObject, ctx: StatusContext) -> JsonObject:
        current = ctx.owned.get(STATEFUL_SET, parent["metadata"]["name"]) or {}
        ready = (current.get("status") or {}).get("readyReplicas", 0)
        return {"observedGeneration": observed_generation(parent) or 0, "readyReplicas": ready}


Reconciler = reconciler(Queue())
