// The StaticSite module under Node, through the SDK's glue (JSON text in and
// out, as the host calls it), without building the component. The golden
// cases (../cases, `wasm-operator test`) check the built component.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";

import { ComponentError, defineModule, type Condition, type KubeObject } from "@wasm-operator/sdk";
import { staticSite } from "../src/logic.js";

const UID = "0c0ffee0-0000-4000-8000-000000000001";
const NOW = "2026-01-01T00:00:00Z";
const reconciler = defineModule(staticSite);

const LABELS = { "app.kubernetes.io/name": "static-site", "app.kubernetes.io/instance": "docs" };
const OWNER = {
  apiVersion: "sites.example.com/v1",
  kind: "StaticSite",
  name: "docs",
  uid: UID,
  controller: true,
  blockOwnerDeletion: true,
};

function parent(spec: Record<string, unknown>, status?: unknown, generation: number | null = 3): string {
  return JSON.stringify({
    apiVersion: "sites.example.com/v1",
    kind: "StaticSite",
    metadata: { name: "docs", namespace: "web", uid: UID, generation },
    spec,
    ...(status === undefined ? {} : { status }),
  });
}

/** What the module answers for a new site (the SDK's namespace and owner reference included). */
function answer(files: Record<string, string>, replicas = 1, image = "nginx:1.27-alpine"): KubeObject[] {
  const meta = (name: string) => ({ name, labels: LABELS, namespace: "web", ownerReferences: [OWNER] });
  return [
    { apiVersion: "v1", kind: "ConfigMap", metadata: meta("docs-files"), data: files },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: meta("docs"),
      spec: {
        replicas,
        selector: { matchLabels: LABELS },
        template: {
          metadata: { labels: LABELS },
          spec: {
            containers: [
              {
                name: "web",
                image,
                ports: [{ name: "http", containerPort: 80 }],
                volumeMounts: [{ name: "files", mountPath: "/usr/share/nginx/html", readOnly: true }],
              },
            ],
            volumes: [{ name: "files", configMap: { name: "docs-files" } }],
          },
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: meta("docs"),
      spec: { selector: LABELS, ports: [{ name: "http", port: 80, targetPort: "http" }] },
    },
  ];
}

/** The objects as the API server returns them: with its defaults, uids and statuses. */
function server(files: Record<string, string>, readyReplicas?: number): KubeObject[] {
  const [configMap, deployment, service] = answer(files, 2) as [KubeObject, KubeObject, KubeObject];
  const filled = (obj: KubeObject, uid: string) => ({ ...obj, metadata: { ...obj.metadata, uid, resourceVersion: "101" } });
  const spec = deployment.spec as { template: { spec: { containers: Record<string, unknown>[] } } };
  return [
    filled(configMap, "cm"),
    {
      ...filled(deployment, "deploy"),
      spec: {
        ...spec,
        revisionHistoryLimit: 10,
        template: {
          ...spec.template,
          spec: {
            ...spec.template.spec,
            containers: [{ ...spec.template.spec.containers[0], imagePullPolicy: "IfNotPresent" }],
            dnsPolicy: "ClusterFirst",
          },
        },
      },
      status: readyReplicas === undefined ? {} : { replicas: 2, readyReplicas },
    },
    { ...filled(service, "svc"), spec: { ...(service.spec as object), type: "ClusterIP", clusterIP: "10.0.0.42" } },
  ];
}

const desired = (parentText: string, owned: KubeObject[] = []) =>
  reconciler.desired(parentText, owned.map((o) => JSON.stringify(o)), []).map((t) => JSON.parse(t) as KubeObject);

interface Status {
  observedGeneration?: number;
  readyReplicas: number;
  url: string;
  conditions: Condition[];
}

const status = (parentText: string, owned: KubeObject[] = [], problem?: string, now = NOW) =>
  JSON.parse(reconciler.status(parentText, owned.map((o) => JSON.stringify(o)), [], now, problem)) as Status;

const ready = (s: "True" | "False", reason: string, message: string, lastTransitionTime = NOW): Condition => ({
  type: "Ready",
  status: s,
  reason,
  message,
  lastTransitionTime,
  observedGeneration: 3,
});

describe("manifest", () => {
  it("names the StaticSite kind, its CRD and the three kinds it owns", () => {
    const m = reconciler.manifest();
    assert.deepEqual([m.name, m.version, m.fieldManager], ["static-site", "0.1.0", "static-site-operator"]);
    assert.deepEqual(m.parent, { group: "sites.example.com", version: "v1", kind: "StaticSite", plural: "staticsites", namespaced: true });
    assert.deepEqual(
      m.owned.map((k) => [k.group, k.version, k.kind, k.plural]),
      [
        ["", "v1", "ConfigMap", "configmaps"],
        ["apps", "v1", "Deployment", "deployments"],
        ["", "v1", "Service", "services"],
      ],
    );
    assert.match(m.crd, /staticsites\.sites\.example\.com/);
  });
});

describe("desired", () => {
  it("gives a new site a ConfigMap, a Deployment and a Service, with the defaults", () => {
    const files = { "index.html": "<h1>Docs</h1>", "about.html": "<p>About</p>" };
    assert.deepEqual(desired(parent({ files })), answer(files));
  });

  it("takes the spec's replicas and image", () => {
    const files = { "index.html": "<h1>Docs</h1>" };
    assert.deepEqual(desired(parent({ files, replicas: 0, image: "nginx:1.27" })), answer(files, 0, "nginx:1.27"));
  });

  it("answers the server's objects unchanged in a steady state", () => {
    const files = { "index.html": "<h1>Docs</h1>" };
    assert.deepEqual(desired(parent({ files, replicas: 2 }), server(files, 2)), server(files, 2));
  });

  it("applies an edit onto the server's objects, dropping a file the spec no longer has", () => {
    const edited = parent({ files: { "index.html": "new" }, replicas: 2, image: "nginx:1.27" });
    const [configMap, deployment, service] = desired(edited, server({ "index.html": "old", "old.html": "gone" }, 2));
    const [serverMap, serverDeployment, serverService] = server({ "index.html": "new" }, 2);
    assert.deepEqual(configMap, serverMap);
    const container = (deployment?.spec as { template: { spec: { containers: Record<string, unknown>[] } } }).template.spec.containers[0];
    assert.deepEqual([container?.image, container?.imagePullPolicy], ["nginx:1.27", "IfNotPresent"]);
    assert.deepEqual(deployment?.status, serverDeployment?.status);
    assert.deepEqual(service, serverService);
  });

  it("reports a site without an index.html as invalid at spec.files", () => {
    for (const spec of [{ files: { "about.html": "<p>About</p>" } }, {}]) {
      assert.throws(
        () => desired(parent(spec)),
        (error: unknown) => {
          assert.ok(error instanceof ComponentError);
          assert.deepEqual(error.payload, { tag: "invalid", val: [{ path: "spec.files", message: "must have an index.html" }] });
          return true;
        },
      );
    }
  });
});

describe("status", () => {
  const files = { "index.html": "<h1>Docs</h1>" };

  it("is Progressing until the Deployment has the replicas ready", () => {
    assert.deepEqual(status(parent({ files })), {
      observedGeneration: 3,
      readyReplicas: 0,
      url: "http://docs.web.svc",
      conditions: [ready("False", "Progressing", "0 of 1 replicas ready")],
    });
    const one = status(parent({ files, replicas: 2 }), server(files, 1));
    assert.deepEqual(one.conditions, [ready("False", "Progressing", "1 of 2 replicas ready")]);
  });

  it("is Available once they are, keeping lastTransitionTime while Ready stays the same", () => {
    const first = status(parent({ files, replicas: 2 }), server(files, 2));
    assert.deepEqual([first.readyReplicas, first.conditions], [2, [ready("True", "Available", "2 of 2 replicas ready")]]);
    const again = status(parent({ files, replicas: 2 }, first), server(files, 2), undefined, "2026-02-02T00:00:00Z");
    assert.deepEqual(again, first);
    const fewer = status(parent({ files, replicas: 2 }, first), server(files, 1), undefined, "2026-02-02T00:00:00Z");
    assert.deepEqual(fewer.conditions, [ready("False", "Progressing", "1 of 2 replicas ready", "2026-02-02T00:00:00Z")]);
  });

  it("reports the host's problem as Failed", () => {
    const problem = "invalid: spec.files: must have an index.html";
    assert.deepEqual(status(parent({ files: {} }), [], problem).conditions, [ready("False", "Failed", problem)]);
  });

  it("keeps only its own Ready condition (the host's Stalled goes)", () => {
    const stalled = { type: "Stalled", status: "True", reason: "ModuleTrapped", message: "boom", lastTransitionTime: NOW };
    const got = status(parent({ files }, { conditions: [stalled] }));
    assert.deepEqual(got.conditions.map((c) => c.type), ["Ready"]);
  });

  it("leaves observedGeneration out when the parent has no generation", () => {
    const got = status(parent({ files }, undefined, null));
    assert.equal("observedGeneration" in got, false);
    assert.equal("observedGeneration" in (got.conditions[0] ?? {}), false);
  });
});
