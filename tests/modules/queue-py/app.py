"""The Queue module (tests/modules/queue in Python): a Queue runs message
brokers (a StatefulSet with a volume claim template, a headless Service with
a second port when asked, a ConfigMap of settings) and, each when its spec
asks: a PodDisruptionBudget, a NetworkPolicy and an Ingress for the brokers;
consumers (a Deployment with probes and resources, scaled by a
HorizontalPodAutoscaler); a migration Job and a purge CronJob; a
ServiceAccount with a Role and RoleBinding for peer discovery; a backup
PersistentVolumeClaim; and a credentials Secret. Each object holds only the
fields the module sets (no `targetPort`, no `volumeMode`, no `replicas` an
autoscaler owns), written by server-side apply (`writes = "apply"`).
`scripts/build-python-module.sh tests/modules/queue-py` builds it.
"""

import base64

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
# The settings key the consumers read their prefetch count from.
PREFETCH_KEY = "prefetch"
RBAC = "rbac.authorization.k8s.io"
STATEFUL_SET = Kind("apps", "v1", "StatefulSet", "statefulsets")
SERVICE = Kind("", "v1", "Service", "services")
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")
BUDGET = Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
DEPLOYMENT = Kind("apps", "v1", "Deployment", "deployments")
AUTOSCALER = Kind("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
JOB = Kind("batch", "v1", "Job", "jobs")
CRON_JOB = Kind("batch", "v1", "CronJob", "cronjobs")
INGRESS = Kind("networking.k8s.io", "v1", "Ingress", "ingresses")
NETWORK_POLICY = Kind("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies")
SERVICE_ACCOUNT = Kind("", "v1", "ServiceAccount", "serviceaccounts")
ROLE = Kind(RBAC, "v1", "Role", "roles")
ROLE_BINDING = Kind(RBAC, "v1", "RoleBinding", "rolebindings")
CLAIM = Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
SECRET = Kind("", "v1", "Secret", "secrets")


def instance(queue: JsonObject) -> dict[str, str]:
    return {"app.kubernetes.io/instance": queue["metadata"]["name"]}


def pod_labels(queue: JsonObject, component: str) -> dict[str, str]:
    """The labels of one component's Pods, which select them."""
    return {**instance(queue), "app.kubernetes.io/component": component}


def selector(queue: JsonObject) -> JsonObject:
    return {"matchLabels": pod_labels(queue, "broker")}


def metadata(name: str, queue: JsonObject) -> JsonObject:
    labels = {**queue["spec"].get("labels", {}), "app.kubernetes.io/name": "queue", **instance(queue)}
    return {"name": name, "labels": labels}


def settings_name(queue: JsonObject) -> str:
    return f"{queue['metadata']['name']}-settings"


def ports(queue: JsonObject, number: str) -> list[JsonObject]:
    """The named ports, the number under the key `number`: the queue's, and
    the metrics one when the spec has it."""
    found = [{"name": "queue", number: PORT}]
    if queue["spec"].get("metricsPort") is not None:
        found.append({"name": "metrics", number: queue["spec"]["metricsPort"]})
    return found


def claim_spec(storage: str) -> JsonObject:
    """A claim of `storage` (a quantity) for one ReadWriteOnce volume."""
    return {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}


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
    pod: JsonObject = {"containers": [container]}
    if spec.get("peerDiscovery"):
        pod["serviceAccountName"] = name
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": claim_spec(storage),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(name, queue),
        "spec": {
            "replicas": spec.get("replicas"),
            "serviceName": name,
            "selector": selector(queue),
            "template": {"metadata": {"labels": pod_labels(queue, "broker")}, "spec": pod},
            "volumeClaimTemplates": [claim],
        },
    }


def ingress(queue: JsonObject, host: str) -> JsonObject:
    name = queue["metadata"]["name"]
    backend = {"service": {"name": name, "port": {"name": "queue"}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata(name, queue),
        "spec": {
            "rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}]
        },
    }


def network_policy(queue: JsonObject) -> JsonObject:
    """Only this Queue's Pods (brokers and consumers) reach the brokers' port."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(queue["metadata"]["name"], queue),
        "spec": {
            "podSelector": selector(queue),
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": instance(queue)}}], "ports": [{"port": PORT}]}],
        },
    }


def probe(path: str, period: int | None = None) -> JsonObject:
    return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period}


def consumers(queue: JsonObject, image: str, min_replicas: int, max_replicas: int) -> list[JsonObject]:
    """The consumers: a Deployment (no `replicas`: the autoscaler's) and its
    HorizontalPodAutoscaler."""
    name = f"{queue['metadata']['name']}-consumers"
    container = {
        "name": "consumer",
        "image": image,
        "env": [
            {"name": "QUEUE_URL", "value": f"amqp://{queue['metadata']['name']}:{PORT}"},
            {"name": "PREFETCH", "valueFrom": {"configMapKeyRef": {"name": settings_name(queue), "key": PREFETCH_KEY}}},
        ],
        "ports": [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9102}],
        "readinessProbe": probe("/ready"),
        "livenessProbe": probe("/live", 20),
        # The CPU limit as an author may write it: the server stores `500m`.
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "0.5", "memory": "128Mi"}},
    }
    labels = pod_labels(queue, "consumer")
    target = {"type": "Utilization", "averageUtilization": 80}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata(name, queue),
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        },
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": metadata(name, queue),
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": target}}],
            },
        },
    ]


def task(queue: JsonObject, command: str, restart_policy: str) -> JsonObject:
    """A Pod template running the Queue's image with `command`."""
    container = {"name": command, "image": queue["spec"]["image"], "args": [command]}
    return {"spec": {"restartPolicy": restart_policy, "containers": [container]}}


def access(queue: JsonObject) -> list[JsonObject]:
    """Peer discovery: the brokers' ServiceAccount, a Role reading Pods and
    Endpoints, and its RoleBinding."""
    name = queue["metadata"]["name"]
    subject = {"kind": "ServiceAccount", "name": name, "namespace": queue["metadata"].get("namespace")}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(name, queue)},
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "Role",
            "metadata": metadata(name, queue),
            "rules": [{"apiGroups": [""], "resources": ["endpoints", "pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": metadata(name, queue),
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": name},
            "subjects": [subject],
        },
    ]


class Queue(Module):
    manifest = Manifest(
        name="queue-py",
        version="0.1.0",
        parent=Kind("example.c5c3.io", "v1", "Queue", "queues"),
        # Read when componentize-py imports this file at build time: the component carries the text.
        crd=read_text(__file__, "crd.yaml"),
        owned=[
            STATEFUL_SET,
            SERVICE,
            CONFIG_MAP,
            BUDGET,
            DEPLOYMENT,
            AUTOSCALER,
            JOB,
            CRON_JOB,
            INGRESS,
            NETWORK_POLICY,
            SERVICE_ACCOUNT,
            ROLE,
            ROLE_BINDING,
            CLAIM,
            SECRET,
        ],
    )
    writes = "apply"

    def desired(self, parent: JsonObject, ctx: Context) -> list[JsonObject]:
        spec = parent["spec"]
        storage = spec.get("storage", "1Gi")
        wanted = spec.get("consumers")
        min_replicas = (wanted or {}).get("minReplicas", 2)
        max_replicas = (wanted or {}).get("maxReplicas", 4)
        problems = []
        if not spec.get("image"):
            problems.append(("spec.image", "must name an image"))
        if not storage:
            problems.append(("spec.storage", "must be a quantity such as 1Gi"))
        if wanted is not None:
            if not wanted.get("image"):
                problems.append(("spec.consumers.image", "must name an image"))
            if min_replicas > max_replicas:
                problems.append(("spec.consumers.maxReplicas", "must be at least minReplicas"))
        if problems:
            raise Invalid(problems)
        name = parent["metadata"]["name"]
        settings = dict(spec.get("settings", {}))
        if wanted is not None:
            settings[PREFETCH_KEY] = "10"
        objects = [
            stateful_set(parent, storage),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": metadata(name, parent),
                "spec": {"clusterIP": "None", "selector": pod_labels(parent, "broker"), "ports": ports(parent, "port")},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(settings_name(parent), parent),
                "data": settings,
            },
        ]
        if spec.get("disruptionBudget"):
            objects.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": metadata(name, parent),
                    "spec": {"maxUnavailable": 1, "selector": selector(parent)},
                }
            )
        if wanted is not None:
            objects.extend(consumers(parent, wanted["image"], min_replicas, max_replicas))
        if spec.get("migrate"):
            objects.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": metadata(f"{name}-migrate", parent),
                    "spec": {"backoffLimit": 2, "template": task(parent, "migrate", "Never")},
                }
            )
        if spec.get("purgeSchedule") is not None:
            objects.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "metadata": metadata(f"{name}-purge", parent),
                    "spec": {
                        "schedule": spec["purgeSchedule"],
                        "concurrencyPolicy": "Replace",
                        "jobTemplate": {"spec": {"template": task(parent, "purge", "OnFailure")}},
                    },
                }
            )
        if spec.get("host") is not None:
            objects.append(ingress(parent, spec["host"]))
        if spec.get("isolated"):
            objects.append(network_policy(parent))
        if spec.get("peerDiscovery"):
            objects.extend(access(parent))
        if spec.get("backupStorage") is not None:
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": metadata(f"{name}-backup", parent),
                    "spec": claim_spec(spec["backupStorage"]),
                }
            )
        if spec.get("username") is not None:
            username = base64.b64encode(spec["username"].encode()).decode()
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": metadata(f"{name}-credentials", parent),
                    "type": "kubernetes.io/basic-auth",
                    "data": {"username": username},
                }
            )
        return objects

    def status(self, parent: JsonObject, ctx: StatusContext) -> JsonObject:
        current = ctx.owned.get(STATEFUL_SET, parent["metadata"]["name"]) or {}
        ready = (current.get("status") or {}).get("readyReplicas", 0)
        return {"observedGeneration": observed_generation(parent) or 0, "readyReplicas": ready}


Reconciler = reconciler(Queue())
