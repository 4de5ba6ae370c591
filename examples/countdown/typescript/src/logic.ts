/**
 * The Countdown module: `example.c5c3.io/v1` `Countdown` counts down to
 * `spec.deadline` (RFC 3339). Its status says how many seconds are left
 * (`remainingSeconds`, `phase: Counting`), then `phase: Done`. Nothing else
 * changes while it counts: the module asks the host to reconcile the parent
 * again every `spec.everySeconds` (1 by default) until the deadline, with
 * `ctx.reconcileAfter`, and asks nothing once it has passed. It owns one
 * ConfigMap holding the deadline, which no tick changes. The same answers as
 * ../rust (the golden cases in ../cases hold all three languages to them).
 */

import { invalid, observedGeneration, type KubeObject, type ModuleDefinition } from "@wasm-operator/sdk";
import crd from "../crd.yaml";

export interface Countdown extends KubeObject {
  spec?: { deadline?: unknown; everySeconds?: number | null };
}

const RFC_3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 time as whole seconds since the epoch; undefined for anything else. */
export function epochSeconds(text: unknown): number | undefined {
  if (typeof text !== "string" || !RFC_3339.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : Math.floor(ms / 1000);
}

/** The deadline as seconds since the epoch. */
function deadline(countdown: Countdown): number {
  const text = countdown.spec?.deadline;
  const seconds = epochSeconds(text);
  if (seconds === undefined) throw invalid("spec.deadline", `${JSON.stringify(text)} is not an RFC 3339 time`);
  return seconds;
}

/** How often the status is brought up to date, in seconds (the CRD's default: 1). */
function every(countdown: Countdown): number {
  const seconds = countdown.spec?.everySeconds ?? 1;
  if (!Number.isInteger(seconds)) throw invalid("spec.everySeconds", "must be a whole number of seconds");
  if (seconds < 1) throw invalid("spec.everySeconds", "must be at least 1");
  return seconds;
}

/** Seconds from `now` (the host's time) to the deadline, never below 0. */
function remaining(countdown: Countdown, now: string): number {
  const at = epochSeconds(now);
  if (at === undefined) throw new TypeError(`the host's time ${JSON.stringify(now)} is not RFC 3339`);
  return Math.max(deadline(countdown) - at, 0);
}

export const countdown: ModuleDefinition<Countdown> = {
  manifest: {
    name: "countdown",
    version: "0.1.0",
    parent: { group: "example.c5c3.io", version: "v1", kind: "Countdown", plural: "countdowns" },
    crd,
    owned: [{ group: "", version: "v1", kind: "ConfigMap", plural: "configmaps" }],
  },
  // Server-side apply: each answer holds only the module's fields.
  writes: "apply",

  desired(countdown, ctx) {
    const left = remaining(countdown, ctx.now);
    const tick = every(countdown);
    // The next tick, or the deadline itself if it comes first.
    if (left > 0) ctx.reconcileAfter(Math.min(tick, left));
    const config = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: countdown.metadata?.name ?? "" },
      data: { deadline: String(countdown.spec?.deadline) },
    };
    return [config];
  },

  status(countdown, ctx) {
    const generation = observedGeneration(countdown);
    if (ctx.problem !== undefined) {
      return { observedGeneration: generation, phase: "Invalid", remainingSeconds: 0, message: ctx.problem };
    }
    const left = remaining(countdown, ctx.now);
    return { observedGeneration: generation, phase: left > 0 ? "Counting" : "Done", remainingSeconds: left };
  },
};
