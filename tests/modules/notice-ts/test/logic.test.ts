// The Notice module under Node, through the SDK's glue (JSON text in and
// out, as the host calls it), without building the component.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";

import { ComponentError, defineModule, type Condition, type KubeObject, type LogLevel } from "@wasm-operator/sdk";
import { notice } from "../src/logic.js";

const UID = "0c0ffee0-0000-4000-8000-000000000001";
const NOW = "2026-01-01T00:00:00Z";

function parent(spec: Record<string, unknown>, metadata: Record<string, unknown> = {}, status?: unknown): string {
  return JSON.stringify({
    apiVersion: "typescript.example.c5c3.io/v1",
    kind: "Notice",
    metadata: { name: "hello", namespace: "default", uid: UID, generation: 3, ...metadata },
    spec,
    ...(status === undefined ? {} : { status }),
  });
}

/** The ConfigMap as the API server returns it after the module created it. */
function serverConfigMap(data = { message: "hi", level: "info", language: "typescript" }): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "hello-notice",
      namespace: "default",
      uid: "cm-uid-1",
      resourceVersion: "4711",
      creationTimestamp: "2025-12-31T00:00:00Z",
      labels: { "app.kubernetes.io/managed-by": "notice-ts", "typescript.example.c5c3.io/notice": "hello", team: "blue" },
      annotations: { note: "keep me" },
      ownerReferences: [
        { apiVersion: "typescript.example.c5c3.io/v1", kind: "Notice", name: "hello", uid: UID, controller: true, blockOwnerDeletion: true },
      ],
      managedFields: [{ manager: "notice-ts-operator", operation: "Update" }],
    },
    data,
  };
}

function run(lines: [LogLevel, string][] = []) {
  return defineModule(notice, { log: (level, message) => lines.push([level, message]) });
}

function desired(parentText: string, owned: KubeObject[] = []): KubeObject[] {
  return run()
    .desired(parentText, owned.map((o) => JSON.stringify(o)), [])
    .map((t) => JSON.parse(t) as KubeObject);
}

function status(parentText: string, owned: KubeObject[] = [], problem?: string, now = NOW) {
  return JSON.parse(run().status(parentText, owned.map((o) => JSON.stringify(o)), [], now, problem)) as {
    observedGeneration?: number;
    published?: string;
    problem?: string;
    conditions: Condition[];
  };
}

function invalidFields(call: () => unknown) {
  try {
    call();
  } catch (error) {
    assert.ok(error instanceof ComponentError);
    assert.equal(error.payload.tag, "invalid");
    return error.payload.val;
  }
  assert.fail("no error");
}

describe("manifest", () => {
  it("names the Notice kind, its CRD and the ConfigMaps it owns", () => {
    const m = run().manifest();
    assert.deepEqual(m.parent, { group: "typescript.example.c5c3.io", version: "v1", kind: "Notice", plural: "notices", namespaced: true });
    assert.deepEqual(m.owned.map((k) => k.kind), ["ConfigMap"]);
    assert.match(m.crd, /name: notices\.typescript\.example\.c5c3\.io/);
    assert.match(m.crd, /kind: Notice\n/);
    assert.equal(m.fieldManager, "notice-ts-operator");
  });
});

describe("desired", () => {
  it("creates the ConfigMap, owned by the Notice", () => {
    assert.deepEqual(desired(parent({ message: "hi" })), [
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: {
          name: "hello-notice",
          labels: { "app.kubernetes.io/managed-by": "notice-ts", "typescript.example.c5c3.io/notice": "hello" },
          namespace: "default",
          ownerReferences: [
            { apiVersion: "typescript.example.c5c3.io/v1", kind: "Notice", name: "hello", uid: UID, controller: true, blockOwnerDeletion: true },
          ],
        },
        data: { message: "hi", level: "info", language: "typescript" },
      },
    ]);
  });

  it("answers the server's ConfigMap unchanged in a steady state", () => {
    assert.deepEqual(desired(parent({ message: "hi" }), [serverConfigMap()]), [serverConfigMap()]);
  });

  it("updates the ConfigMap in place on an edit", () => {
    const [cm] = desired(parent({ message: "bye", level: "warning" }), [serverConfigMap()]);
    const expected = serverConfigMap({ message: "bye", level: "warning", language: "typescript" });
    assert.deepEqual(cm, expected);
  });

  it("reports every invalid field", () => {
    assert.deepEqual(invalidFields(() => desired(parent({ level: "loud" }))), [
      { path: "spec.message", message: "must be a non-empty string" },
      { path: "spec.level", message: "must be one of info, warning" },
    ]);
    assert.deepEqual(invalidFields(() => desired(parent({ message: "hi" }, { name: "n".repeat(64) }))), [
      { path: "metadata.name", message: "must be at most 63 characters (it is a label value)" },
    ]);
  });

  it("throws an unexpected error when told to, logging it", () => {
    const lines: [LogLevel, string][] = [];
    assert.throws(() => run(lines).desired(parent({ message: "throw" }), [], []), /asked to throw by Notice hello/);
    assert.equal(lines.at(-1)?.[0], "error");
    assert.match(lines.at(-1)?.[1] ?? "", /^Error: asked to throw by Notice hello\n/);
  });
});

describe("status", () => {
  it("is Ready once the ConfigMap holds the message", () => {
    assert.deepEqual(status(parent({ message: "hi" }), [serverConfigMap()]), {
      observedGeneration: 3,
      published: "hi",
      conditions: [
        { type: "Ready", status: "True", reason: "Published", message: "in ConfigMap hello-notice", lastTransitionTime: NOW, observedGeneration: 3 },
      ],
    });
  });

  it("is not Ready while the ConfigMap is missing or stale", () => {
    const [missing] = status(parent({ message: "hi" })).conditions;
    assert.deepEqual([missing?.status, missing?.reason], ["False", "Publishing"]);
    const stale = status(parent({ message: "new" }), [serverConfigMap()]);
    assert.deepEqual([stale.published, stale.conditions[0]?.status], ["hi", "False"]);
  });

  it("keeps lastTransitionTime while Ready stays the same", () => {
    const first = status(parent({ message: "hi" }), [serverConfigMap()]);
    const again = status(parent({ message: "hi" }, {}, first), [serverConfigMap()], undefined, "2026-02-02T00:00:00Z");
    assert.deepEqual(again, first);
    const broken = status(parent({ message: "hi" }, {}, first), [serverConfigMap()], "refused: quota", "2026-02-02T00:00:00Z");
    assert.equal(broken.conditions[0]?.lastTransitionTime, "2026-02-02T00:00:00Z");
  });

  it("drops conditions it does not own (the host's Stalled)", () => {
    const stalled = { type: "Stalled", status: "True", reason: "ModuleTrapped", message: "boom", lastTransitionTime: NOW };
    const got = status(parent({ message: "hi" }, {}, { conditions: [stalled] }), [serverConfigMap()]);
    assert.deepEqual(got.conditions.map((c) => c.type), ["Ready"]);
  });

  it("reports the host's problem, and an invalid spec the host has not reported yet", () => {
    const told = status(parent({ message: "hi" }), [], "invalid: spec.level: must be one of info, warning");
    assert.equal(told.problem, "invalid: spec.level: must be one of info, warning");
    assert.deepEqual([told.conditions[0]?.status, told.conditions[0]?.reason], ["False", "InvalidSpec"]);
    const found = status(parent({ message: "hi", level: 7 }));
    assert.equal(found.problem, "invalid: spec.level: must be one of info, warning");
    const refused = status(parent({ message: "hi" }), [], "refused: quota exceeded");
    assert.deepEqual([refused.problem, refused.conditions[0]?.reason], ["refused: quota exceeded", "Failed"]);
  });
});
