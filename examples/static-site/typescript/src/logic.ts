/**
 * The StaticSite module: a site's files in a ConfigMap, served by nginx in a
 * Deployment, behind a Service; the status says how many replicas are ready,
 * where the site is, and a `Ready` condition. A site without an `index.html`
 * is invalid, reported at `spec.files`. The same answers as ../rust (the
 * golden cases in ../cases hold all three languages to them).
 */

import {
  findCondition,
  invalid,
  observedGeneration,
  replacing,
  setCondition,
  type Condition,
  type KubeObject,
  type ModuleDefinition,
} from "@wasm-operator/sdk";
import crd from "../crd.yaml";

export interface StaticSite extends KubeObject {
  spec?: { files?: Record<string, string>; replicas?: number; image?: string };
  status?: { conditions?: Condition[] };
}

/** The spec with the CRD's defaults (the Rust module's serde defaults). */
function specOf(site: StaticSite) {
  const { files = {}, replicas = 1, image = "nginx:1.27-alpine" } = site.spec ?? {};
  return { files, replicas, image };
}

export const staticSite: ModuleDefinition<StaticSite> = {
  manifest: {
    name: "static-site",
    version: "0.1.0",
    parent: { group: "sites.example.com", version: "v1", kind: "StaticSite", plural: "staticsites" },
    crd,
    owned: [
      { group: "", version: "v1", kind: "ConfigMap", plural: "configmaps" },
      { group: "apps", version: "v1", kind: "Deployment", plural: "deployments" },
      { group: "", version: "v1", kind: "Service", plural: "services" },
    ],
  },

  // Only the fields the module sets: the SDK adds the namespace and the
  // owner reference and merges onto what the server has.
  desired(site) {
    const { files, replicas, image } = specOf(site);
    if (!Object.hasOwn(files, "index.html")) throw invalid("spec.files", "must have an index.html");
    const name = site.metadata?.name ?? "";
    const labels = { "app.kubernetes.io/name": "static-site", "app.kubernetes.io/instance": name };
    const meta = (name: string) => ({ name, labels });
    const web = {
      name: "web",
      image,
      ports: [{ name: "http", containerPort: 80 }],
      volumeMounts: [{ name: "files", mountPath: "/usr/share/nginx/html", readOnly: true }],
    };
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: meta(name),
      spec: {
        replicas,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [web], volumes: [{ name: "files", configMap: { name: `${name}-files` } }] },
        },
      },
    };
    const service = {
      apiVersion: "v1",
      kind: "Service",
      metadata: meta(name),
      spec: { selector: labels, ports: [{ name: "http", port: 80, targetPort: "http" }] },
    };
    // The files are the module's whole: a file removed from the spec goes.
    const configMap = replacing({ apiVersion: "v1", kind: "ConfigMap", metadata: meta(`${name}-files`), data: files }, "/data");
    return [configMap, deployment, service];
  },

  status(site, { owned, now, problem }) {
    const name = site.metadata?.name ?? "";
    const wanted = specOf(site).replicas;
    const deployment = owned.get("apps/Deployment", name)?.status as { readyReplicas?: number } | undefined;
    const ready = deployment?.readyReplicas ?? 0;
    const progress = `${ready} of ${wanted} replicas ready`;
    const [status, reason, message] =
      problem !== undefined
        ? (["False", "Failed", problem] as const)
        : ready >= wanted
          ? (["True", "Available", progress] as const)
          : (["False", "Progressing", progress] as const);
    // Only our own condition: the host's Stalled goes once we answer.
    const mine = findCondition(site.status?.conditions, "Ready");
    const generation = observedGeneration(site);
    return {
      observedGeneration: generation,
      readyReplicas: ready,
      url: `http://${name}.${site.metadata?.namespace ?? ""}.svc`,
      conditions: setCondition(mine ? [mine] : [], "Ready", status, reason, message, now, generation),
    };
  },
};
