// A JavaScript controller's reconcile step, with every decision taken by the
// component: it knows no Memcached field. It hands the reconciler's
// `desired` the parent, the owned objects it controls now and the related
// objects, and turns the answer (a list of objects) into a plan of API
// writes. The I/O (watching, applying, deleting) stays with the caller.
import { instance } from './logic.js';

/// Plans one reconcile of `parent` (the CR as the API server returned it).
/// `current` are the owned objects the parent controls now, as the API
/// server returned them (any order); `related` the referenced objects that
/// exist (Secrets). Answers [{ kind, name, action, object }], per object
/// identity (kind and name; every owned object is in the parent's
/// namespace): the desired objects in reconcile order, each 'create',
/// 'update' or 'none' (object: the desired one), then a 'delete' for every
/// current object the answer leaves out (object: the current one). An
/// invalid CR throws a LogicError, so bad input never turns into deletes.
export async function reconcile(parent, current = [], related = []) {
  const { reconciler } = await instance(); // fresh per reconcile, like the Rust host
  const answer = reconciler.desired(
    JSON.stringify(parent),
    current.map((o) => JSON.stringify(o)),
    related.map((r) => JSON.stringify(r)),
  );
  const have = new Map(current.map((o) => [identity(o), o]));
  const plan = answer.map((text) => {
    const want = JSON.parse(text);
    const id = identity(want);
    const now = have.get(id);
    have.delete(id);
    const action = now === undefined ? 'create' : sameJson(want, now) ? 'none' : 'update';
    // The builders keep what the server filled in, so an unchanged CR gives
    // back the current object and a steady state writes nothing.
    return { kind: want.kind, name: want.metadata?.name, action, object: want };
  });
  // What the parent controls but no longer wants (a feature turned off).
  for (const object of have.values()) {
    plan.push({ kind: object.kind, name: object.metadata?.name, action: 'delete', object });
  }
  return plan;
}

/// What identifies an owned object within its parent's namespace.
function identity(object) {
  return `${object?.kind}/${object?.metadata?.name}`;
}

/// The typed interface's guards: which optional objects must exist.
export async function guards(parent) {
  const { memcached } = await instance();
  const cr = JSON.stringify(parent);
  return {
    serviceMonitor: memcached.serviceMonitorEnabled(cr),
    networkPolicy: memcached.networkPolicyEnabled(cr),
    pdb: memcached.pdbEnabled(cr),
    hpa: memcached.hpaEnabled(cr),
  };
}

function sameJson(a, b) {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeys(value[k])]));
  }
  return value;
}
