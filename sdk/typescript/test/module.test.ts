import { strict as assert } from "node:assert";
import { afterEach, describe, it } from "node:test";

import {
  ComponentError,
  EPOCH,
  InvalidError,
  Problems,
  defineModule,
  describeError,
  invalid,
  admission,
  log,
  malformed,
  reachOf,
  replacing,
  setLogWriter,
  toWitError,
  unsupported,
  writesOf,
  type KubeObject,
  type LogLevel,
  type Context,
  type ModuleDefinition,
} from "../src/index.js";
import { UID, desiredDeployment, ours, parent, serverDeployment } from "./fixtures.js";

const manifest = {
  name: "site",
  version: "1.2.3",
  parent: { group: "example.c5c3.io", version: "v1", kind: "Site", plural: "sites" },
  crd: "kind: CustomResourceDefinition",
  owned: [{ group: "apps", version: "v1", kind: "Deployment", plural: "deployments" }],
};

/** A module whose functions are replaced per test. */
function module(overrides: Partial<ModuleDefinition> = {}, lines?: [LogLevel, string][]) {
  return defineModule(
    {
      manifest,
      desired: (p) => [desiredDeployment(String((p.spec as { image?: string }).image))],
      status: (p, ctx) => ({ generation: p.metadata?.generation, now: ctx.now, problem: ctx.problem, owned: ctx.owned.length }),
      ...overrides,
    },
    lines === undefined ? {} : { log: (level, message) => lines.push([level, message]) },
  );
}

const text = (obj: unknown) => JSON.stringify(obj);

/** The WIT error a call answers (componentize-js takes the thrown value's payload). */
function witError(call: () => unknown): unknown {
  try {
    call();
  } catch (error) {
    assert.ok(error instanceof ComponentError, `a ComponentError, not ${String(error)}`);
    assert.ok(Object.prototype.hasOwnProperty.call(error, "payload"), "payload is an own property");
    return error.payload;
  }
  assert.fail("no error");
}

afterEach(() => setLogWriter(undefined));

describe("manifest", () => {
  it("is the WIT record, with the defaults filled in", () => {
    assert.deepEqual(module().manifest(), {
      name: "site",
      version: "1.2.3",
      parent: { group: "example.c5c3.io", version: "v1", kind: "Site", plural: "sites", namespaced: true },
      crd: "kind: CustomResourceDefinition",
      owned: [{ group: "apps", version: "v1", kind: "Deployment", plural: "deployments", namespaced: true }],
      reads: [],
      fieldManager: "site-operator",
      eventReporter: "site-operator",
    });
  });

  it("takes the names given", () => {
    const named = defineModule({ manifest: { ...manifest, crd: undefined, fieldManager: "fm", eventReporter: "er" }, desired: () => [], status: () => ({}) });
    const got = named.manifest();
    assert.deepEqual([got.fieldManager, got.eventReporter, got.crd], ["fm", "er", ""]);
  });
});

describe("writes", () => {
  it("is replace by default, and what the definition says", () => {
    assert.equal(writesOf(module()).model(), "replace");
    assert.equal(writesOf(module({ writes: "apply" })).model(), "apply");
    assert.equal(writesOf(module({ writes: "replace" })).model(), "replace");
  });

  it("is replace for a reconciler defineModule did not make", () => {
    assert.equal(writesOf({ ...module({ writes: "apply" }) }).model(), "replace");
  });

  it("refuses a model the contract lacks", () => {
    assert.throws(() => module({ writes: "merge" as "apply" }), /writes must be "replace" or "apply", not "merge"/);
  });

  it("with apply, answers only the module's fields: no merge onto the current object, no replacing()", () => {
    const server = serverDeployment();
    server.metadata!.ownerReferences = [{ ...ours }, { apiVersion: "v1", kind: "Other", name: "o", uid: "o-1" }];
    const d = replacing({ ...desiredDeployment(), status: null }, "/spec/template");
    delete d.metadata!.namespace;
    const [answer] = module({ writes: "apply", desired: () => [d] }).desired(text(parent()), [text(server)], []);
    const expected = desiredDeployment();
    expected.metadata!.ownerReferences = [ours];
    assert.deepEqual(JSON.parse(answer!), expected, "the server's fields and others' references are not in the answer");
  });

  it("with apply, still refuses an object another controller owns", () => {
    const theirs = serverDeployment();
    theirs.metadata!.ownerReferences = [{ ...ours, kind: "Other", name: "boss", uid: "another" }];
    const m = module({ writes: "apply" });
    assert.deepEqual(witError(() => m.desired(text(parent()), [text(theirs)], [])), {
      tag: "invalid",
      val: [{ path: "metadata.ownerReferences", message: "owned by another controller (Other boss)" }],
    });
  });
});

describe("references", () => {
  it("are none by default", () => {
    assert.deepEqual(module().references(text(parent())), []);
  });

  it("become object-refs, from apiVersion or group and version", () => {
    const refs = module({
      references: (p) => [
        { apiVersion: "v1", kind: "Secret", name: String((p.spec as { secret: string }).secret) },
        { group: "example.io", version: "v2", kind: "Thing", name: "t", namespace: "other" },
        { apiVersion: "apps/v1", kind: "Deployment", name: "d" },
      ],
    }).references(text(parent({ secret: "creds" })));
    assert.deepEqual(refs, [
      { group: "", version: "v1", kind: "Secret", namespace: undefined, name: "creds" },
      { group: "example.io", version: "v2", kind: "Thing", namespace: "other", name: "t" },
      { group: "apps", version: "v1", kind: "Deployment", namespace: undefined, name: "d" },
    ]);
  });
});

describe("desired", () => {
  it("fills the namespace, adopts and serializes a new object", () => {
    const d = desiredDeployment();
    delete d.metadata!.namespace;
    const [answer] = module({ desired: () => [d] }).desired(text(parent({}, { namespace: "prod" })), [], []);
    const obj = JSON.parse(answer!) as KubeObject;
    assert.equal(obj.metadata?.namespace, "prod");
    assert.deepEqual(obj.metadata?.ownerReferences, [ours]);
    assert.deepEqual((obj.spec as any).template.spec.containers[0].image, "nginx:1.27");
  });

  it("answers the server's object when nothing changed (a steady state writes nothing)", () => {
    const server = text(serverDeployment());
    assert.deepEqual(module().desired(text(parent()), [server], []), [server]);
  });

  it("merges a change onto the current object", () => {
    const [answer] = module().desired(text(parent({ image: "nginx:1.28" })), [text(serverDeployment())], []);
    const expected = serverDeployment() as any;
    expected.spec.template.spec.containers[0].image = "nginx:1.28";
    assert.deepEqual(JSON.parse(answer!), expected);
  });

  it("replaces a field marked with replacing() instead of merging it: keys the answer drops are removed", () => {
    const server = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c", namespace: "default", uid: "cm", resourceVersion: "7", ownerReferences: [ours] },
      data: { message: "hi", old: "stale" },
    };
    const answer = (mark: boolean) => {
      const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, data: { message: "hi" } };
      const [out] = module({ desired: () => [mark ? replacing(cm, "/data") : cm] }).desired(text(parent()), [text(server)], []);
      return JSON.parse(out!) as KubeObject;
    };
    assert.deepEqual(answer(false).data, { message: "hi", old: "stale" }, "merged: the old key stays");
    assert.deepEqual(answer(true), { ...server, data: { message: "hi" } }, "replaced: the old key goes, the rest is merged");
    const [fresh] = module({ desired: () => [replacing({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "n" }, data: { a: "1" } }, "/data")] })
      .desired(text(parent()), [], []);
    assert.deepEqual((JSON.parse(fresh!) as KubeObject).data, { a: "1" });
  });

  it("does not take an owned object of another kind or name", () => {
    const configMap = { apiVersion: "v1", kind: "Deployment", metadata: { name: "web", namespace: "default", uid: "cm" } };
    const other = { ...serverDeployment(), metadata: { ...serverDeployment().metadata, name: "other" } };
    const [answer] = module().desired(text(parent()), [text(configMap), text(other)], []);
    assert.equal((JSON.parse(answer!) as KubeObject).metadata?.uid, undefined);
  });

  it("hands owned and related objects to the author, with lookups", () => {
    const seen: string[] = [];
    module({
      desired: (_p, ctx) => {
        seen.push(String(ctx.owned.get("Deployment", "web")?.metadata?.uid), String(ctx.related.get("Secret", "s")?.data));
        return [];
      },
    }).desired(text(parent()), [text(serverDeployment())], [text({ apiVersion: "v1", kind: "Secret", metadata: { name: "s" }, data: "x" })]);
    assert.deepEqual(seen, ["deploy-uid-1", "x"]);
  });

  it("refuses an object another controller owns, as invalid", () => {
    const theirs = serverDeployment();
    theirs.metadata!.ownerReferences = [{ ...ours, kind: "Other", name: "boss", uid: "another" }];
    const d = desiredDeployment();
    d.metadata!.ownerReferences = theirs.metadata!.ownerReferences;
    assert.deepEqual(witError(() => module({ desired: () => [d] }).desired(text(parent()), [], [])), {
      tag: "invalid",
      val: [{ path: "metadata.ownerReferences", message: "owned by another controller (Other boss)" }],
    });
  });

  it("answers the author's errors as the WIT variant", () => {
    const cases: [unknown, unknown][] = [
      [invalid("spec.image", "must be set"), { tag: "invalid", val: [{ path: "spec.image", message: "must be set" }] }],
      [
        new InvalidError([
          { path: "spec.a", message: "x" },
          { path: "spec.b", message: "y" },
        ]),
        { tag: "invalid", val: [{ path: "spec.a", message: "x" }, { path: "spec.b", message: "y" }] },
      ],
      [malformed("spec", "must be an object"), { tag: "malformed", val: [{ path: "spec", message: "must be an object" }] }],
      [unsupported("no"), { tag: "unsupported", val: "no" }],
    ];
    for (const [thrown, expected] of cases) {
      const m = module({
        desired: () => {
          throw thrown;
        },
      });
      assert.deepEqual(witError(() => m.desired(text(parent()), [], [])), expected);
    }
  });

  it("answers malformed for a parent that is not a JSON object, saying why", () => {
    const m = module();
    const message = (parentText: string) => (witError(() => m.desired(parentText, [], [])) as { val: { path: string; message: string }[] }).val[0]!;
    assert.match(message("{").message, /^parent: not JSON: /);
    assert.deepEqual(message("[1]"), { path: "", message: "parent: expected a JSON object, got an array" });
    assert.deepEqual(message("null"), { path: "", message: "parent: expected a JSON object, got null" });
    assert.deepEqual(message('{"metadata": 5}'), { path: "metadata", message: "parent: must be an object, got a number" });
    assert.deepEqual(witError(() => m.references("7")), { tag: "malformed", val: [{ path: "", message: "parent: expected a JSON object, got a number" }] });
    const owned = witError(() => m.desired(text(parent()), ["x"], [])) as { val: { message: string }[] };
    assert.match(owned.val[0]!.message, /^owned object 0: not JSON: /);
  });

  it("passes a ComponentError thrown by hand on, without logging it", () => {
    const lines: [LogLevel, string][] = [];
    const thrown = new ComponentError({ tag: "unsupported", val: "by hand" });
    const m = module({
      desired: () => {
        throw thrown;
      },
    }, lines);
    assert.throws(() => m.desired(text(parent()), [], []), (e: unknown) => e === thrown);
    assert.deepEqual(lines, []);
  });

  it("needs the parent's name, namespace and uid", () => {
    const p = parent({}, { namespace: undefined, uid: "" });
    assert.deepEqual(witError(() => module().desired(text(p), [], [])), {
      tag: "malformed",
      val: [
        { path: "metadata.namespace", message: "must be a non-empty string" },
        { path: "metadata.uid", message: "must be a non-empty string" },
      ],
    });
  });

  it("logs any other exception with its stack at level error, then rethrows it (the call traps)", () => {
    const lines: [LogLevel, string][] = [];
    const bug = new RangeError("index 7 out of range");
    const m = module(
      {
        desired: () => {
          throw bug;
        },
      },
      lines,
    );
    assert.throws(() => m.desired(text(parent()), [], []), (e: unknown) => e === bug);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]![0], "error");
    assert.match(lines[0]![1], /^RangeError: index 7 out of range\n\s+at /);
  });

  it("treats a desired object without kind or name as a bug, naming it", () => {
    const lines: [LogLevel, string][] = [];
    const m = module({ desired: () => [{ apiVersion: "v1", kind: "ConfigMap", metadata: {} }] }, lines);
    assert.throws(() => m.desired(text(parent()), [], []), TypeError);
    assert.match(lines[0]![1], /desired object 0 \(ConfigMap\): metadata.name must be a non-empty string/);
  });
});

describe("status", () => {
  it("gets now, problem and the owned objects, and answers compact JSON without nulls", () => {
    const m = module();
    assert.equal(m.status(text(parent()), [text(serverDeployment())], [], "2026-01-01T00:00:00Z", "invalid: x"), '{"generation":4,"now":"2026-01-01T00:00:00Z","problem":"invalid: x","owned":1}');
    assert.equal(m.status(text(parent()), [], [], "t", undefined), '{"generation":4,"now":"t","owned":0}');
    assert.equal(m.status(text(parent()), [], [], "t", null), '{"generation":4,"now":"t","owned":0}');
  });

  it("answers the author's errors, and malformed for a bad parent", () => {
    assert.deepEqual(witError(() => module({ status: () => { throw invalid("spec", "no"); } }).status(text(parent()), [], [], "t")), {
      tag: "invalid",
      val: [{ path: "spec", message: "no" }],
    });
    assert.equal((witError(() => module().status("[]", [], [], "t")) as any).tag, "malformed");
  });

  it("refuses a status that is not an object", () => {
    const m = module({ status: () => [] as unknown as Record<string, unknown> });
    assert.throws(() => m.status(text(parent()), [], [], "t"), /status must return an object, got an array/);
  });
});

describe("reach (contract 1.3)", () => {
  const NOW = "2026-12-02T10:00:00Z";
  /** A module whose desired asks for these timers (in seconds), and records the time it was told. */
  function timed(seconds: number[], seen: string[] = []) {
    return module({
      desired: (_p, ctx: Context) => {
        seen.push(ctx.now);
        for (const s of seconds) ctx.reconcileAfter(s);
        return [desiredDeployment()];
      },
    });
  }

  it("asks for nothing beyond the parent's namespace", () => {
    assert.deepEqual(reachOf(module()).manifest(), {
      anyNamespace: false,
      selects: false,
      finalizes: false,
      parentLabelKeys: [],
      parentAnnotationKeys: [],
      decorates: undefined,
    });
    assert.deepEqual(reachOf(module()).selections(text(parent())), []);
  });

  it("answers desired's objects, told the time, with no timer by default", () => {
    const seen: string[] = [];
    const reconciler = timed([], seen);
    const answer = reachOf(reconciler).answer(text(parent()), [], [], NOW);
    assert.deepEqual(answer, {
      objects: reconciler.desired(text(parent()), [], []),
      againAfterMs: undefined,
      parentLabels: [],
      parentAnnotations: [],
    });
    assert.deepEqual(seen, [NOW, EPOCH], "desired (a 1.2 host) is told the epoch");
  });

  it("answers the timer asked for in milliseconds, the soonest when asked more than once", () => {
    const after = (seconds: number[]) => reachOf(timed(seconds)).answer(text(parent()), [], [], NOW).againAfterMs;
    assert.equal(after([30]), 30_000);
    assert.equal(after([30, 5, 60]), 5_000);
    assert.equal(after([1.5]), 1_500);
    assert.equal(after([0.0004]), 0, "whole milliseconds");
    assert.equal(after([100 * 24 * 3600]), 0xffff_ffff, "past u32 milliseconds: the longest the contract carries");
  });

  it("treats a timer that is no duration as a bug", () => {
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => reachOf(timed([bad])).answer(text(parent()), [], [], NOW), /reconcileAfter: seconds must be a finite number >= 0/);
    }
  });

  it("answers the author's errors as the WIT variant", () => {
    const failing = module({ desired: () => { throw invalid("spec.image", "must name a tag"); } });
    assert.deepEqual(witError(() => reachOf(failing).answer(text(parent()), [], [], NOW)), {
      tag: "invalid",
      val: [{ path: "spec.image", message: "must name a tag" }],
    });
  });

  it("for a reconciler defineModule did not make, answers its desired and no timer", () => {
    const reconciler = { ...timed([5]) };
    const answer = reachOf(reconciler).answer(text(parent()), [], [], NOW);
    assert.deepEqual([answer.objects.length, answer.againAfterMs], [1, undefined]);
  });

  it("does not finalize, and takes no part in admission", () => {
    assert.deepEqual(witError(() => reachOf(module()).finalize(text(parent()), [], [], NOW)), {
      tag: "unsupported",
      val: "this module does not finalize",
    });
    assert.equal(admission.takesPart(), false);
    assert.deepEqual(witError(() => admission.review(text(parent()), undefined, "create")), {
      tag: "unsupported",
      val: "this module takes no part in admission",
    });
  });
});

describe("errors", () => {
  it("Problems collects every field, then throws them at once", () => {
    const problems = new Problems();
    assert.equal(problems.empty, true);
    problems.throwIfAny();
    problems.add("spec.a", "must be set").add("spec.b", "must be positive");
    assert.equal(problems.toString(), "spec.a: must be set; spec.b: must be positive");
    assert.throws(() => problems.throwIfAny(), (e: unknown) => e instanceof InvalidError && e.errors.length === 2 && e.message === problems.toString());
  });

  it("toWitError maps only the module errors", () => {
    assert.deepEqual(toWitError(unsupported("x")), { tag: "unsupported", val: "x" });
    assert.equal(toWitError(new Error("x")), undefined);
    assert.equal(toWitError("x"), undefined);
  });
});

describe("log", () => {
  it("is a no-op without the import", () => {
    log.info("nobody listens");
  });

  it("writes through the import, joining its arguments", () => {
    const lines: [LogLevel, string][] = [];
    setLogWriter((level, message) => lines.push([level, message]));
    log.error("a", 1, { b: true });
    log.warn("w");
    log.info("i");
    log.debug("d");
    assert.deepEqual(lines, [
      ["error", 'a 1 {"b":true}'],
      ["warn", "w"],
      ["info", "i"],
      ["debug", "d"],
    ]);
  });

  it("defineModule binds the import given", () => {
    const lines: [LogLevel, string][] = [];
    module({ desired: () => (log.info("in desired", UID), []) }, lines).desired(text(parent()), [], []);
    assert.deepEqual(lines, [["info", `in desired ${UID}`]]);
  });

  it("describeError gives the message once, then the stack", () => {
    const spidermonkey = new Error("boom");
    spidermonkey.stack = "f@app.js:1:2\ng@app.js:3:4\n";
    assert.equal(describeError(spidermonkey), "Error: boom\nf@app.js:1:2\ng@app.js:3:4");
    const v8 = new TypeError("bad");
    assert.match(describeError(v8), /^TypeError: bad\n\s+at /);
    assert.equal(describeError("text"), "uncaught exception: text");
    assert.equal(describeError({ a: 1 }), 'uncaught exception: {"a":1}');
  });
});
