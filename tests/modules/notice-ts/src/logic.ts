/**
 * The Notice module's logic on plain objects (the SDK does the JSON, the
 * owner references and the merge): one ConfigMap `<name>-notice` per Notice
 * holding its message, and a Ready condition in the status. src/app.ts
 * exports it as the component's `reconciler`; test/logic.test.ts runs it
 * under Node.
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

export const NAME = "notice-ts";
export const GROUP = "typescript.example.c5c3.io";
const LEVELS = ["info", "warning"];
/** The parent's name is a label value: at most 63 characters. */
const MAX_NAME = 63;

export interface Notice extends KubeObject {
  spec?: { message?: unknown; level?: unknown };
  status?: { conditions?: Condition[] };
}

export const configMapName = (notice: Notice): string => `${notice.metadata?.name}-notice`;

/** The spec's message and level, or an InvalidError naming every broken field. */
export function validate(notice: Notice): { message: string; level: string } {
  const problems = new Problems();
  if ((notice.metadata?.name ?? "").length > MAX_NAME) {
    problems.add("metadata.name", `must be at most ${MAX_NAME} characters (it is a label value)`);
  }
  const spec = notice.spec ?? {};
  const { message, level = "info" } = spec;
  if (typeof message !== "string" || message === "") problems.add("spec.message", "must be a non-empty string");
  if (typeof level !== "string" || !LEVELS.includes(level)) problems.add("spec.level", `must be one of ${LEVELS.join(", ")}`);
  problems.throwIfAny();
  return { message: message as string, level: level as string };
}

export const notice: ModuleDefinition<Notice> = {
  manifest: {
    name: NAME,
    version: "0.1.0",
    parent: { group: GROUP, version: "v1", kind: "Notice", plural: "notices" },
    crd,
    owned: [{ group: "", version: "v1", kind: "ConfigMap", plural: "configmaps" }],
  },

  desired(parent) {
    const { message, level } = validate(parent);
    // A way to make the module fail unexpectedly (a bug, not a bad spec).
    if (message === "throw") throw new Error(`asked to throw by Notice ${parent.metadata?.name}`);
    log.debug("publishing a", level, "notice");
    return [
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: {
          name: configMapName(parent),
          labels: { "app.kubernetes.io/managed-by": NAME, [`${GROUP}/notice`]: String(parent.metadata?.name) },
        },
        data: { message, level, language: "typescript" },
      },
    ];
  },

  status(parent, { owned, now, problem }) {
    const generation = observedGeneration(parent);
    const ready = findCondition(parent.status?.conditions, "Ready");
    const published = owned.get("ConfigMap", configMapName(parent))?.data as Record<string, string> | undefined;
    let why = problem;
    if (why === undefined) {
      try {
        validate(parent);
      } catch (error) {
        why = `invalid: ${(error as Error).message}`;
      }
    }
    const [status, reason, text] =
      why !== undefined
        ? (["False", why.startsWith("invalid:") ? "InvalidSpec" : "Failed", why] as const)
        : published?.message === parent.spec?.message
          ? (["True", "Published", `in ConfigMap ${configMapName(parent)}`] as const)
          : (["False", "Publishing", `ConfigMap ${configMapName(parent)} is not up to date yet`] as const);
    return {
      observedGeneration: generation,
      published: published?.message,
      problem: why,
      // Only the module's own conditions: the host's Stalled (set when the
      // module failed) goes with the next status the module answers.
      conditions: setCondition(ready === undefined ? [] : [ready], "Ready", status, reason, text, now, generation),
    };
  },
};
