/**
 * The {{kind}} module's logic on plain objects (the SDK does the JSON and the
 * owner references): each {{kind}} owns one ConfigMap, named after it, whose
 * data holds `spec.message`, and reports a Ready condition in its status.
 * It writes by server-side apply (`writes: "apply"`): the host applies each
 * answer under the module's field manager, so a field the module stops
 * setting is removed and fields others set stay. src/app.ts exports it as
 * the component's `reconciler`; test/logic.test.ts runs it under Node.
 */

import {
  Problems,
  findCondition,
  log,
  observedGeneration,
  setCondition,
  type Condition,
  type KubeObject,
  type ModuleDefinition,
} from "@wasm-operator/sdk";
import crd from "../crd.yaml";

export const NAME = "{{name}}";
export const GROUP = "{{group}}";

export interface {{kind}} extends KubeObject {
  spec?: { message?: unknown };
  status?: { conditions?: Condition[] };
}

/** The spec's message, or an `invalid` error naming every broken field. */
export function validate(parent: {{kind}}): { message: string } {
  const problems = new Problems();
  const message = parent.spec?.message;
  if (typeof message !== "string" || message === "") problems.add("spec.message", "must be a non-empty string");
  problems.throwIfAny();
  return { message: message as string };
}

export const definition: ModuleDefinition<{{kind}}> = {
  manifest: {
    name: NAME,
    version: "0.1.0",
    parent: { group: GROUP, version: "{{version}}", kind: "{{kind}}", plural: "{{plural}}" },
    crd,
    owned: [{ group: "", version: "v1", kind: "ConfigMap", plural: "configmaps" }],
  },

  // Each answer is written by server-side apply: a data key the module no
  // longer answers is removed, what others set on the ConfigMap stays.
  writes: "apply",

  // Only the fields this module sets: the SDK adds the namespace and the
  // owner reference; an unchanged {{kind}} writes nothing.
  desired(parent) {
    const { message } = validate(parent);
    const name = parent.metadata!.name!;
    log.debug("publishing", JSON.stringify(message), "in ConfigMap", name);
    return [
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, labels: { "app.kubernetes.io/managed-by": NAME } },
        data: { message },
      },
    ];
  },

  // The whole new status. `problem` is why this reconcile failed (e.g. the
  // host's `invalid: spec.message: ...` after desired threw); report it.
  status(parent, { owned, now, problem }) {
    const generation = observedGeneration(parent);
    const name = parent.metadata!.name!;
    const published = owned.get("ConfigMap", name)?.data as Record<string, string> | undefined;
    const [status, reason, message] =
      problem !== undefined
        ? (["False", problem.startsWith("invalid:") ? "InvalidSpec" : "Failed", problem] as const)
        : published !== undefined && published.message === parent.spec?.message
          ? (["True", "Published", `in ConfigMap ${name}`] as const)
          : (["False", "Publishing", `ConfigMap ${name} is not up to date yet`] as const);
    // Keep only the conditions this module owns: the host's Stalled (set
    // when the module failed) goes with the next status answered.
    const ready = findCondition(parent.status?.conditions, "Ready");
    return {
      observedGeneration: generation,
      problem,
      conditions: setCondition(ready === undefined ? [] : [ready], "Ready", status, reason, message, now, generation),
    };
  },
};
