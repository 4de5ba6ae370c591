import { strict as assert } from "node:assert";
import { describe, it } from "node:test";

import {
  InvalidError,
  MalformedError,
  ObjectSet,
  adopt,
  findCondition,
  merge,
  observedGeneration,
  ownerReference,
  prune,
  replaceAt,
  replacedPointers,
  replacing,
  required,
  setCondition,
  type Condition,
  type KubeObject,
  type OwnerReference,
} from "../src/index.js";
import { clone, desiredDeployment, ours, parent, serverDeployment } from "./fixtures.js";

describe("required", () => {
  const credentials = { spec: { credentialsSecret: "db", ports: [{ port: 80 }], empty: "" } };

  it("is the value at the path", () => {
    assert.equal(required<string>(credentials, "spec.credentialsSecret"), "db");
    assert.equal(required(credentials, "spec.empty"), "");
    assert.deepEqual(required(credentials, "spec.ports"), [{ port: 80 }]);
  });

  it("names the whole path of a missing field, as the Rust SDK's typed parent does", () => {
    for (const [object, path] of [
      [{ spec: {} }, "spec.credentialsSecret"],
      [{}, "spec.credentialsSecret"],
      [{ spec: { credentialsSecret: null } }, "spec.credentialsSecret"],
      [{ spec: "text" }, "spec.credentialsSecret"],
      [{ spec: {} }, "spec.toString"],
    ] as const) {
      assert.throws(
        () => required(object, path),
        (e: unknown) =>
          e instanceof InvalidError && e.message === `${path}: required` && e.errors.length === 1,
        path,
      );
    }
  });
});

describe("ownerReference", () => {
  it("is the controller reference to the parent", () => {
    assert.deepEqual(ownerReference(parent()), ours);
    assert.deepEqual(Object.keys(ownerReference(parent())), ["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"]);
  });

  it("names every missing field of the parent", () => {
    const p = parent();
    delete p.kind;
    delete p.metadata?.uid;
    assert.throws(
      () => ownerReference(p),
      (e: unknown) =>
        e instanceof MalformedError && e.errors.map((f) => f.path).join() === "kind,metadata.uid",
    );
  });
});

describe("adopt", () => {
  const configMap = (refs?: OwnerReference[]): KubeObject => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "web", ...(refs === undefined ? {} : { ownerReferences: refs }) },
    data: { a: "1" },
  });
  const foreign = { apiVersion: "v1", kind: "Namespace", name: "x", uid: "other-uid" };

  it("gives a new object the parent's controller reference", () => {
    const adopted = adopt(parent(), undefined, configMap());
    assert.deepEqual(adopted.metadata?.ownerReferences, [ours]);
    assert.deepEqual(adopted.data, { a: "1" });
  });

  it("adopts an orphan, keeping its other references", () => {
    const adopted = adopt(parent(), configMap([foreign]), configMap());
    assert.deepEqual(adopted.metadata?.ownerReferences, [foreign, ours]);
  });

  it("refuses an object another controller owns, naming it", () => {
    const theirs = { apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs-1", uid: "x", controller: true };
    for (const [current, desired] of [
      [configMap([theirs]), configMap()],
      [undefined, configMap([theirs])],
    ] as const) {
      assert.throws(
        () => adopt(parent(), current, desired),
        (e: unknown) => {
          assert.ok(e instanceof InvalidError);
          assert.deepEqual(e.errors, [
            { path: "metadata.ownerReferences", message: "owned by another controller (ReplicaSet rs-1)" },
          ]);
          return true;
        },
      );
    }
  });

  it("keeps its own reference in place and refreshes it", () => {
    const stale = { ...ours, name: "renamed", blockOwnerDeletion: false };
    const adopted = adopt(parent(), configMap([foreign, stale]), configMap());
    assert.deepEqual(adopted.metadata?.ownerReferences, [foreign, ours]);
  });

  it("takes a reference desired adds, once", () => {
    const extra = { apiVersion: "v1", kind: "Secret", name: "s", uid: "secret-uid" };
    const adopted = adopt(parent(), configMap([foreign]), configMap([extra, foreign]));
    assert.deepEqual(adopted.metadata?.ownerReferences, [foreign, extra, ours]);
  });

  it("mutates neither input", () => {
    const current = configMap([foreign]);
    const desired = configMap();
    const [before, beforeDesired] = [clone(current), clone(desired)];
    adopt(parent(), current, desired);
    assert.deepEqual(current, before);
    assert.deepEqual(desired, beforeDesired);
  });

  it("needs the parent's uid", () => {
    assert.throws(() => adopt(parent({}, { uid: undefined }), undefined, configMap()), MalformedError);
  });
});

describe("merge", () => {
  it("gives back the server's Deployment exactly when nothing changed", () => {
    const server = serverDeployment();
    const desired = desiredDeployment();
    desired.metadata!.ownerReferences = [{ ...ours }];
    const merged = merge(server, desired);
    assert.deepEqual(merged, serverDeployment());
    assert.equal(JSON.stringify(merged), JSON.stringify(serverDeployment()), "same key order too");
    assert.deepEqual(server, serverDeployment(), "current is not mutated");
  });

  it("applies a change and keeps the server's defaults around it", () => {
    const merged = merge(serverDeployment(), desiredDeployment("nginx:1.28")) as any;
    const expected = serverDeployment() as any;
    expected.spec.template.spec.containers[0].image = "nginx:1.28";
    assert.deepEqual(merged, expected);
    assert.equal(merged.spec.template.spec.containers[0].terminationMessagePath, "/dev/termination-log");
    assert.equal(merged.spec.template.spec.containers[0].ports[0].protocol, "TCP");
    assert.equal(merged.metadata.resourceVersion, "4711");
  });

  it("merges named lists by name in desired's order, dropping the items it omits", () => {
    const current = {
      containers: [
        { name: "a", image: "a:1", defaulted: true },
        { name: "b", image: "b:1", defaulted: true },
        { name: "c", image: "c:1" },
      ],
    };
    const merged = merge(current, { containers: [{ name: "c", image: "c:2" }, { name: "a" }, { name: "new", image: "n" }] });
    assert.deepEqual(merged, {
      containers: [
        { name: "c", image: "c:2" },
        { name: "a", image: "a:1", defaulted: true },
        { name: "new", image: "n" },
      ],
    });
  });

  it("replaces other lists and scalars", () => {
    assert.deepEqual(merge({ args: ["a", "b"], n: 1, s: "x" }, { args: ["c"], n: 2 }), { args: ["c"], n: 2, s: "x" });
    // Items without a name, or with a name twice: replaced whole.
    assert.deepEqual(merge({ l: [{ x: 1, y: 2 }] }, { l: [{ x: 3 }] }), { l: [{ x: 3 }] });
    assert.deepEqual(merge({ l: [{ name: "a", y: 2 }] }, { l: [{ name: "a" }, { name: "a" }] }), { l: [{ name: "a" }, { name: "a" }] });
    assert.deepEqual(merge({ l: [{ name: "a", y: 2 }] }, { l: [] }), { l: [] });
    assert.deepEqual(merge({ o: { a: 1 } }, { o: "scalar" }), { o: "scalar" });
    assert.deepEqual(merge("scalar", { o: 1 }), { o: 1 });
  });

  it("removes a member desired sets to null, ignores undefined", () => {
    const merged = merge({ data: { a: "1", b: "2" }, keep: 1 }, { data: { a: null, c: "3" }, keep: undefined, gone: null });
    assert.deepEqual(merged, { data: { b: "2", c: "3" }, keep: 1 });
  });

  it("copies what it takes from desired, without nulls", () => {
    const desired = { fresh: { a: [{ name: "x", v: null }], b: null } };
    const merged = merge({}, desired);
    assert.deepEqual(merged, { fresh: { a: [{ name: "x" }] } });
    (merged.fresh.a[0] as any).v = 1;
    assert.equal(desired.fresh.a[0]!.v, null);
  });
});

describe("replacing", () => {
  it("marks a copy, out of JSON and spreads; the marks add up", () => {
    const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, data: { a: "1" } };
    const marked = replacing(replacing(cm, "/data"), "/binaryData");
    assert.deepEqual(replacedPointers(marked), ["/data", "/binaryData"]);
    assert.deepEqual(replacedPointers(cm), [], "the argument is not marked");
    assert.deepEqual(replacedPointers({ ...marked }), []);
    assert.equal(JSON.stringify(marked), JSON.stringify(cm));
    assert.throws(() => replacing(cm, "data"), /not a JSON pointer/);
  });

  it("replaceAt puts desired's field whole, or removes it, without changing its arguments", () => {
    const merged = { data: { a: "1", b: "2" }, meta: { x: { y: 1, z: 2 } }, keep: true };
    const before = clone(merged);
    assert.deepEqual(replaceAt(merged, { data: { a: "1", n: null } }, "/data"), { data: { a: "1" }, meta: before.meta, keep: true });
    assert.deepEqual(replaceAt(merged, {}, "/data"), { meta: before.meta, keep: true });
    assert.deepEqual(replaceAt(merged, { meta: { x: { z: 3 } } }, "/meta/x"), { ...before, meta: { x: { z: 3 } } });
    assert.deepEqual(replaceAt(merged, { "a/b": 1 }, "/a~1b"), { ...before, "a/b": 1 });
    assert.deepEqual(replaceAt(merged, { nope: { deeper: 1 } }, "/nope/deeper"), before, "a missing path is left");
    assert.deepEqual(merged, before);
  });
});

describe("setCondition", () => {
  const ready = (status: Condition["status"], since: string): Condition => ({
    type: "Ready",
    status,
    reason: "R",
    message: "m",
    lastTransitionTime: since,
  });
  const other: Condition = { type: "Degraded", status: "False", reason: "Fine", message: "", lastTransitionTime: "t0" };

  it("appends a new condition at now", () => {
    assert.deepEqual(setCondition(undefined, "Ready", "True", "Up", "all good", "t1", 3), [
      { type: "Ready", status: "True", reason: "Up", message: "all good", lastTransitionTime: "t1", observedGeneration: 3 },
    ]);
    assert.deepEqual(setCondition([other], "Ready", "True", "Up", "", "t1").map((c) => c.type), ["Degraded", "Ready"]);
  });

  it("keeps lastTransitionTime while the status stays, updating the rest", () => {
    const conditions = [ready("True", "t0"), other];
    const next = setCondition(conditions, "Ready", "True", "Still", "still good", "t9", 5);
    assert.deepEqual(next, [
      { type: "Ready", status: "True", reason: "Still", message: "still good", lastTransitionTime: "t0", observedGeneration: 5 },
      other,
    ]);
    assert.deepEqual(conditions, [ready("True", "t0"), other], "the input is not mutated");
  });

  it("moves lastTransitionTime to now when the status changes", () => {
    const [next] = setCondition([ready("True", "t0")], "Ready", "False", "Down", "broken", "t9");
    assert.equal(next?.lastTransitionTime, "t9");
    assert.equal(next?.status, "False");
  });

  it("findCondition finds it", () => {
    assert.equal(findCondition([other, ready("True", "t0")], "Ready")?.lastTransitionTime, "t0");
    assert.equal(findCondition(undefined, "Ready"), undefined);
  });
});

describe("observedGeneration", () => {
  it("is metadata.generation, or undefined", () => {
    assert.equal(observedGeneration(parent()), 4);
    assert.equal(observedGeneration({ metadata: {} }), undefined);
    assert.equal(observedGeneration({}), undefined);
    assert.equal(observedGeneration({ metadata: { generation: "4" as unknown as number } }), undefined);
  });
});

describe("ObjectSet", () => {
  const set = new ObjectSet([
    { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", namespace: "n1" } },
    { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", namespace: "n2" } },
    { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "a", namespace: "n1" } },
    { apiVersion: "example.io/v1", kind: "Deployment", metadata: { name: "b", namespace: "n1" } },
  ]);

  it("looks up by kind and name (and namespace)", () => {
    assert.equal(set.get("ConfigMap", "a")?.metadata?.namespace, "n1");
    assert.equal(set.get("ConfigMap", "a", "n2")?.metadata?.namespace, "n2");
    assert.equal(set.get("ConfigMap", "b"), undefined);
    assert.equal(set.get("Deployment", "a")?.apiVersion, "apps/v1");
  });

  it("tells groups apart with group/Kind", () => {
    assert.equal(set.get("apps/Deployment", "b"), undefined);
    assert.equal(set.get("example.io/Deployment", "b")?.metadata?.name, "b");
    assert.equal(set.list("Deployment").length, 2);
    assert.equal(set.list("/ConfigMap").length, 2, "the core group is empty");
    assert.equal([...set].length, 4);
    assert.equal(set.length, 4);
  });
});

describe("prune", () => {
  it("drops null and undefined members, deeply, keeping list items", () => {
    assert.deepEqual(prune({ a: null, b: { c: undefined, d: [null, { e: null }] } }), { b: { d: [null, {}] } });
  });
});
