// A JavaScript controller's reconcile step, with every decision taken by the
// component: it knows no Memcached field. It reads the manifest, asks
// `desired-all` for every owned kind, and turns the answers into a plan of
// API writes. The I/O (watching, applying) stays with the caller.
import { instance } from './logic.js';

/// Plans one reconcile of `parent` (the CR as the API server returned it).
/// `current` maps an owned kind to its current object (absent: none);
/// `related` are the referenced objects that exist (Secrets).
/// Answers [{ kind, action: 'create' | 'update' | 'delete' | 'none', object? }]
/// in reconcile order. An invalid CR throws a LogicError, so bad input
/// never turns into deletes.
export async function reconcile(parent, current = {}, related = []) {
  const { controller } = await instance(); // fresh per reconcile, like the Rust host
  const owned = controller.manifest().owned;
  const currentTexts = owned.map((k) => (current[k.kind] ? JSON.stringify(current[k.kind]) : undefined));
  const desired = controller.desiredAll(JSON.stringify(parent), currentTexts, related.map((r) => JSON.stringify(r)));
  return owned.map((k, i) => {
    const want = desired[i] === undefined ? undefined : JSON.parse(desired[i]);
    const have = current[k.kind];
    if (want === undefined) return { kind: k.kind, action: have ? 'delete' : 'none' };
    if (!have) return { kind: k.kind, action: 'create', object: want };
    // The builders keep what the server filled in, so an unchanged CR gives
    // back the current object and a steady state writes nothing.
    return { kind: k.kind, action: sameJson(want, have) ? 'none' : 'update', object: want };
  });
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
