// The module under Node, through the SDK's glue (JSON text in and out, as
// the host calls it), without building the component.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";

import { ComponentError, defineModule, writesOf, type Condition, type KubeObject } from "@wasm-operator/sdk";
import { definition } from "../src/logic.js";

const UID = "0c0ffee0-0000-4000-8000-000000000001";
const NOW = "2026-01-01T00:00:00Z";
const reconciler = defineModule(definition);

function parent(spec: Record<string, unknown>, status?: unknown): string {
  return JSON.stringify({
    apiVersion: "{{group}}/{{version}}",
    kind: "{{kind}}",
    metadata: { name: "hello", namespace: "default", uid: UID, generation: 2 },
    spec,
    ...(status === undefined ? {} : { status }),
  });
}

const ownerReference = {
  apiVersion: "{{group}}/{{version}}",
  kind: "{{kind}}",
  name: "hello",
  uid: UID,
  controller: true,
  blockOwnerDeletion: true,
};

/** The ConfigMap as the API server returns it once the module created it. */
function serverConfigMap(message = "hi"): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "hello",
      namespace: "default",
      uid: "cm-uid",
      resourceVersion: "42",
      creationTimestamp: "2025-12-31T00:00:00Z",
      labels: { "app.kubernetes.io/managed-by": "{{name}}" },
      ownerReferences: [ownerReference],
    },
    data: { message },
  };
}

const desired = (parentText: string, owned: KubeObject[] = []) =>
  reconciler.desired(parentText, owned.map((o) => JSON.stringify(o)), []).map((t) => JSON.parse(t) as KubeObject);

const status = (parentText: string, owned: KubeObject[] = [], problem?: string) =>
  JSON.parse(reconciler.status(parentText, owned.map((o) => JSON.stringify(o)), [], NOW, problem)) as {
    observedGeneration?: number;
    problem?: string;
    conditions: Condition[];
  };

describe("manifest", () => {
  it("names the {{kind}} kind, its CRD and the ConfigMaps it owns", () => {
    const m = reconciler.manifest();
    assert.deepEqual(m.parent, { group: "{{group}}", version: "{{version}}", kind: "{{kind}}", plural: "{{plural}}", namespaced: true });
    assert.deepEqual(m.owned.map((k) => k.kind), ["ConfigMap"]);
    assert.match(m.crd, /name: {{plural}}\.{{group}}/);
  });
});

/** What the module answers: its own fields, with the namespace and the owner reference. */
function answer(message = "hi"): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "hello",
      namespace: "default",
      labels: { "app.kubernetes.io/managed-by": "{{name}}" },
      ownerReferences: [ownerReference],
    },
    data: { message },
  };
}

describe("desired", () => {
  it("writes by server-side apply", () => {
    assert.equal(writesOf(reconciler).model(), "apply");
  });

  it("creates the ConfigMap named after the {{kind}}, owned by it", () => {
    assert.deepEqual(desired(parent({ message: "hi" })), [answer()]);
  });

  it("answers only its own fields, not the server's ConfigMap (nothing is merged)", () => {
    assert.deepEqual(desired(parent({ message: "hi" }), [serverConfigMap()]), [answer()]);
  });

  it("answers the new message on an edit", () => {
    assert.deepEqual(desired(parent({ message: "bye" }), [serverConfigMap()]), [answer("bye")]);
  });

  it("leaves out a key an earlier version applied: the server removes it", () => {
    const server = serverConfigMap();
    server.data = { message: "hi", stale: "from an older version" };
    assert.deepEqual(desired(parent({ message: "hi" }), [server]), [answer()]);
  });

  it("reports an empty message as invalid, naming the field", () => {
    for (const spec of [{ message: "" }, {}, { message: 7 }]) {
      assert.throws(
        () => desired(parent(spec)),
        (error: unknown) => {
          assert.ok(error instanceof ComponentError);
          assert.deepEqual(error.payload, { tag: "invalid", val: [{ path: "spec.message", message: "must be a non-empty string" }] });
          return true;
        },
      );
    }
  });
});

describe("status", () => {
  it("is Ready once the ConfigMap holds the message", () => {
    assert.deepEqual(status(parent({ message: "hi" }), [serverConfigMap()]), {
      observedGeneration: 2,
      conditions: [
        { type: "Ready", status: "True", reason: "Published", message: "in ConfigMap hello", lastTransitionTime: NOW, observedGeneration: 2 },
      ],
    });
  });

  it("is not Ready while the ConfigMap is missing or stale", () => {
    assert.equal(status(parent({ message: "hi" })).conditions[0]?.reason, "Publishing");
    assert.equal(status(parent({ message: "new" }), [serverConfigMap()]).conditions[0]?.status, "False");
  });

  it("reports the host's problem", () => {
    const got = status(parent({ message: "" }), [], "invalid: spec.message: must be a non-empty string");
    assert.equal(got.problem, "invalid: spec.message: must be a non-empty string");
    assert.deepEqual([got.conditions[0]?.status, got.conditions[0]?.reason], ["False", "InvalidSpec"]);
  });

  it("keeps lastTransitionTime while Ready stays the same, and drops the host's Stalled", () => {
    const stalled = { type: "Stalled", status: "True", reason: "ModuleTrapped", message: "boom", lastTransitionTime: NOW };
    const first = status(parent({ message: "hi" }, { conditions: [stalled] }), [serverConfigMap()]);
    assert.deepEqual(first.conditions.map((c) => c.type), ["Ready"]);
    const again = JSON.parse(
      reconciler.status(parent({ message: "hi" }, first), [JSON.stringify(serverConfigMap())], [], "2026-02-02T00:00:00Z", undefined),
    ) as unknown;
    assert.deepEqual(again, first);
  });
});
