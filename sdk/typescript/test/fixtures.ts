// Objects as the API server returns them, for the tests.
import type { KubeObject } from "../src/index.js";

export const UID = "6f1c2a7e-0000-4000-8000-000000000001";

export function parent(spec: unknown = { image: "nginx:1.27" }, metadata: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: "example.c5c3.io/v1",
    kind: "Site",
    metadata: { name: "web", namespace: "default", uid: UID, generation: 4, ...metadata },
    spec,
  };
}

export const ours = {
  apiVersion: "example.c5c3.io/v1",
  kind: "Site",
  name: "web",
  uid: UID,
  controller: true,
  blockOwnerDeletion: true,
};

/** What a module writes for its Deployment: only its own fields. */
export function desiredDeployment(image = "nginx:1.27"): KubeObject {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "default", labels: { app: "web" } },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: {
          containers: [
            {
              name: "web",
              image,
              args: ["--port", "8080"],
              ports: [{ name: "http", containerPort: 8080 }],
            },
          ],
        },
      },
    },
  };
}

/** The same Deployment after the API server created it: defaults, status, bookkeeping. */
export function serverDeployment(image = "nginx:1.27"): KubeObject {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: "web",
      namespace: "default",
      uid: "deploy-uid-1",
      resourceVersion: "4711",
      generation: 1,
      creationTimestamp: "2026-01-01T00:00:00Z",
      labels: { app: "web" },
      annotations: { "deployment.kubernetes.io/revision": "1" },
      ownerReferences: [{ ...ours }],
      managedFields: [{ manager: "site-operator", operation: "Update", apiVersion: "apps/v1" }],
    },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { creationTimestamp: null, labels: { app: "web" } },
        spec: {
          containers: [
            {
              name: "web",
              image,
              args: ["--port", "8080"],
              ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }],
              resources: {},
              terminationMessagePath: "/dev/termination-log",
              terminationMessagePolicy: "File",
              imagePullPolicy: "IfNotPresent",
            },
          ],
          restartPolicy: "Always",
          terminationGracePeriodSeconds: 30,
          dnsPolicy: "ClusterFirst",
          securityContext: {},
          schedulerName: "default-scheduler",
        },
      },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%" } },
      revisionHistoryLimit: 10,
      progressDeadlineSeconds: 600,
    },
    status: { observedGeneration: 1, replicas: 2, readyReplicas: 2, availableReplicas: 2 },
  };
}

export function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
