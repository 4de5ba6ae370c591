/**
 * The Queue module (tests/modules/queue in TypeScript): a Queue runs message
 * brokers (a StatefulSet with a volume claim template, a headless Service
 * with a second port when asked, a ConfigMap of settings) and, each when its
 * spec asks: a PodDisruptionBudget, a NetworkPolicy and an Ingress for the
 * brokers; consumers (a Deployment with probes and resources, scaled by a
 * HorizontalPodAutoscaler); a migration Job and a purge CronJob; a
 * ServiceAccount with a Role and RoleBinding for peer discovery; a backup
 * PersistentVolumeClaim; and a credentials Secret. Each object holds only
 * the fields the module sets (no `targetPort`, no `volumeMode`, no
 * `replicas` an autoscaler owns), written by server-side apply.
 */

import { Problems, observedGeneration, type KubeObject, type ModuleDefinition } from "@wasm-operator/sdk";
import crd from "../crd.yaml";

interface Consumers {
  image: string;
  minReplicas?: number;
  maxReplicas?: number;
}

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
    consumers?: Consumers | null;
    migrate?: boolean;
    purgeSchedule?: string | null;
    host?: string | null;
    isolated?: boolean;
    peerDiscovery?: boolean;
    backupStorage?: string | null;
    username?: string | null;
  };
}

const PORT = 5672;

/** The settings key the consumers read their prefetch count from. */
const PREFETCH_KEY = "prefetch";

const nameOf = (queue: Queue) => queue.metadata!.name!;

const instance = (queue: Queue) => ({ "app.kubernetes.io/instance": nameOf(queue) });

/** The labels of one component's Pods, which select them. */
const podLabels = (queue: Queue, component: string) => ({
  ...instance(queue),
  "app.kubernetes.io/component": component,
});

const selector = (queue: Queue) => ({ matchLabels: podLabels(queue, "broker") });

const metadata = (name: string, queue: Queue) => ({
  name,
  labels: { ...queue.spec.labels, "app.kubernetes.io/name": "queue", ...instance(queue) },
});

const settingsName = (queue: Queue) => `${nameOf(queue)}-settings`;

/** The named ports: the queue's, and the metrics one when the spec has it. */
function ports<T>(queue: Queue, port: (name: string, number: number) => T): T[] {
  const metrics = queue.spec.metricsPort;
  return [port("queue", PORT), ...(metrics == null ? [] : [port("metrics", metrics)])];
}

/** A claim of `storage` (a quantity) for one ReadWriteOnce volume. */
const claimSpec = (storage: string) => ({ accessModes: ["ReadWriteOnce"], resources: { requests: { storage } } });

function statefulSet(queue: Queue, storage: string): KubeObject {
  const name = nameOf(queue);
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
      selector: selector(queue),
      template: {
        metadata: { labels: podLabels(queue, "broker") },
        spec: { serviceAccountName: queue.spec.peerDiscovery ? name : undefined, containers: [container] },
      },
      volumeClaimTemplates: [
        { apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: { name: "data" }, spec: claimSpec(storage) },
      ],
    },
  };
}

function ingress(queue: Queue, host: string): KubeObject {
  const name = nameOf(queue);
  const backend = { service: { name, port: { name: "queue" } } };
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "Ingress",
    metadata: metadata(name, queue),
    spec: { rules: [{ host, http: { paths: [{ path: "/", pathType: "Prefix", backend }] } }] },
  };
}

/** Only this Queue's Pods (brokers and consumers) reach the brokers' port. */
function networkPolicy(queue: Queue): KubeObject {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: metadata(nameOf(queue), queue),
    spec: {
      podSelector: selector(queue),
      policyTypes: ["Ingress"],
      ingress: [{ from: [{ podSelector: { matchLabels: instance(queue) } }], ports: [{ port: PORT }] }],
    },
  };
}

const probe = (path: string, periodSeconds?: number) => ({ httpGet: { path, port: "http" }, periodSeconds });

/** The consumers: a Deployment (no `replicas`: the autoscaler's) and its HorizontalPodAutoscaler. */
function consumers(queue: Queue, consumers: Consumers, minReplicas: number, maxReplicas: number): KubeObject[] {
  const name = `${nameOf(queue)}-consumers`;
  const container = {
    name: "consumer",
    image: consumers.image,
    env: [
      { name: "QUEUE_URL", value: `amqp://${nameOf(queue)}:${PORT}` },
      { name: "PREFETCH", valueFrom: { configMapKeyRef: { name: settingsName(queue), key: PREFETCH_KEY } } },
    ],
    ports: [
      { name: "http", containerPort: 8080 },
      { name: "metrics", containerPort: 9102 },
    ],
    readinessProbe: probe("/ready"),
    livenessProbe: probe("/live", 20),
    // The CPU limit as an author may write it: the server stores `500m`.
    resources: { requests: { cpu: "100m", memory: "64Mi" }, limits: { cpu: "0.5", memory: "128Mi" } },
  };
  const labels = podLabels(queue, "consumer");
  return [
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: metadata(name, queue),
      spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [container] } } },
    },
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: metadata(name, queue),
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
        minReplicas,
        maxReplicas,
        metrics: [
          { type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 80 } } },
        ],
      },
    },
  ];
}

/** A Pod template running the Queue's image with `command`. */
const task = (queue: Queue, command: string, restartPolicy: string) => ({
  spec: { restartPolicy, containers: [{ name: command, image: queue.spec.image, args: [command] }] },
});

/** Peer discovery: the brokers' ServiceAccount, a Role reading Pods and Endpoints, and its RoleBinding. */
function access(queue: Queue): KubeObject[] {
  const name = nameOf(queue);
  const rbac = "rbac.authorization.k8s.io";
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: metadata(name, queue) },
    {
      apiVersion: `${rbac}/v1`,
      kind: "Role",
      metadata: metadata(name, queue),
      rules: [{ apiGroups: [""], resources: ["endpoints", "pods"], verbs: ["get", "list", "watch"] }],
    },
    {
      apiVersion: `${rbac}/v1`,
      kind: "RoleBinding",
      metadata: metadata(name, queue),
      roleRef: { apiGroup: rbac, kind: "Role", name },
      subjects: [{ kind: "ServiceAccount", name, namespace: queue.metadata!.namespace }],
    },
  ];
}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** `text`'s UTF-8 bytes. */
function utf8(text: string): number[] {
  const bytes: number[] = [];
  for (const char of text) {
    const point = char.codePointAt(0)!;
    if (point < 0x80) bytes.push(point);
    else if (point < 0x800) bytes.push(0xc0 | (point >> 6), 0x80 | (point & 63));
    else if (point < 0x10000) bytes.push(0xe0 | (point >> 12), 0x80 | ((point >> 6) & 63), 0x80 | (point & 63));
    else bytes.push(0xf0 | (point >> 18), 0x80 | ((point >> 12) & 63), 0x80 | ((point >> 6) & 63), 0x80 | (point & 63));
  }
  return bytes;
}

/** The base64 of `text`'s UTF-8 bytes (a Secret's data). */
function base64(text: string): string {
  const bytes = utf8(text);
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const [a, b, c] = [bytes[i]!, bytes[i + 1], bytes[i + 2]];
    const n = (a << 16) | ((b ?? 0) << 8) | (c ?? 0);
    out += BASE64[(n >> 18) & 63]! + BASE64[(n >> 12) & 63]!;
    out += b === undefined ? "=" : BASE64[(n >> 6) & 63]!;
    out += c === undefined ? "=" : BASE64[n & 63]!;
  }
  return out;
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
      { group: "apps", version: "v1", kind: "Deployment", plural: "deployments" },
      { group: "autoscaling", version: "v2", kind: "HorizontalPodAutoscaler", plural: "horizontalpodautoscalers" },
      { group: "batch", version: "v1", kind: "Job", plural: "jobs" },
      { group: "batch", version: "v1", kind: "CronJob", plural: "cronjobs" },
      { group: "networking.k8s.io", version: "v1", kind: "Ingress", plural: "ingresses" },
      { group: "networking.k8s.io", version: "v1", kind: "NetworkPolicy", plural: "networkpolicies" },
      { group: "", version: "v1", kind: "ServiceAccount", plural: "serviceaccounts" },
      { group: "rbac.authorization.k8s.io", version: "v1", kind: "Role", plural: "roles" },
      { group: "rbac.authorization.k8s.io", version: "v1", kind: "RoleBinding", plural: "rolebindings" },
      { group: "", version: "v1", kind: "PersistentVolumeClaim", plural: "persistentvolumeclaims" },
      { group: "", version: "v1", kind: "Secret", plural: "secrets" },
    ],
  },
  writes: "apply",

  desired(queue) {
    const spec = queue.spec;
    const storage = spec.storage ?? "1Gi";
    const minReplicas = spec.consumers?.minReplicas ?? 2;
    const maxReplicas = spec.consumers?.maxReplicas ?? 4;
    const problems = new Problems();
    if (!spec.image) problems.add("spec.image", "must name an image");
    if (!storage) problems.add("spec.storage", "must be a quantity such as 1Gi");
    if (spec.consumers != null) {
      if (!spec.consumers.image) problems.add("spec.consumers.image", "must name an image");
      if (minReplicas > maxReplicas) problems.add("spec.consumers.maxReplicas", "must be at least minReplicas");
    }
    problems.throwIfAny();
    const name = nameOf(queue);
    const settings: Record<string, string> = { ...spec.settings };
    if (spec.consumers != null) settings[PREFETCH_KEY] = "10";
    const objects: KubeObject[] = [
      statefulSet(queue, storage),
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: metadata(name, queue),
        spec: {
          clusterIP: "None",
          selector: podLabels(queue, "broker"),
          ports: ports(queue, (name, port) => ({ name, port })),
        },
      },
      { apiVersion: "v1", kind: "ConfigMap", metadata: metadata(settingsName(queue), queue), data: settings },
    ];
    if (spec.disruptionBudget) {
      objects.push({
        apiVersion: "policy/v1",
        kind: "PodDisruptionBudget",
        metadata: metadata(name, queue),
        spec: { maxUnavailable: 1, selector: selector(queue) },
      });
    }
    if (spec.consumers != null) objects.push(...consumers(queue, spec.consumers, minReplicas, maxReplicas));
    if (spec.migrate) {
      objects.push({
        apiVersion: "batch/v1",
        kind: "Job",
        metadata: metadata(`${name}-migrate`, queue),
        spec: { backoffLimit: 2, template: task(queue, "migrate", "Never") },
      });
    }
    if (spec.purgeSchedule != null) {
      objects.push({
        apiVersion: "batch/v1",
        kind: "CronJob",
        metadata: metadata(`${name}-purge`, queue),
        spec: {
          schedule: spec.purgeSchedule,
          concurrencyPolicy: "Replace",
          jobTemplate: { spec: { template: task(queue, "purge", "OnFailure") } },
        },
      });
    }
    if (spec.host != null) objects.push(ingress(queue, spec.host));
    if (spec.isolated) objects.push(networkPolicy(queue));
    if (spec.peerDiscovery) objects.push(...access(queue));
    if (spec.backupStorage != null) {
      objects.push({
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        metadata: metadata(`${name}-backup`, queue),
        spec: claimSpec(spec.backupStorage),
      });
    }
    if (spec.username != null) {
      objects.push({
        apiVersion: "v1",
        kind: "Secret",
        metadata: metadata(`${name}-credentials`, queue),
        type: "kubernetes.io/basic-auth",
        data: { username: base64(spec.username) },
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
