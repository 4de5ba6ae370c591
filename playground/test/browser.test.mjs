// The built playground (dist/) in real Chromium: Debian's /usr/bin/chromium,
// driven by playwright-core (whose own browser downloads are not reachable
// here). Run by `make test-browser` after `make playground`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { chromium } from 'playwright-core';
import YAML from 'yaml';
import { serve } from '../serve.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const dist = path.join(repo, 'playground', 'dist');
const fixturesDir = path.join(repo, 'tests', 'fixtures');
const operator = path.join(repo, 'target', 'release', 'memcached-operator');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

const fixtures = fs.readdirSync(fixturesDir).sort().map((name) => ({
  name,
  cr: fs.readFileSync(path.join(fixturesDir, name, 'memcached.yaml'), 'utf8'),
  json: fs.readFileSync(path.join(fixturesDir, name, 'objects.json'), 'utf8'),
  yaml: fs.readFileSync(path.join(fixturesDir, name, 'objects.yaml'), 'utf8'),
}));

// The same CR, comments and layout aside (samples carry set-up comments).
const sameDocument = (a, b) => isDeepStrictEqual(YAML.parse(a), YAML.parse(b));

let server;
let browser;
let page;
const pageErrors = [];

before(async () => {
  assert.ok(fs.existsSync(path.join(dist, 'index.html')), 'playground/dist is not built: run `make playground`');
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: scripts/install-deps.sh browser installs it`);
  server = await serve(dist, 0);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url() });
  page = await context.newPage();
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.on('console', (msg) => { if (msg.type() === 'error') pageErrors.push(msg.text()); });
  await page.goto(url());
  await page.waitForSelector('body[data-state="ready"]', { timeout: 30_000 });
});

after(async () => {
  await browser?.close();
  server?.close();
});

function url() {
  return `http://127.0.0.1:${server.address().port}/`;
}

/// Waits until the edit has been rendered (the page renders once typing pauses).
async function settled() {
  await page.waitForSelector('body[data-pending="false"]', { timeout: 10_000 });
}

async function setEditor(text) {
  await page.fill('#cr', text);
  await settled();
}

/// Selects [start, end) of the editor's text and types over it, key by key.
async function typeOver(start, end, text) {
  await page.focus('#cr');
  await page.evaluate(([s, e]) => document.getElementById('cr').setSelectionRange(s, e), [start, end]);
  await page.keyboard.type(text);
  await settled();
}

async function problems() {
  return page.$$eval('#problems li', (items) => items.map((li) => ({ ...li.dataset, text: li.textContent })));
}

/// What the page shows: per tab, rendered YAML or a skip reason.
async function panels() {
  return page.$$eval('#panels .panel', (sections) => sections.map((s) => ({
    kind: s.dataset.kind,
    status: s.dataset.status,
    stale: s.dataset.stale === 'true',
    change: s.dataset.change,
    yaml: s.querySelector('pre.yaml')?.textContent ?? null,
    reason: s.querySelector('.skipped-reason')?.textContent ?? null,
  })));
}

/// The panels must show exactly the fixture's objects, each as the YAML
/// the component prints for it, and every other owned kind as skipped.
async function assertShowsFixture(fixture) {
  const shown = await panels();
  const objects = JSON.parse(fixture.json).items;
  const documents = fixture.yaml.split(/^---\n/m);
  assert.equal(documents.length, objects.length, `${fixture.name}: objects.yaml and objects.json disagree`);
  assert.equal(shown.length, 6, 'one tab per owned kind');
  objects.forEach((object, i) => {
    const panel = shown.find((p) => p.kind === object.kind);
    assert.ok(panel, `${fixture.name}: no tab for ${object.kind}`);
    assert.equal(panel.status, 'rendered', `${fixture.name}: ${object.kind} is not rendered`);
    assert.equal(panel.stale, false);
    assert.equal(panel.yaml, documents[i], `${fixture.name}: the ${object.kind} shown differs from the golden fixture`);
  });
  for (const panel of shown.filter((p) => !objects.some((o) => o.kind === p.kind))) {
    assert.equal(panel.status, 'skipped', `${fixture.name}: ${panel.kind} shown but not in the fixture`);
    assert.match(panel.reason, /the guard \S+-enabled answered false/, `${fixture.name}: ${panel.kind} skipped without its guard`);
  }
}

async function download() {
  const [file] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  return fs.readFileSync(await file.path(), 'utf8');
}

function cliRender(text) {
  const run = spawnSync(operator, ['render', '-f', '-'], { input: text, encoding: 'utf8' });
  assert.equal(run.status, 0, `memcached-operator render failed: ${run.stderr}`);
  return run.stdout;
}

test('first load renders the pre-filled CR with no input', async () => {
  const text = await page.inputValue('#cr');
  assert.match(text, /kind: Memcached/);
  const shown = await panels();
  assert.equal(shown.find((p) => p.kind === 'Deployment')?.status, 'rendered');
  assert.match(await page.textContent('#status'), /objects? rendered/);
  const fixture = fixtures.find((f) => sameDocument(f.cr, text));
  assert.ok(fixture, 'the pre-filled CR is one of the golden fixtures');
  await assertShowsFixture(fixture);
});

test('every sample: an invalid value shows its field path inline, the fix renders the golden objects', async () => {
  const samples = await page.$$eval('#sample option', (options) => options.map((o) => o.value));
  assert.equal(samples.length, fs.readdirSync(path.join(repo, 'deploy', 'samples')).length, 'one menu entry per deploy/samples file');
  for (const sample of samples) {
    await page.selectOption('#sample', sample);
    await settled();
    const text = await page.inputValue('#cr');
    assert.equal(text, fs.readFileSync(path.join(repo, 'deploy', 'samples', `${sample}.yaml`), 'utf8'), sample);
    const fixture = fixtures.find((f) => sameDocument(f.cr, text));
    assert.ok(fixture, `${sample}: no golden fixture has this CR`);
    await assertShowsFixture(fixture);

    // metadata.name names every object: an underscore breaks DNS-1035.
    const match = /^ {2}name: (\S+)$/m.exec(text);
    const start = match.index + '  name: '.length;
    const line = text.slice(0, start).split('\n').length;
    await typeOver(start, start + match[1].length, 'Bad_Name');
    const shown = await problems();
    assert.equal(shown.length, 1, `${sample}: ${JSON.stringify(shown)}`);
    assert.equal(shown[0].kind, 'invalid');
    assert.equal(shown[0].path, 'metadata.name');
    assert.equal(Number(shown[0].line), line, `${sample}: the error points at the name's line`);
    assert.match(shown[0].text, /metadata\.name: must be a DNS-1035 label/);
    assert.ok(await page.isVisible(`#gutter .err:text-is("${line}")`), 'the line number is marked');
    assert.equal(await page.isDisabled('#download'), true, 'no download of an invalid CR');
    const stale = await panels();
    assert.ok(stale.every((p) => p.stale) && stale.some((p) => p.yaml), 'the last render stays on screen');

    await typeOver(start, start + 'Bad_Name'.length, match[1]);
    assert.deepEqual(await problems(), []);
    assert.equal(await page.inputValue('#cr'), text);
    await assertShowsFixture(fixture);
    const downloaded = await download();
    assert.equal(downloaded, fixture.yaml, `${sample}: the download differs from objects.yaml`);
    assert.equal(downloaded, cliRender(text), `${sample}: the download differs from memcached-operator render`);
  }
});

test('every golden fixture loaded into the editor renders its golden objects', async () => {
  for (const fixture of fixtures) {
    await setEditor(fixture.cr);
    assert.deepEqual(await problems(), [], fixture.name);
    await assertShowsFixture(fixture);
  }
});

test('a YAML syntax error shows its line and column; the last render stays', async () => {
  await page.selectOption('#sample', 'minimal');
  await settled();
  const text = await page.inputValue('#cr');
  const at = text.indexOf('kind: Memcached') + 'kind: '.length;
  const line = text.slice(0, at).split('\n').length;
  await typeOver(at, at, ': ');
  const [problem, ...rest] = await problems();
  assert.equal(rest.length >= 0, true);
  assert.equal(problem.kind, 'yaml');
  assert.equal(Number(problem.line), line);
  assert.equal(Number(problem.col), 'kind: '.length + 1);
  assert.match(problem.text, new RegExp(`^line ${line}, column ${'kind: '.length + 1} `));
  assert.ok((await panels()).some((p) => p.stale && p.yaml), 'objects still shown');
});

test('bad input never breaks the page', async () => {
  const cases = [
    ['', /editor is empty/],
    ['42\n', /./],
    ['[]\n', /./],
    ['apiVersion: memcached.c5c3.io/v1alpha1\nkind: Memcached\nmetadata: {name: a}\nspec: {replicas: "three"}\n', /spec\.replicas/],
    ['apiVersion: memcached.c5c3.io/v1alpha1\nkind: Memcached\nmetadata: {name: a}\nspec: {replica: 3}\n', /spec\.replica: unknown field/],
    ['a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n', /alias/i],
    ['kind: Memcached\n---\nkind: Memcached\n', /one CR at a time/],
    [`apiVersion: memcached.c5c3.io/v1alpha1\nkind: Memcached\nmetadata: {name: a}\nspec:\n  image: "${'x'.repeat(2_000_000)}"\n`, /./],
  ];
  for (const [text, expected] of cases) {
    await setEditor(text);
    const shown = await problems();
    assert.ok(shown.length > 0, `no problem shown for ${JSON.stringify(text.slice(0, 60))}`);
    assert.match(shown.map((p) => p.text).join('\n'), expected);
    assert.ok((await panels()).length === 6, 'the tabs stay');
  }
  // And it recovers.
  await setEditor(fixtures.find((f) => f.name === 'minimal').cr);
  assert.deepEqual(await problems(), []);
  assert.deepEqual(pageErrors, [], 'no uncaught errors in the page');
});

test('the diff view shows what an update would change; copy copies one object', async () => {
  await page.selectOption('#sample', 'everything');
  await settled();
  const text = await page.inputValue('#cr');
  const at = text.indexOf('maxReplicas: 12') + 'maxReplicas: '.length;
  await typeOver(at, at + 2, '20');
  const shown = await panels();
  assert.equal(shown.find((p) => p.kind === 'HorizontalPodAutoscaler').change, 'changed');
  assert.equal(shown.find((p) => p.kind === 'Service').change, 'none');
  await page.click('#tabs .tab[data-kind="HorizontalPodAutoscaler"]');
  await page.click('.panel:not([hidden]) button.view.diff');
  const diff = await page.textContent('.panel:not([hidden]) div.diff');
  assert.match(diff, /1 line added and 1 removed/);
  assert.match(diff, /- {3}maxReplicas: 12/);
  assert.match(diff, /\+ {3}maxReplicas: 20/);
  await page.screenshot({ path: path.join(repo, 'target', 'playground.png') });

  // Turning the NetworkPolicy off: it would be deleted.
  const off = (await page.inputValue('#cr')).indexOf('networkPolicy:\n      enabled: true') + 'networkPolicy:\n      enabled: '.length;
  await typeOver(off, off + 'true'.length, 'false');
  assert.deepEqual(await problems(), []);
  assert.equal((await panels()).find((p) => p.kind === 'NetworkPolicy').change, 'deleted');
  await page.click('#tabs .tab[data-kind="NetworkPolicy"]');
  assert.match(await page.textContent('.panel:not([hidden]) div.diff'), /an update would delete it/);

  await page.click('.panel:not([hidden]) button.view.yaml');
  await page.click('#tabs .tab[data-kind="Service"]');
  await page.click('.panel:not([hidden]) button.copy');
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.equal(copied, await page.textContent('.panel:not([hidden]) pre.yaml'));
  assert.match(copied, /^apiVersion: v1\nkind: Service\n/);
});
