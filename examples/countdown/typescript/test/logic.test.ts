// The Countdown module under Node, through the SDK's glue (JSON text in and
// out, as a host of contract 1.3 calls it: `reach.answer`, told the time),
// without building the component. The golden cases (../cases,
// `wasm-operator test`) check the built component.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";

import { ComponentError, defineModule, reachOf } from "@wasm-operator/sdk";
import { countdown, epochSeconds } from "../src/logic.js";

const reconciler = defineModule(countdown);
const reach = reachOf(reconciler);
const DEADLINE = "2026-12-02T10:00:10Z";

function parent(spec: Record<string, unknown> = { deadline: DEADLINE, everySeconds: 2 }): string {
  return JSON.stringify({
    apiVersion: "example.c5c3.io/v1",
    kind: "Countdown",
    metadata: { name: "launch", namespace: "ns", uid: "u-1", generation: 1 },
    spec,
  });
}

const answer = (now: string, text = parent()) => reach.answer(text, [], [], now);
const status = (now: string, problem?: string) =>
  JSON.parse(reconciler.status(parent(), [], [], now, problem)) as Record<string, unknown>;

/** The WIT error a call answers (componentize-js takes the thrown value's payload). */
function witError(call: () => unknown): unknown {
  try {
    call();
  } catch (error) {
    assert.ok(error instanceof ComponentError, `a ComponentError, not ${String(error)}`);
    return error.payload;
  }
  assert.fail("no error");
}

describe("desired", () => {
  it("asks for the next tick until the deadline, and nothing after", () => {
    assert.equal(answer("2026-12-02T10:00:00Z").againAfterMs, 2_000);
    assert.equal(answer("2026-12-02T10:00:09Z").againAfterMs, 1_000, "the deadline comes before the tick");
    assert.equal(answer("2026-12-02T10:00:10Z").againAfterMs, undefined);
    assert.equal(answer("2026-12-02T10:00:00Z", parent({ deadline: DEADLINE })).againAfterMs, 1_000, "every second by default");
  });

  it("owns one ConfigMap holding the deadline, which no tick changes", () => {
    const objects = answer("2026-12-02T10:00:00Z").objects;
    assert.deepEqual(objects, answer("2026-12-02T10:00:05Z").objects);
    assert.deepEqual(
      objects.map((text) => JSON.parse(text) as unknown),
      [
        {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: {
            name: "launch",
            namespace: "ns",
            ownerReferences: [
              { apiVersion: "example.c5c3.io/v1", kind: "Countdown", name: "launch", uid: "u-1", controller: true, blockOwnerDeletion: true },
            ],
          },
          data: { deadline: DEADLINE },
        },
      ],
    );
  });

  it("refuses a deadline that is no time, and a tick under a second, at their fields", () => {
    assert.deepEqual(witError(() => answer("2026-12-02T10:00:00Z", parent({ deadline: "soon" }))), {
      tag: "invalid",
      val: [{ path: "spec.deadline", message: '"soon" is not an RFC 3339 time' }],
    });
    assert.deepEqual(witError(() => answer("2026-12-02T10:00:00Z", parent({ deadline: DEADLINE, everySeconds: 0 }))), {
      tag: "invalid",
      val: [{ path: "spec.everySeconds", message: "must be at least 1" }],
    });
  });
});

describe("status", () => {
  it("counts down, then says done", () => {
    assert.deepEqual(status("2026-12-02T10:00:03Z"), { observedGeneration: 1, phase: "Counting", remainingSeconds: 7 });
    assert.deepEqual(status("2026-12-02T10:00:11Z"), { observedGeneration: 1, phase: "Done", remainingSeconds: 0 });
  });

  it("reports why the reconcile failed", () => {
    assert.deepEqual(status("2026-12-02T10:00:03Z", "invalid: spec.deadline: no"), {
      observedGeneration: 1,
      phase: "Invalid",
      remainingSeconds: 0,
      message: "invalid: spec.deadline: no",
    });
  });
});

describe("epochSeconds", () => {
  it("reads RFC 3339 only, to whole seconds", () => {
    assert.equal(epochSeconds("1970-01-01T00:01:00.9Z"), 60);
    assert.equal(epochSeconds("1970-01-01T01:00:00+01:00"), 0);
    assert.equal(epochSeconds("1970-01-01"), undefined);
    assert.equal(epochSeconds(60), undefined);
  });
});
