/**
 * The exports contract 1.3 adds, as componentize-js expects them: `reachOf`,
 * the `reach` export (a host of 1.3 asks its `answer`, told the time,
 * instead of `desired`), and `admission`, the `admission` export. A module
 * on this SDK reaches nothing beyond its parent's namespace and takes no
 * part in admission; what it gains is the timer `ctx.reconcileAfter` asks
 * for. The repository's build script and a scaffolded project's Makefile add
 * both to the component's entry, so a module's own file exports only
 * `reconciler`.
 */

import { answerOf, ComponentError, type Reconciler } from "./module.js";

/** The `reach-manifest` record: nothing asked beyond what 1.2 allows. */
export interface WitReachManifest {
  anyNamespace: boolean;
  selects: boolean;
  finalizes: boolean;
  parentLabelKeys: string[];
  parentAnnotationKeys: string[];
  decorates: undefined;
}

/** The `desired-state` record `answer` returns. */
export interface WitDesiredState {
  objects: string[];
  /** The timer `desired` asked for (`ctx.reconcileAfter`), in milliseconds; none: undefined. */
  againAfterMs: number | undefined;
  parentLabels: [string, string][];
  parentAnnotations: [string, string][];
}

/** The `reach` export (`export const reach = reachOf(reconciler)`). */
export interface Reach {
  manifest(): WitReachManifest;
  selections(parent: string): never[];
  answer(parent: string, owned: string[], related: string[], now: string): WitDesiredState;
  finalize(parent: string, owned: string[], related: string[], now: string): never;
}

/** The `admission` export's functions. */
export interface Admission {
  takesPart(): boolean;
  review(parent: string, old: string | undefined, operation: "create" | "update"): never;
}

/** Asked only of a module whose reach or admission says it takes part, which none on this SDK does. */
function refuse(what: string): never {
  throw new ComponentError({ tag: "unsupported", val: `this module ${what}` });
}

/**
 * The `reach` export of a module whose `reconciler` export `defineModule`
 * made: `answer` is its `desired` told the time, with the timer it asked
 * for (for any other reconciler: its `desired`, and no timer).
 */
export function reachOf(reconciler: Reconciler): Reach {
  return {
    manifest: () => ({
      anyNamespace: false,
      selects: false,
      finalizes: false,
      parentLabelKeys: [],
      parentAnnotationKeys: [],
      decorates: undefined,
    }),
    selections: () => [],
    answer: (parent, owned, related, now) => {
      const { objects, againAfterMs } = answerOf(reconciler, parent, owned, related, now);
      return { objects, againAfterMs, parentLabels: [], parentAnnotations: [] };
    },
    finalize: () => refuse("does not finalize"),
  };
}

/** The `admission` export of every module on this SDK, which takes no part (`export { admission } from "@wasm-operator/sdk"`). */
export const admission: Admission = {
  takesPart: () => false,
  review: () => refuse("takes no part in admission"),
};
