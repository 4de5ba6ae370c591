#!/usr/bin/env node
// A Node.js controller for the logic component (target/memcached.wasm, through
// the JavaScript example's jco bindings): @kubernetes/client-node informers
// are the caches, the component takes every decision (which objects a parent
// owns, what they hold, which go, the status) and this file writes.
//
//   node controllers/node/controller.mjs [--namespace NS] [--concurrency N]
//
// The kinds come from the component's manifest (parent, owned, reads), so
// nothing here names a Memcached field or version. A parent is reconciled
// when it changes, when an object it controls changes (the Deployment's
// status feeds the parent's status) and when a Secret it references changes.
// Every reconcile logs one JSON line: {"msg":"reconciled",namespace,name,writes}.
// WATCH_NAMESPACE is the default for --namespace; KUBECONFIG (or in-cluster) the cluster.
import { KubeConfig, makeInformer } from '@kubernetes/client-node';
import fetch, { Headers } from 'node-fetch';

import { instance } from '../../examples/javascript/src/logic.js';
import { sameIgnoringNulls, mergePatch } from './compare.mjs';

const MAX_ATTEMPTS = 5; // a 409: read again, ask the component again

function parseArgs(argv) {
  const args = { namespace: process.env.WATCH_NAMESPACE || '', concurrency: 4 };
  for (let i = 0; i < argv.length; i++) {
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
      return argv[++i];
    };
    if (argv[i] === '--namespace') args.namespace = value();
    else if (argv[i] === '--concurrency') args.concurrency = Number(value());
    else throw new Error(`unknown argument ${argv[i]} (usage: controller.mjs [--namespace NS] [--concurrency N])`);
  }
  if (!(args.concurrency >= 1)) throw new Error('--concurrency must be a positive number');
  return args;
}

function log(fields) {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...fields })}\n`);
}

/// The REST calls, on the kubeconfig's credentials.
class Api {
  constructor(kc, fieldManager) {
    this.kc = kc;
    this.server = kc.getCurrentCluster().server;
    this.fieldManager = fieldManager;
  }

  /// The TLS agent and auth headers, made once a minute rather than per
  /// request: a new agent per request is a new TLS handshake per request.
  async fetchOptions() {
    if (!this.options || Date.now() - this.optionsAt > 60_000) {
      this.options = await this.kc.applyToFetchOptions({});
      this.optionsAt = Date.now();
    }
    return this.options;
  }

  async request(method, path, body, contentType = 'application/json') {
    const init = await this.fetchOptions();
    const writes = ['POST', 'PUT', 'PATCH'].includes(method);
    const url = `${this.server}${path}${writes ? `?fieldManager=${encodeURIComponent(this.fieldManager)}` : ''}`;
    const headers = new Headers(init.headers);
    headers.set('Accept', 'application/json');
    headers.set('Content-Type', contentType);
    const response = await fetch(url, {
      ...init,
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) {
      const error = new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
      error.status = response.status;
      throw error;
    }
    return text ? JSON.parse(text) : null;
  }
}

/// The path of a kind's collection (namespace '' = every namespace).
function collection(kind, namespace) {
  const base = kind.group ? `/apis/${kind.group}/${kind.version}` : `/api/${kind.version}`;
  return kind.namespaced && namespace ? `${base}/namespaces/${namespace}/${kind.plural}` : `${base}/${kind.plural}`;
}

function controllerUid(object, parentKind) {
  const ref = (object.metadata?.ownerReferences ?? []).find((r) => r.controller && r.kind === parentKind.kind);
  return ref?.uid;
}

const identity = (o) => `${o.kind}/${o.metadata?.name}`;
const reference = (o) => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  namespace: o.metadata.namespace,
  name: o.metadata.name,
  uid: o.metadata.uid,
});

// One instance for many reconciles: under jco a fresh instance costs ~19 ms
// (the Rust host's pooled ones ~45 µs) against ~0.2 ms for a `desired` call.
// The component keeps no state between calls; a reconcile that fails drops
// the instance (a trap leaves it unusable), and it is renewed every
// INSTANCE_USES reconciles so a slow leak cannot build up.
const INSTANCE_USES = 1000;
let sharedInstance = null;
let instanceUses = 0;
async function logicInstance() {
  if (!sharedInstance || instanceUses >= INSTANCE_USES) {
    sharedInstance = await instance();
    instanceUses = 0;
  }
  instanceUses++;
  return sharedInstance;
}

export async function run({ namespace, concurrency }) {
  const { reconciler } = await instance();
  const manifest = reconciler.manifest();
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const api = new Api(kc, manifest.fieldManager);

  const informer = (kind) => {
    const path = collection(kind, namespace);
    const apiVersion = kind.group ? `${kind.group}/${kind.version}` : kind.version;
    // A list's items carry no apiVersion and kind; the component needs them.
    const list = async () => {
      const answer = await api.request('GET', path);
      for (const item of answer.items) Object.assign(item, { apiVersion, kind: kind.kind });
      return answer;
    };
    return makeInformer(kc, path, list);
  };
  const parents = informer(manifest.parent);
  const owned = manifest.owned.map((kind) => ({ kind, informer: informer(kind) }));
  const reads = manifest.reads.map((kind) => ({ kind, informer: informer(kind) }));

  // A work queue: each parent key at most once queued and once running.
  const queued = new Set();
  const running = new Set();
  const again = new Set();
  let active = 0;
  const enqueue = (ns, name) => {
    const key = `${ns}/${name}`;
    if (running.has(key)) again.add(key);
    else queued.add(key);
    pump();
  };
  const pump = () => {
    while (active < concurrency && queued.size > 0) {
      const key = queued.values().next().value;
      queued.delete(key);
      running.add(key);
      active++;
      const [ns, name] = key.split('/');
      reconcileKey(ns, name)
        .catch((error) => {
          sharedInstance = null;
          log({ msg: 'reconcile failed', namespace: ns, name, error: String(error.message ?? error) });
          setTimeout(() => enqueue(ns, name), 2000);
        })
        .finally(() => {
          running.delete(key);
          active--;
          if (again.delete(key)) queued.add(key);
          pump();
        });
    }
  };

  const parentByUid = (ns, uid) => parents.list(ns).find((p) => p.metadata.uid === uid);
  const onOwned = (object) => {
    const uid = controllerUid(object, manifest.parent);
    const parent = uid && parentByUid(object.metadata.namespace, uid);
    if (parent) enqueue(parent.metadata.namespace, parent.metadata.name);
  };
  const onRead = (object) => {
    for (const parent of parents.list(object.metadata.namespace)) {
      const refs = reconciler.references(JSON.stringify(parent));
      const hit = refs.some(
        (r) =>
          r.kind === object.kind &&
          (r.namespace ?? parent.metadata.namespace) === object.metadata.namespace &&
          r.name === object.metadata.name,
      );
      if (hit) enqueue(parent.metadata.namespace, parent.metadata.name);
    }
  };
  for (const verb of ['add', 'update']) parents.on(verb, (p) => enqueue(p.metadata.namespace, p.metadata.name));
  for (const { informer: inf } of owned) for (const verb of ['add', 'update', 'delete']) inf.on(verb, onOwned);
  for (const { informer: inf } of reads) for (const verb of ['add', 'update', 'delete']) inf.on(verb, onRead);
  for (const inf of [parents, ...owned.map((o) => o.informer), ...reads.map((r) => r.informer)]) {
    inf.on('error', (error) => {
      log({ msg: 'watch failed; restarting', error: String(error?.message ?? error) });
      setTimeout(() => inf.start(), 1000);
    });
  }

  // (namespace/name) -> { basedOn: resourceVersion, status }: a child's event can
  // wake us with a cached parent older than our own last status write.
  const writtenStatus = new Map();

  async function event(parent, reason, action, note, type = 'Normal', related = undefined) {
    const { namespace: ns, name, uid } = parent.metadata;
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { generateName: `${name}-`, namespace: ns },
      eventTime: new Date().toISOString().replace('Z', '000Z'),
      reportingController: manifest.eventReporter,
      reportingInstance: `${manifest.eventReporter}-node`,
      action,
      reason,
      note,
      type,
      regarding: { apiVersion: parent.apiVersion, kind: parent.kind, namespace: ns, name, uid },
      related,
    };
    try {
      await api.request('POST', `/apis/events.k8s.io/v1/namespaces/${ns}/events`, body);
    } catch (error) {
      log({ msg: 'event not written', namespace: ns, name, error: String(error.message) });
    }
  }

  async function reconcileKey(ns, name) {
    const parent = parents.get(name, ns);
    if (!parent || parent.metadata.deletionTimestamp) return; // the garbage collector removes the children
    const kindOf = (o) => `${o.apiVersion.split('/').slice(0, -1).join('/')}|${o.kind}`;
    const ownedKinds = new Map(owned.map(({ kind }) => [`${kind.group}|${kind.kind}`, kind]));
    const current = owned.flatMap(({ informer: inf }) =>
      inf.list(ns).filter((o) => controllerUid(o, manifest.parent) === parent.metadata.uid),
    );
    const logic = await logicInstance();
    const parentJson = JSON.stringify(parent);
    const related = [];
    for (const ref of logic.reconciler.references(parentJson)) {
      const source = reads.find((r) => r.kind.kind === ref.kind && r.kind.group === ref.group);
      const found = source?.informer.get(ref.name, ref.namespace ?? ns);
      if (found) related.push(found);
    }
    const relatedJson = related.map((r) => JSON.stringify(r));
    let writes = 0;
    let answer;
    try {
      answer = logic.reconciler.desired(parentJson, current.map((o) => JSON.stringify(o)), relatedJson);
    } catch (error) {
      if (error.name !== 'LogicError') throw error;
      // Bad input changes and deletes nothing; the status reports it.
      if (await writeStatus(logic, parent, current, relatedJson, undefined)) {
        writes++;
        await event(parent, 'InvalidSpec', 'Reconcile', error.message, 'Warning');
      }
      log({ msg: 'reconciled', namespace: ns, name, writes, invalid: error.message });
      return;
    }
    const desired = answer.map((text) => JSON.parse(text));
    const have = new Map(current.map((o) => [identity(o), o]));
    const ownedNow = [];
    let problem;
    for (const want of desired) {
      const kind = ownedKinds.get(kindOf(want));
      if (!kind) throw new Error(`the component answered a ${want.apiVersion} ${want.kind}, not an owned kind`);
      const existing = have.get(identity(want));
      have.delete(identity(want));
      if (problem) {
        if (existing) ownedNow.push(existing);
        continue;
      }
      try {
        const { object, outcome } = await createOrUpdate(logic, parent, kind, existing, want, current, relatedJson);
        ownedNow.push(object);
        if (outcome !== 'unchanged') {
          writes++;
          const verb = outcome === 'created' ? 'Create' : 'Update';
          const reason = outcome === 'created' ? 'Created' : 'Updated';
          await event(parent, reason, verb, `${reason} ${kind.kind} ${object.metadata.name}`, 'Normal', reference(object));
        }
      } catch (error) {
        problem = `${want.kind} ${want.metadata.name}: ${error.message}`;
        if (existing) ownedNow.push(existing);
      }
    }
    // What it controls and the component no longer wants (a feature turned off).
    for (const object of have.values()) {
      if (problem) {
        ownedNow.push(object);
        continue;
      }
      const kind = ownedKinds.get(kindOf(object));
      const body = { preconditions: { uid: object.metadata.uid }, propagationPolicy: 'Background' };
      try {
        await api.request('DELETE', `${collection(kind, ns)}/${object.metadata.name}`, body);
        writes++;
        const note = `Deleted ${kind.kind} ${object.metadata.name}`;
        await event(parent, 'Deleted', 'Delete', note, 'Normal', reference(object));
      } catch (error) {
        if (error.status !== 404 && error.status !== 409) {
          problem = `${object.kind} ${object.metadata.name}: ${error.message}`;
          ownedNow.push(object);
        }
      }
    }
    if (await writeStatus(logic, parent, ownedNow, relatedJson, problem)) writes++;
    log({ msg: 'reconciled', namespace: ns, name, writes, ...(problem ? { problem } : {}) });
    if (problem) throw new Error(problem);
  }

  async function createOrUpdate(logic, parent, kind, existing, want, current, relatedJson) {
    const ns = parent.metadata.namespace;
    const path = collection(kind, ns);
    for (let attempt = 1; ; attempt++) {
      if (existing && sameIgnoringNulls(existing, want)) return { object: existing, outcome: 'unchanged' };
      try {
        if (existing) {
          return { object: await api.request('PUT', `${path}/${want.metadata.name}`, want), outcome: 'updated' };
        }
        return { object: await api.request('POST', path, want), outcome: 'created' };
      } catch (error) {
        if (error.status !== 409 || attempt === MAX_ATTEMPTS) throw error;
        try {
          existing = await api.request('GET', `${path}/${want.metadata.name}`);
        } catch (readError) {
          if (readError.status !== 404) throw readError;
          existing = undefined;
        }
        const others = current.filter((o) => identity(o) !== identity(want));
        const owned = [...others, ...(existing ? [existing] : [])].map((o) => JSON.stringify(o));
        const answer = logic.reconciler.desired(JSON.stringify(parent), owned, relatedJson).map((t) => JSON.parse(t));
        want = answer.find((o) => identity(o) === identity(want));
        if (!want) throw new Error(`the component no longer wants ${identity(existing)}`);
      }
    }
  }

  async function writeStatus(logic, parent, ownedNow, relatedJson, problem) {
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const owned = ownedNow.map((o) => JSON.stringify(o));
    const text = logic.reconciler.status(JSON.stringify(parent), owned, relatedJson, now, problem);
    const next = JSON.parse(text);
    const old = parent.status ?? {};
    if (sameIgnoringNulls(old, next)) return false;
    const key = `${parent.metadata.namespace}/${parent.metadata.name}`;
    const memo = writtenStatus.get(key);
    if (memo && memo.basedOn === parent.metadata.resourceVersion && sameIgnoringNulls(memo.status, next)) return false;
    const path = `${collection(manifest.parent, parent.metadata.namespace)}/${parent.metadata.name}/status`;
    await api.request('PATCH', path, { status: mergePatch(old, next) }, 'application/merge-patch+json');
    writtenStatus.set(key, { basedOn: parent.metadata.resourceVersion, status: next });
    return true;
  }

  // Caches first (the parent's children and Secrets must be known before its
  // first reconcile), the parents last.
  await Promise.all([...owned, ...reads].map(({ informer: inf }) => inf.start()));
  await parents.start();
  const { group, version, kind } = manifest.parent;
  log({ msg: 'started', namespace: namespace || '(all)', parent: `${group}/${version} ${kind}` });
  const stop = async () => {
    await Promise.all([parents, ...owned.map((o) => o.informer), ...reads.map((r) => r.informer)].map((i) => i.stop()));
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    await run(parseArgs(process.argv.slice(2)));
  } catch (error) {
    console.error(`memcached-node-controller: ${error.message}`);
    process.exit(1);
  }
}
