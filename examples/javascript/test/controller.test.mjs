import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { parse } from 'yaml';
import { guards, reconcile } from '../src/controller.js';
import { LogicError, asJsonList, instance } from '../src/logic.js';

const repo = new URL('../../../', import.meta.url);
const fixture = (name, file) => fs.readFileSync(new URL(`tests/fixtures/${name}/${file}`, repo), 'utf8');
const cr = (name) => parse(fixture(name, 'memcached.yaml'));

test('the transpiled core module is the very bytes inside target/memcached.wasm', () => {
  const component = fs.readFileSync(new URL('target/memcached.wasm', repo));
  const core = fs.readFileSync(new URL('../gen/memcached.core.wasm', import.meta.url));
  assert.ok(core.length > 1000);
  assert.ok(component.includes(core), 'jco extracted a core module that is not in the component');
});

test('render answers the golden objects, byte for byte', async () => {
  const { memcached } = await instance();
  for (const name of ['minimal', 'everything']) {
    const objects = memcached.render(JSON.stringify(cr(name))).map((o) => JSON.parse(o));
    assert.equal(asJsonList(objects), fixture(name, 'objects.json'), name);
  }
});

test('a fresh CR plans a create per enabled object, in reconcile order, and no delete', async () => {
  const plan = await reconcile(cr('everything'));
  assert.deepEqual(plan.map((p) => [p.kind, p.name, p.action]), [
    ['Deployment', 'full-cache', 'create'],
    ['Service', 'full-cache', 'create'],
    ['PodDisruptionBudget', 'full-cache', 'create'],
    ['HorizontalPodAutoscaler', 'full-cache', 'create'],
    ['ServiceMonitor', 'full-cache', 'create'],
    ['NetworkPolicy', 'full-cache', 'create'],
  ]);
  const owner = plan[0].object.metadata.ownerReferences[0];
  assert.equal(owner.kind, 'Memcached');
  assert.equal(owner.controller, true);
  assert.deepEqual((await reconcile(cr('minimal'))).map((p) => [p.kind, p.action]), [['Deployment', 'create'], ['Service', 'create']]);
});

test('after applying the plan, the same CR writes nothing; turning a feature off deletes exactly its object', async () => {
  const parent = cr('everything');
  const current = (await reconcile(parent)).map((p) => p.object);
  // What the server fills in is kept, so it is no reason to write.
  current[0].metadata.resourceVersion = '42';
  current[0].status = { replicas: 2, readyReplicas: 2 };
  const steady = await reconcile(parent, current);
  assert.deepEqual(steady.map((p) => p.action), Array(6).fill('none'));
  assert.equal(steady[0].object.metadata.resourceVersion, '42');

  parent.spec.autoscaling.enabled = false;
  parent.spec.replicas = 3; // the PDB's minAvailable (2) needs more than the default 1
  const off = await reconcile(parent, current);
  const deletes = off.filter((p) => p.action === 'delete');
  assert.deepEqual(deletes.map((p) => [p.kind, p.name]), [['HorizontalPodAutoscaler', 'full-cache']]);
  assert.equal(deletes[0].object, current[3], 'the delete names the current object');
  assert.equal(off.find((p) => p.kind === 'Deployment').action, 'update', 'without the HPA the Deployment owns replicas again');
  assert.deepEqual(off.filter((p) => p.action === 'none').map((p) => p.kind), ['Service', 'PodDisruptionBudget', 'ServiceMonitor', 'NetworkPolicy']);
});

test('objects are planned per identity: a current object under another name is deleted, the wanted one created', async () => {
  const parent = cr('minimal');
  const [deployment, service] = (await reconcile(parent)).map((p) => p.object);
  const renamed = { ...service, metadata: { ...service.metadata, name: `${service.metadata.name}-old` } };
  const plan = await reconcile(parent, [renamed, deployment]);
  assert.deepEqual(plan.map((p) => [p.kind, p.name, p.action]), [
    ['Deployment', deployment.metadata.name, 'none'],
    ['Service', service.metadata.name, 'create'],
    ['Service', renamed.metadata.name, 'delete'],
  ]);
});

test('the guards answer for the optional kinds', async () => {
  assert.deepEqual(await guards(cr('minimal')), { serviceMonitor: false, networkPolicy: false, pdb: false, hpa: false });
  assert.deepEqual(await guards(cr('everything')), { serviceMonitor: true, networkPolicy: true, pdb: true, hpa: true });
});

test('an invalid CR is an error with field paths, never a plan of deletes', async () => {
  const parent = cr('tls-mtls');
  const current = (await reconcile(parent)).map((p) => p.object);
  delete parent.spec.security.tls.certificateSecretRef;
  parent.spec.replicas = 99;
  await assert.rejects(reconcile(parent, current), (err) => {
    assert.ok(err instanceof LogicError);
    assert.equal(err.tag, 'invalid');
    assert.deepEqual(err.fieldErrors.map((e) => e.path).sort(), ['spec.replicas', 'spec.security.tls.certificateSecretRef.name']);
    return true;
  });
});

test('text that is not a CR is malformed; so is an owned object that is not JSON', async () => {
  const { memcached, reconciler } = await instance();
  assert.throws(() => memcached.render('{"kind": "Memcached"'), (err) => err instanceof LogicError && err.tag === 'malformed');
  assert.throws(() => memcached.validate('[1, 2]'), (err) => err instanceof LogicError && err.tag === 'malformed');
  assert.throws(
    () => reconciler.desired(JSON.stringify(cr('minimal')), ['{"kind": "Deployment"'], []),
    (err) => err instanceof LogicError && err.tag === 'malformed' && /owned object/.test(err.message),
  );
  // The same instance still answers after errors.
  assert.equal(reconciler.desired(JSON.stringify(cr('minimal')), [], []).length, 2);
});

test('the manifest names the parent and the owned and read kinds', async () => {
  const { reconciler } = await instance();
  const manifest = reconciler.manifest();
  assert.equal(manifest.name, 'memcached');
  assert.equal(manifest.parent.kind, 'Memcached');
  assert.deepEqual(manifest.owned.map((k) => k.kind), [
    'Deployment', 'Service', 'PodDisruptionBudget', 'HorizontalPodAutoscaler', 'ServiceMonitor', 'NetworkPolicy',
  ]);
  assert.deepEqual(manifest.reads.map((k) => k.kind), ['Secret']);
  assert.equal(manifest.fieldManager, 'memcached-operator');
  assert.match(manifest.crd, /kind: CustomResourceDefinition/);
});

test('the render command prints the CLI bytes and exits non-zero on an invalid CR', async () => {
  const { spawnSync } = await import('node:child_process');
  const bin = new URL('../bin/render.mjs', import.meta.url).pathname;
  const ok = spawnSync(process.execPath, [bin, '-f', '-'], { input: fixture('sasl', 'memcached.yaml'), encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  assert.equal(ok.stdout, fixture('sasl', 'objects.yaml'));
  const bad = spawnSync(process.execPath, [bin, '-f', '-'], { input: 'apiVersion: memcached.c5c3.io/v1alpha1\nkind: Memcached\nmetadata: {name: Bad_Name}\nspec: {}\n', encoding: 'utf8' });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /metadata\.name: must be a DNS-1035 label/);
});
