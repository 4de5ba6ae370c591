/**
 * Kubernetes objects as plain JSON values, and the helpers every module
 * needs on them: the controller owner reference, adopting, merging onto the
 * server's object, conditions and the observed generation. All are pure
 * functions of their arguments (they never mutate them).
 */

import { InvalidError, MalformedError } from "./errors.js";

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** An object's `metadata` (the fields the SDK reads; any others pass through). */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  [key: string]: unknown;
}

/** A Kubernetes object: `apiVersion`, `kind`, `metadata`, and the rest. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [key: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A `metav1.Condition`. */
export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** A plain object (a JSON object), not an array or null. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The value at `path` (fields separated by dots, such as
 * `spec.credentialsSecret`) of `object`. Missing or null, it or a field
 * above it, is `invalid` at the whole path, "required": the error the Rust
 * SDK's typed parent gives for a missing field.
 *
 * ```ts
 * const secret = required<string>(parent, "spec.credentialsSecret");
 * ```
 */
export function required<T = unknown>(object: unknown, path: string): T {
  let value: unknown = object;
  for (const field of path.split(".")) {
    value = isObject(value) && Object.hasOwn(value, field) ? value[field] : undefined;
    if (value === undefined || value === null) throw new InvalidError([{ path, message: "required" }]);
  }
  return value as T;
}

function metadataOf(obj: KubeObject | undefined): ObjectMeta {
  const metadata = obj?.metadata;
  return isObject(metadata) ? metadata : {};
}

function nonEmptyString(value: unknown): value is string {
  return typeof value === "string" && value !== "";
}

/**
 * The controller owner reference to `parent`: `apiVersion`, `kind`, `name`,
 * `uid`, `controller: true`, `blockOwnerDeletion: true`. A parent lacking
 * one of them is malformed (the error names the field).
 */
export function ownerReference(parent: KubeObject): OwnerReference {
  const metadata = metadataOf(parent);
  const missing = new MalformedError(
    [
      ["apiVersion", parent.apiVersion],
      ["kind", parent.kind],
      ["metadata.name", metadata.name],
      ["metadata.uid", metadata.uid],
    ]
      .filter(([, value]) => !nonEmptyString(value))
      .map(([path]) => ({ path: path as string, message: "must be a non-empty string" })),
  );
  if (missing.errors.length > 0) throw missing;
  return {
    apiVersion: parent.apiVersion as string,
    kind: parent.kind as string,
    name: metadata.name as string,
    uid: metadata.uid as string,
    controller: true,
    blockOwnerDeletion: true,
  };
}

function ownerReferencesOf(obj: KubeObject | undefined): OwnerReference[] {
  const refs = metadataOf(obj).ownerReferences;
  return Array.isArray(refs) ? refs.filter(isObject).map((ref) => ref as unknown as OwnerReference) : [];
}

/**
 * `desired` with the parent's controller owner reference: the object becomes
 * (or stays) the parent's. Refuses (`invalid` at `metadata.ownerReferences`)
 * when `current` or `desired` has a controller reference to another object;
 * an orphan is adopted. Other (non-controller) references of `current` and
 * `desired` are kept, in current's order then desired's new ones; a
 * reference to the parent is replaced by the controller one in its place.
 */
export function adopt<T extends KubeObject>(parent: KubeObject, current: KubeObject | undefined, desired: T): T {
  const ours = ownerReference(parent);
  const refs: OwnerReference[] = [];
  let placed = false;
  for (const ref of [...ownerReferencesOf(current), ...ownerReferencesOf(desired)]) {
    if (ref.controller === true && ref.uid !== ours.uid) {
      throw new InvalidError([
        {
          path: "metadata.ownerReferences",
          message: `owned by another controller (${String(ref.kind)} ${String(ref.name)})`,
        },
      ]);
    }
    if (ref.uid === ours.uid) {
      if (!placed) refs.push(ours);
      placed = true;
      continue;
    }
    const same = refs.findIndex((r) => r.uid === ref.uid);
    if (same >= 0) refs[same] = ref; // desired's version of a reference current had
    else refs.push(ref);
  }
  if (!placed) refs.push(ours);
  return { ...desired, metadata: { ...metadataOf(desired), ownerReferences: refs } };
}

function isNamedList(list: unknown[]): list is Record<string, unknown>[] {
  const names = new Set<string>();
  for (const item of list) {
    if (!isObject(item) || typeof item.name !== "string" || names.has(item.name)) return false;
    names.add(item.name);
  }
  return list.length > 0;
}

/** A deep copy with every `null` and `undefined` object member left out. */
export function prune<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item) => prune(item) as unknown) as T;
  if (isObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) {
      if (member !== null && member !== undefined) out[key] = prune(member);
    }
    return out as T;
  }
  return value;
}

/**
 * `current` with `desired`'s fields applied: objects merged member by member
 * (recursively); a list of objects that each have a distinct `name`
 * (containers, ports, volumes, env) merged item by item by name, in
 * desired's order (items desired does not list are dropped); any other list
 * or scalar replaced; a desired `null` removes the member (`undefined` leaves
 * it). What the server filled in survives, so merging the same desired onto
 * the server's answer gives back the server's answer exactly.
 */
export function merge<T>(current: unknown, desired: T): T {
  if (isObject(current) && isObject(desired)) {
    const out: Record<string, unknown> = { ...current };
    for (const [key, value] of Object.entries(desired)) {
      if (value === undefined) continue;
      if (value === null) delete out[key];
      else out[key] = Object.prototype.hasOwnProperty.call(current, key) ? merge(current[key], value) : prune(value);
    }
    return out as T;
  }
  const items: unknown = desired;
  if (Array.isArray(current) && Array.isArray(items) && isNamedList(items)) {
    const byName = new Map<unknown, unknown>();
    for (const item of current as unknown[]) {
      if (isObject(item) && typeof item.name === "string" && !byName.has(item.name)) byName.set(item.name, item);
    }
    return items.map((item) => (byName.has(item.name) ? merge(byName.get(item.name), item) : prune(item))) as T;
  }
  return prune(desired);
}

const REPLACED = Symbol("wasm-operator.replaced");

/**
 * A copy of `object` (a desired object) marked so the fields at the JSON
 * pointers (`"/data"`, `"/spec/selector"`) are the module's whole: the glue
 * puts desired's value there instead of merging it onto the current
 * object's, so keys the current object has there and the answer lacks are
 * removed instead of kept (absent in desired: the field is removed). The
 * mark is a symbol-keyed, non-enumerable property: `JSON.stringify` and the
 * spread operator leave it out. Calls add up.
 */
export function replacing<T extends object>(object: T, ...pointers: string[]): T {
  for (const pointer of pointers) pointerTokens(pointer);
  const copy = (Array.isArray(object) ? [...object] : { ...object }) as T;
  Object.defineProperty(copy, REPLACED, { value: [...replacedPointers(object), ...pointers], enumerable: false });
  return copy;
}

/** The pointers `replacing` marked on `object` (none for an unmarked one). */
export function replacedPointers(object: unknown): readonly string[] {
  if (typeof object !== "object" || object === null) return [];
  const marked = (object as { [REPLACED]?: unknown })[REPLACED];
  return Array.isArray(marked) ? (marked as string[]) : [];
}

/** A JSON pointer's reference tokens (`/a~1b/c` -> `["a/b", "c"]`); a TypeError unless it starts with `/`. */
function pointerTokens(pointer: string): string[] {
  if (!pointer.startsWith("/")) throw new TypeError(`replacing: "${pointer}" is not a JSON pointer (it starts with "/")`);
  return pointer
    .slice(1)
    .split("/")
    .map((token) => token.replace(/~1/g, "/").replace(/~0/g, "~"));
}

/**
 * `merged` (a copy along the path; its arguments are not changed) whose
 * field at `pointer` is exactly `desired`'s there (pruned), or removed when
 * desired has none. A path through something that is not an object in
 * `merged` is left as it is.
 */
export function replaceAt<T>(merged: T, desired: unknown, pointer: string): T {
  const tokens = pointerTokens(pointer);
  let wanted: unknown = desired;
  for (const token of tokens) wanted = isObject(wanted) ? wanted[token] : undefined;
  const set = (node: unknown, depth: number): unknown => {
    if (!isObject(node)) return node;
    const key = tokens[depth] as string;
    const out: Record<string, unknown> = { ...node };
    if (depth < tokens.length - 1) {
      if (!Object.prototype.hasOwnProperty.call(node, key)) return node;
      out[key] = set(node[key], depth + 1);
    } else if (wanted === undefined || wanted === null) {
      delete out[key];
    } else {
      out[key] = prune(wanted);
    }
    return out;
  };
  return set(merged, 0) as T;
}

/**
 * `conditions` with the condition of `type` set: it replaces the one of that
 * type in place (new ones are appended), keeping its `lastTransitionTime`
 * unless `status` changed (then, or when new, it is `now`).
 */
export function setCondition(
  conditions: readonly Condition[] | undefined | null,
  type: string,
  status: Condition["status"],
  reason: string,
  message: string,
  now: string,
  observedGeneration?: number,
): Condition[] {
  const list: Condition[] = Array.isArray(conditions) ? conditions.filter((c): c is Condition => isObject(c)) : [];
  const index = list.findIndex((c) => c.type === type);
  const old = index >= 0 ? list[index] : undefined;
  const since = old !== undefined && old.status === status && nonEmptyString(old.lastTransitionTime) ? old.lastTransitionTime : now;
  const next: Condition = { type, status, reason, message, lastTransitionTime: since };
  if (observedGeneration !== undefined) next.observedGeneration = observedGeneration;
  if (index < 0) return [...list, next];
  return list.map((c, i) => (i === index ? next : c));
}

/** The condition of `type` in `conditions`, if any. */
export function findCondition(conditions: readonly Condition[] | undefined | null, type: string): Condition | undefined {
  return Array.isArray(conditions) ? (conditions as readonly Condition[]).find((c) => isObject(c) && c.type === type) : undefined;
}

/** The parent's `metadata.generation`, or undefined. */
export function observedGeneration(parent: KubeObject): number | undefined {
  const generation = metadataOf(parent).generation;
  return typeof generation === "number" && Number.isInteger(generation) ? generation : undefined;
}

/** The API group of an `apiVersion` (`apps/v1` -> `apps`, `v1` -> ``). */
export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

/**
 * Objects the host handed over (owned or related), with lookups by kind and
 * name. `kind` is the kind (`ConfigMap`), or `group/Kind` (`apps/Deployment`)
 * where two groups share a kind name.
 */
export class ObjectSet implements Iterable<KubeObject> {
  readonly items: readonly KubeObject[];

  constructor(items: readonly KubeObject[]) {
    this.items = items;
  }

  get length(): number {
    return this.items.length;
  }

  [Symbol.iterator](): Iterator<KubeObject> {
    return this.items[Symbol.iterator]();
  }

  /** Every object of `kind` (see the class), in the host's order. */
  list(kind: string): KubeObject[] {
    const slash = kind.lastIndexOf("/");
    const group = slash < 0 ? undefined : kind.slice(0, slash);
    const name = slash < 0 ? kind : kind.slice(slash + 1);
    return this.items.filter(
      (obj) =>
        obj.kind === name && (group === undefined || groupOf(typeof obj.apiVersion === "string" ? obj.apiVersion : "") === group),
    );
  }

  /** The object of `kind` named `name` (in `namespace`, when given), if any. */
  get(kind: string, name: string, namespace?: string): KubeObject | undefined {
    return this.list(kind).find((obj) => {
      const metadata = metadataOf(obj);
      return metadata.name === name && (namespace === undefined || metadata.namespace === namespace);
    });
  }
}
