// The page's DOM-free logic (src/logic.js) in Node, against the component
// build.mjs transpiled into .gen/ (run `node build.mjs` first).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseCr, renderCr, tabsOf } from '../src/logic.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const gen = path.join(here, '..', '.gen', 'component');

async function api() {
  assert.ok(fs.existsSync(path.join(gen, 'memcached.js')), 'playground/.gen is not built: run `node build.mjs`');
  const { instantiate } = await import(path.join(gen, 'memcached.js'));
  const core = await WebAssembly.compile(fs.readFileSync(path.join(gen, 'memcached.core.wasm')));
  return instantiate(() => core, {});
}

const fixture = (name) => parseCr(fs.readFileSync(path.join(repo, 'tests', 'fixtures', name, 'memcached.yaml'), 'utf8')).json;

test('renderCr: the owned kinds come from the reconciler manifest; skipped ones name their guard', async () => {
  const result = renderCr(await api(), fixture('minimal'));
  assert.deepEqual(result.owned, ['Deployment', 'Service', 'PodDisruptionBudget', 'HorizontalPodAutoscaler', 'ServiceMonitor', 'NetworkPolicy']);
  assert.deepEqual(result.objects.map((o) => o.key), ['Deployment', 'Service']);
  assert.deepEqual(result.skipped.map((s) => [s.kind, s.guard, s.answer]), [
    ['PodDisruptionBudget', 'pdb-enabled', false],
    ['HorizontalPodAutoscaler', 'hpa-enabled', false],
    ['ServiceMonitor', 'service-monitor-enabled', false],
    ['NetworkPolicy', 'network-policy-enabled', false],
  ]);
  assert.equal(result.download, fs.readFileSync(path.join(repo, 'tests', 'fixtures', 'minimal', 'objects.yaml'), 'utf8'));
});

test('tabsOf: one tab per object in manifest order, kind/name when a kind repeats, baseline-only objects kept', () => {
  const owned = ['Deployment', 'Service', 'NetworkPolicy'];
  const objects = [
    { kind: 'Service', name: 'b', key: 'Service/b' },
    { kind: 'Deployment', name: 'a', key: 'Deployment' },
    { kind: 'Service', name: 'c', key: 'Service/c' },
  ];
  const baseline = new Map([['Service/old', { kind: 'Service', yaml: 'x' }], ['NetworkPolicy', { kind: 'NetworkPolicy', yaml: 'y' }]]);
  assert.deepEqual(tabsOf(owned, objects, baseline).map((t) => [t.key, t.kind, t.object?.name]), [
    ['Deployment', 'Deployment', 'a'],
    ['Service/b', 'Service', 'b'],
    ['Service/c', 'Service', 'c'],
    ['Service/old', 'Service', undefined],
    ['NetworkPolicy', 'NetworkPolicy', undefined],
  ]);
  assert.deepEqual(tabsOf(owned, []).map((t) => t.key), owned, 'a kind with no object still gets its tab');
});
