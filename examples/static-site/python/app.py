"""The StaticSite module: a site's files in a ConfigMap, served by nginx in
a Deployment, behind a Service; the status says how many replicas are
ready, where the site is, and a `Ready` condition. A site without an
`index.html` is invalid, reported at `spec.files`. The same answers as
../rust, held to them by ../cases.
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
    replacing,
    set_condition,
)

SITE = Kind("sites.example.com", "v1", "StaticSite", "staticsites")
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")
DEPLOYMENT = Kind("apps", "v1", "Deployment", "deployments")
SERVICE = Kind("", "v1", "Service", "services")


def spec_of(site: JsonObject) -> tuple[dict[str, str], int, str]:
    """The files, replicas and image, with the CRD's defaults (the API server checked the types)."""
    spec = site.get("spec") or {}
    return spec.get("files") or {}, spec.get("replicas", 1), spec.get("image", "nginx:1.27-alpine")


class StaticSites(Module):
    manifest = Manifest(
        name="static-site",
        version="0.1.0",
        parent=SITE,
        crd=read_text(__file__, "crd.yaml"),  # read at build time: the component carries it
        owned=[CONFIG_MAP, DEPLOYMENT, SERVICE],
    )

    # Only the fields the module sets: the SDK adds the namespace and the
    # owner reference and merges onto what the server has.
    def desired(self, parent: JsonObject, ctx: Context) -> list[JsonObject]:
        files, replicas, image = spec_of(parent)
        if "index.html" not in files:
            raise Invalid("spec.files", "must have an index.html")
        name = parent["metadata"]["name"]
        labels = {"app.kubernetes.io/name": "static-site", "app.kubernetes.io/instance": name}
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-files", "labels": labels},
            "data": files,
        }
        web = {
            "name": "web",
            "image": image,
            "ports": [{"name": "http", "containerPort": 80}],
            "volumeMounts": [{"name": "files", "mountPath": "/usr/share/nginx/html", "readOnly": True}],
        }
        pods = {
            "metadata": {"labels": labels},
            "spec": {"containers": [web], "volumes": [{"name": "files", "configMap": {"name": f"{name}-files"}}]},
        }
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": pods},
        }
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "labels": labels},
            "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        }
        # The files are the module's whole: a file removed from the spec goes.
        return [replacing(config_map, "/data"), deployment, service]

    def status(self, parent: JsonObject, ctx: StatusContext) -> JsonObject:
        _, wanted, _ = spec_of(parent)
        metadata = parent["metadata"]
        deployment = ctx.owned.get(DEPLOYMENT, metadata["name"]) or {}
        ready = (deployment.get("status") or {}).get("readyReplicas") or 0
        # Only our own condition: the host's Stalled goes once we answer.
        previous = [c for c in (parent.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        if ctx.problem is not None:
            is_ready, reason, message = False, "Failed", ctx.problem
        elif ready >= wanted:
            is_ready, reason, message = True, "Available", f"{ready} of {wanted} replicas ready"
        else:
            is_ready, reason, message = False, "Progressing", f"{ready} of {wanted} replicas ready"
        generation = observed_generation(parent)
        return {
            "observedGeneration": generation,
            "readyReplicas": ready,
            "url": f"http://{metadata['name']}.{metadata.get('namespace') or ''}.svc",
            "conditions": set_condition(previous, "Ready", is_ready, reason, message, ctx.now, generation),
        }


Reconciler = reconciler(StaticSites())  # what componentize-py instantiates for the `reconciler` export
