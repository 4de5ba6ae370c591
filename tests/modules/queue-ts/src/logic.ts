/**
 * The Queue module (tests/modules/queue in TypeScript): a Queue owns a
 * StatefulSet with a volume claim template, a headless Service, a ConfigMap
 * of settings and, when asked, a PodDisruptionBudget. Each object holds only
 * the fields the module sets (no `targetPort`, no `volumeMode`, no
 * `replicas` unless the spec has them), written by server-side apply.
 */

import { Problems, observedGeneration, type KubeObject, type ModuleDefinition } from "@wasm-operator/sdk";
import crd from "../crd.yaml";

interface Queue extends KubeObject {
  spec: {
    image: string;
    replicas?: number | null;
    storage?: string;
    metricsPort?: number | null;
    labels?: Record<string, string>;
    settings?: Record<string, string>;
    env?: Record<string, string>;
    disruptionBudget?: boolean;
  };
}

const PORT = 5672;

const selector = (queue: Queue) => ({ "app.kubernetes.io/instance": queue.metadata!.name! });

const metadata = (name: string, queue: Queue) => ({
  name,
  labels: { ...queue.spec.labels, "app.kubernetes.io/name": "queue", ...selector(queue) },
});

/** The named ports: the queue's, and the metrics one when the spec has it. */
function ports<T>(queue: Queue, port: (name: string, number: number) => T): T[] {
  const metrics = queue.spec.metricsPort;
  return [port("queue", PORT), ...(metrics == null ? [] : [port("metrics", metrics)])];
}

function statefulSet(queue: Queue, storage: string): KubeObject {
  const name = queue.metadata!.name!;
  const env = Object.entries(queue.spec.env ?? {})
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([name, value]) => ({ name, value }));
  const container = {
    name: "queue",
    image: queue.spec.image,
    ports: ports(queue, (name, containerPort) => ({ name, containerPort })),
    env: env.length > 0 ? env : undefined,
    volumeMounts: [{ name: "data", mountPath: "/var/lib/queue" }],
  };
  return {
    apiVersion: "apps/v1",
    kind: "StatefulSet",
    metadata: metadata(name, queue),
    spec: {
      replicas: queue.spec.replicas,
      serviceName: name,
      selector: { matchLabels: selector(queue) },
      template: { metadata: { labels: selector(queue) }, spec: { containers: [container] } },
      volumeClaimTemplates: [
        {
          apiVersion: "v1",
          kind: "PersistentVolumeClaim",
          metadata: { name: "data" },
          spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage } } },
        },
      ],
    },
  };
}

export const queue: ModuleDefinition<Queue> = {
  manifest: {
    name: "queue-ts",
    version: "0.1.0",
    parent: { group: "example.c5c3.io", version: "v1", kind: "Queue", plural: "queues" },
    crd,
    owned: [
      { group: "apps", version: "v1", kind: "StatefulSet", plural: "statefulsets" },
      { group: "", version: "v1", kind: "Service", plural: "services" },
      { group: "", version: "v1", kind: "ConfigMap", plural: "configmaps" },
      { group: "policy", version: "v1", kind: "PodDisruptionBudget", plural: "poddisruptionbudgets" },
    ],
  },
  writes: "apply",

  desired(queue) {
    const storage = queue.spec.storage ?? "1Gi";
    const problems = new Problems();
    if (!queue.spec.image) problems.add("spec.image", "must name an image");
    if (!storage) problems.add("spec.storage", "must be a quantity such as 1Gi");
    problems.throwIfAny();
    const name = queue.metadata!.name!;
    const objects: KubeObject[] = [
      statefulSet(queue, storage),
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: metadata(name, queue),
        spec: { clusterIP: "None", selector: selector(queue), ports: ports(queue, (name, port) => ({ name, port })) },
      },
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: metadata(`${name}-settings`, queue),
        data: queue.spec.settings ?? {},
      },
    ];
    if (queue.spec.disruptionBudget) {
      objects.push({
        apiVersion: "policy/v1",
        kind: "PodDisruptionBudget",
        metadata: metadata(name, queue),
        spec: { maxUnavailable: 1, selector: { matchLabels: selector(queue) } },
      });
    }
    return objects;
  },

  status(queue, { owned }) {
    const set = owned.get("apps/StatefulSet", queue.metadata!.name!);
    const ready = (set?.status as { readyReplicas?: number } | undefined)?.readyReplicas ?? 0;
    return { observedGeneration: observedGeneration(queue) ?? 0, readyReplicas: ready };
  },
};
