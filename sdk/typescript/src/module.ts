/**
 * `defineModule`: an author's manifest and functions on plain objects, as the
 * `reconciler` export componentize-js expects (the WIT interface
 * `wasm-operator:controller/reconciler@1.3.0`: an exported object with one
 * method per function, records as objects with camelCase fields, a
 * `result`'s error thrown as a value whose `payload` is the variant),
 * `writesOf`, the `writes` export (an enum as its case's name), and what
 * `reachOf` (src/reach.ts) answers `reach.answer` with: `desired` told the
 * time, with the timer it asked for.
 */

import { MalformedError, toWitError, type FieldError, type WitError } from "./errors.js";
import { describeError, setLogWriter, type LogWriter } from "./log.js";
import { adopt, groupOf, isObject, merge, ObjectSet, prune, replaceAt, replacedPointers, type KubeObject } from "./objects.js";

/** An API kind, with what the host needs to reach it without discovery. */
export interface KindInfo {
  /** Empty for the core group (`v1` ConfigMap, Secret, Service). */
  group: string;
  version: string;
  kind: string;
  /** The resource name in URLs: `deployments`, `configmaps`. */
  plural: string;
  /** Default true. */
  namespaced?: boolean;
}

/** What the host reads once when it loads the module. */
export interface Manifest {
  /** The module's name (`static-site`): metric labels, logs. */
  name: string;
  /** The module's own version (semver). */
  version: string;
  /** The custom resource the module reconciles. */
  parent: KindInfo;
  /** The parent's CustomResourceDefinition, YAML or JSON; default none (""). */
  crd?: string;
  /** Kinds a parent owns (default none). */
  owned?: KindInfo[];
  /** Kinds a parent only reads, named by `references` (default none). */
  reads?: KindInfo[];
  /** Default `<name>-operator`. */
  fieldManager?: string;
  /** Default `<name>-operator`. */
  eventReporter?: string;
}

/** An object of a `reads` kind a parent needs: `apiVersion` or `group` + `version`. */
export interface ObjectRef {
  apiVersion?: string;
  group?: string;
  version?: string;
  kind: string;
  name: string;
  /** Default: the parent's namespace. */
  namespace?: string;
}

/** What `desired` gets besides the parent. */
export interface Context {
  /** The objects of owned kinds the parent controls now, as the server returned them. */
  owned: ObjectSet;
  /** The referenced objects that exist. */
  related: ObjectSet;
  /**
   * The time of this call, RFC 3339: of `status`, and of `desired` on a host
   * of contract 1.3 or later (`EPOCH` during `desired` on an older one).
   */
  now: string;
  /**
   * During `desired`: reconcile this parent again after `seconds` (a
   * fraction is fine; whole milliseconds count), even if nothing it reads
   * changes (a deadline, a poll). The host keeps one timer per parent,
   * waits at least a second, and comes back sooner if something changes
   * (its resync too); each answer sets the timer anew, so an answer that
   * asks nothing clears it. Asked more than once in one answer, the soonest
   * wins. A host older than contract 1.3 ignores it, and so does `status`.
   * A negative or non-finite `seconds` is a bug (a `TypeError`).
   */
  reconcileAfter(seconds: number): void;
}

/** What `status` gets besides the parent. */
export interface StatusContext extends Context {
  /** Why this reconcile failed (e.g. the host's `invalid: ...`), if it did; report it. */
  problem: string | undefined;
}

/**
 * How the host writes what `desired` answers (contract 1.2's `writes`):
 * `replace`, the object updated to exactly the answer, which the SDK merged
 * onto the current object; `apply`, the answer (only the module's fields, no
 * merge) written by server-side apply under the module's field manager.
 */
export type WriteModel = "replace" | "apply";

/** A module: its manifest and the functions its author writes. */
export interface ModuleDefinition<P extends KubeObject = KubeObject> {
  manifest: Manifest;
  /**
   * Default `replace`. With `apply` each answer is sent as the module wrote
   * it (namespaced and adopted): not merged onto the current object, and
   * `replacing` marks have no effect (the API server removes what the
   * module no longer sets).
   */
  writes?: WriteModel;
  /** The related objects this parent needs (default none). */
  references?: (parent: P) => ObjectRef[];
  /**
   * Every object the parent should own, with the module's fields only: the
   * SDK fills `metadata.namespace`, adopts each one (controller owner
   * reference) and, with `writes: "replace"`, merges it onto the current
   * object of the same kind and name. Throw `invalid(...)` for a spec that
   * breaks a rule.
   */
  desired: (parent: P, ctx: Context) => KubeObject[];
  /** The parent's new `status` object. */
  status: (parent: P, ctx: StatusContext) => Record<string, unknown>;
}

/** The WIT records, as componentize-js passes them. */
export interface WitKindInfo {
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export interface WitManifest {
  name: string;
  version: string;
  parent: WitKindInfo;
  crd: string;
  owned: WitKindInfo[];
  reads: WitKindInfo[];
  fieldManager: string;
  eventReporter: string;
}

export interface WitObjectRef {
  group: string;
  version: string;
  kind: string;
  namespace: string | undefined;
  name: string;
}

/** The `reconciler` export: JSON text in and out, module errors thrown as `ComponentError`. */
export interface Reconciler {
  manifest(): WitManifest;
  references(parent: string): WitObjectRef[];
  desired(parent: string, owned: string[], related: string[]): string[];
  status(parent: string, owned: string[], related: string[], now: string, problem?: string | null): string;
}

/** The `writes` export (`export const writes = writesOf(reconciler)`). */
export interface Writes {
  model(): WriteModel;
}

/** What `desired` answers with the time it was told: the objects and the timer asked for, in milliseconds. */
export interface DesiredAnswer {
  objects: string[];
  againAfterMs: number | undefined;
}

/** The time `desired` is told on a host older than contract 1.3, which tells none. */
export const EPOCH = "1970-01-01T00:00:00Z";

/** The longest timer the contract carries (`u32` milliseconds, 49 days): past any resync. */
const MAX_TIMER_MS = 0xffff_ffff;

/** Seconds as the contract's milliseconds; a `TypeError` for what is no duration. */
function timerMs(seconds: number): number {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) {
    throw new TypeError(`reconcileAfter: seconds must be a finite number >= 0, got ${String(seconds)}`);
  }
  return Math.min(Math.floor(seconds * 1000), MAX_TIMER_MS);
}

/** A context's objects and time, with `reconcileAfter` keeping the soonest timer asked. */
function context(owned: ObjectSet, related: ObjectSet, now: string): { ctx: Context; timer: () => number | undefined } {
  let soonest: number | undefined;
  const reconcileAfter = (seconds: number) => {
    const ms = timerMs(seconds);
    soonest = soonest === undefined ? ms : Math.min(soonest, ms);
  };
  return { ctx: { owned, related, now, reconcileAfter }, timer: () => soonest };
}

/**
 * What a `result`'s error is thrown as: componentize-js (like jco) takes the
 * thrown value's own `payload` as the `err` value.
 */
export class ComponentError extends Error {
  readonly payload: WitError;
  constructor(payload: WitError) {
    super(payload.tag + ": " + (typeof payload.val === "string" ? payload.val : payload.val.map((e) => `${e.path}: ${e.message}`).join("; ")));
    this.name = "ComponentError";
    this.payload = payload;
  }
}

export interface DefineOptions {
  /** The `log` import's `write` (`import { write } from "wasm-operator:controller/log@1.3.0"`). */
  log?: LogWriter;
}

function kindInfo(kind: KindInfo): WitKindInfo {
  return {
    group: kind.group,
    version: kind.version,
    kind: kind.kind,
    plural: kind.plural,
    namespaced: kind.namespaced ?? true,
  };
}

/** The manifest as the WIT record, with the defaults filled in. */
export function witManifest(manifest: Manifest): WitManifest {
  const operator = `${manifest.name}-operator`;
  return {
    name: manifest.name,
    version: manifest.version,
    parent: kindInfo(manifest.parent),
    crd: manifest.crd ?? "",
    owned: (manifest.owned ?? []).map(kindInfo),
    reads: (manifest.reads ?? []).map(kindInfo),
    fieldManager: manifest.fieldManager ?? operator,
    eventReporter: manifest.eventReporter ?? operator,
  };
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return typeof value === "number" || typeof value === "boolean" ? `a ${typeof value}` : `a ${typeof value}`;
}

/** JSON text that must be an object; `malformed` (path "") naming `what` otherwise. */
export function parseObject(text: string, what: string): KubeObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new MalformedError([{ path: "", message: `${what}: not JSON: ${reason}` }]);
  }
  if (!isObject(value)) {
    throw new MalformedError([{ path: "", message: `${what}: expected a JSON object, got ${typeName(value)}` }]);
  }
  if (value.metadata !== undefined && value.metadata !== null && !isObject(value.metadata)) {
    throw new MalformedError([{ path: "metadata", message: `${what}: must be an object, got ${typeName(value.metadata)}` }]);
  }
  return value as KubeObject;
}

/** The parent's namespace and uid, which owned objects need; `malformed` naming the missing one. */
function placement(parent: KubeObject): string {
  const metadata = parent.metadata ?? {};
  const errors: FieldError[] = [];
  for (const field of ["name", "namespace", "uid"] as const) {
    const value = metadata[field];
    if (typeof value !== "string" || value === "") {
      errors.push({ path: `metadata.${field}`, message: "must be a non-empty string" });
    }
  }
  if (errors.length > 0) throw new MalformedError(errors);
  return metadata.namespace as string;
}

function sameObject(a: KubeObject, b: KubeObject, namespace: string): boolean {
  const metaA = a.metadata ?? {};
  const metaB = b.metadata ?? {};
  return (
    a.kind === b.kind &&
    groupOf(String(a.apiVersion ?? "")) === groupOf(String(b.apiVersion ?? "")) &&
    metaA.name === metaB.name &&
    (metaA.namespace ?? namespace) === (metaB.namespace ?? namespace)
  );
}

/**
 * One desired object as the host wants it: in the parent's namespace,
 * adopted, and with `replace` merged onto the current object of the same
 * identity. With `apply` the current object only decides whether the
 * parent may have it (another controller's is refused); the answer carries
 * the parent's owner reference alone, since the API server keeps others'.
 */
export function finishDesired(
  parent: KubeObject,
  owned: ObjectSet,
  obj: unknown,
  index: number,
  writes: WriteModel = "replace",
): KubeObject {
  const namespace = placement(parent);
  if (!isObject(obj)) throw new TypeError(`desired object ${index}: expected an object, got ${typeName(obj)}`);
  const desired = obj as KubeObject;
  for (const field of ["apiVersion", "kind"] as const) {
    if (typeof desired[field] !== "string" || desired[field] === "") {
      throw new TypeError(`desired object ${index}: ${field} must be a non-empty string`);
    }
  }
  const metadata = isObject(desired.metadata) ? desired.metadata : {};
  if (typeof metadata.name !== "string" || metadata.name === "") {
    throw new TypeError(`desired object ${index} (${String(desired.kind)}): metadata.name must be a non-empty string`);
  }
  const placed: KubeObject = { ...desired, metadata: { ...metadata, namespace: metadata.namespace ?? namespace } };
  const current = owned.items.find((o) => sameObject(o, placed, namespace));
  const adopted = adopt(parent, current, placed);
  // Applied: current was only checked (above); the server keeps others' references.
  if (writes === "apply") return prune(adopt(parent, undefined, placed));
  if (current === undefined) return prune(adopted);
  // Fields marked with replacing() are desired's whole, not merged.
  return replacedPointers(obj).reduce((merged, pointer) => replaceAt(merged, adopted, pointer), merge(current, adopted));
}

function objectRef(ref: ObjectRef, index: number): WitObjectRef {
  let group = ref.group ?? "";
  let version = ref.version ?? "";
  if (typeof ref.apiVersion === "string") {
    group = groupOf(ref.apiVersion);
    version = ref.apiVersion.slice(ref.apiVersion.indexOf("/") + 1);
  }
  if (version === "" || !ref.kind || !ref.name) {
    throw new TypeError(`reference ${index}: needs a version (or apiVersion), a kind and a name`);
  }
  return { group, version, kind: ref.kind, namespace: ref.namespace ?? undefined, name: ref.name };
}

/**
 * Runs one call of the contract: a module error becomes the WIT `error`
 * variant (thrown as a `ComponentError`); anything else is logged at level
 * `error` with its stack, then rethrown, so the call traps and the host
 * reports the logged message.
 */
export function guard<T>(call: () => T, write?: LogWriter): T {
  try {
    return call();
  } catch (error) {
    // Already the variant (a nested guard, or thrown by hand): pass it on.
    if (error instanceof ComponentError) throw error;
    const wit = toWitError(error);
    if (wit !== undefined) throw new ComponentError(wit);
    if (write !== undefined) write("error", describeError(error));
    throw error;
  }
}

/** What `defineModule` keeps of each reconciler it made, for the other exports. */
interface Defined {
  writes: WriteModel;
  answer: (parent: string, owned: string[], related: string[], now: string) => DesiredAnswer;
}

const defined = new WeakMap<Reconciler, Defined>();

/**
 * `desired` of a reconciler told the time: with the timer its definition
 * asked for when `defineModule` made it; for any other, its `desired`
 * answer and no timer.
 */
export function answerOf(reconciler: Reconciler, parent: string, owned: string[], related: string[], now: string): DesiredAnswer {
  const answer = defined.get(reconciler)?.answer;
  if (answer !== undefined) return answer(parent, owned, related, now);
  return { objects: reconciler.desired(parent, owned, related), againAfterMs: undefined };
}

/**
 * The `writes` export of a module whose `reconciler` export `defineModule`
 * made: its definition's `writes` (`replace` for any other object). The
 * repository's build script and a scaffolded project's Makefile add it to
 * the component's entry, so a module's own file exports only `reconciler`.
 */
export function writesOf(reconciler: Reconciler): Writes {
  const model = defined.get(reconciler)?.writes ?? "replace";
  return { model: () => model };
}

/** The `reconciler` export for a module: `export const reconciler = defineModule({...}, { log: write })`. */
export function defineModule<P extends KubeObject = KubeObject>(
  definition: ModuleDefinition<P>,
  options: DefineOptions = {},
): Reconciler {
  const write = options.log;
  if (write !== undefined) setLogWriter(write);
  const writes = definition.writes ?? "replace";
  if (writes !== "replace" && writes !== "apply") {
    throw new TypeError(`writes must be "replace" or "apply", not ${JSON.stringify(writes)}`);
  }
  const parse = (texts: readonly string[], what: string) =>
    new ObjectSet(texts.map((text, index) => parseObject(text, `${what} ${index}`)));
  const answer = (parentText: string, ownedTexts: string[], relatedTexts: string[], now: string): DesiredAnswer =>
    guard(() => {
      const parent = parseObject(parentText, "parent") as P;
      placement(parent);
      const owned = parse(ownedTexts, "owned object");
      const { ctx, timer } = context(owned, parse(relatedTexts, "related object"), now);
      const objects = definition.desired(parent, ctx);
      if (!Array.isArray(objects)) throw new TypeError("desired must return an array of objects");
      const texts = objects.map((obj, index) => JSON.stringify(finishDesired(parent, owned, obj, index, writes)));
      return { objects: texts, againAfterMs: timer() };
    }, write);
  const reconciler: Reconciler = {
    manifest: () => witManifest(definition.manifest),
    references: (parentText) =>
      guard(() => {
        const parent = parseObject(parentText, "parent") as P;
        const refs = definition.references === undefined ? [] : definition.references(parent);
        if (!Array.isArray(refs)) throw new TypeError("references must return an array");
        return refs.map(objectRef);
      }, write),
    desired: (parentText, ownedTexts, relatedTexts) => answer(parentText, ownedTexts, relatedTexts, EPOCH).objects,
    status: (parentText, ownedTexts, relatedTexts, now, problem) =>
      guard(() => {
        const parent = parseObject(parentText, "parent") as P;
        const { ctx } = context(parse(ownedTexts, "owned object"), parse(relatedTexts, "related object"), now);
        const status = definition.status(parent, { ...ctx, problem: problem ?? undefined });
        if (!isObject(status)) throw new TypeError(`status must return an object, got ${typeName(status)}`);
        return JSON.stringify(prune(status));
      }, write),
  };
  defined.set(reconciler, { writes, answer });
  return reconciler;
}
