// The same component everywhere: for every golden fixture, the Rust operator
// (`memcached-operator render`), Node.js (jco) and Python (wasmtime-py) print
// byte-identical JSON for every object, equal to the fixture's objects.json,
// and identical YAML. Each runtime runs as its own `render` command, so this
// compares what each one prints, not a shared helper's output.
// Run by `make test-embeddings` (node --test tests/equivalence/).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const fixturesDir = path.join(repo, 'tests', 'fixtures');
const python = process.env.PYTHON ?? path.join(repo, 'target', 'venv', 'bin', 'python');

const RUNTIMES = {
  rust: (file, output) => [path.join(repo, 'target', 'release', 'memcached-operator'), ['render', '-f', file, '-o', output]],
  node: (file, output) => [process.execPath, [path.join(repo, 'examples', 'javascript', 'bin', 'render.mjs'), '-f', file, '-o', output]],
  python: (file, output) => [python, [path.join(repo, 'examples', 'python', 'render.py'), '-f', file, '-o', output]],
};

function run(runtime, file, output) {
  const [command, args] = RUNTIMES[runtime](file, output);
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(result.error, undefined, `${runtime}: could not run ${command}: ${result.error}`);
  assert.equal(result.status, 0, `${runtime} render failed on ${file}:\n${result.stderr}`);
  return result.stdout;
}

/// Each item of a pretty `v1` List, as the exact lines the runtime printed.
function itemBlocks(listText) {
  const blocks = [];
  let current = null;
  for (const line of listText.split('\n')) {
    if (line === '    {') current = [line];
    else if (current) {
      current.push(line);
      if (line === '    }' || line === '    },') {
        blocks.push(current.join('\n').replace(/,$/, ''));
        current = null;
      }
    }
  }
  return blocks;
}

const fixtures = fs.readdirSync(fixturesDir).filter((name) => fs.existsSync(path.join(fixturesDir, name, 'memcached.yaml'))).sort();

test('there are golden fixtures to compare', () => {
  assert.ok(fixtures.length >= 8, `only ${fixtures.length} fixtures in ${fixturesDir}`);
});

for (const name of fixtures) {
  test(`${name}: Rust, Node and Python print the same bytes for every object`, () => {
    const file = path.join(fixturesDir, name, 'memcached.yaml');
    const golden = fs.readFileSync(path.join(fixturesDir, name, 'objects.json'), 'utf8');
    const goldenBlocks = itemBlocks(golden);
    const kinds = JSON.parse(golden).items.map((o) => `${o.kind} ${o.metadata.name}`);
    assert.equal(goldenBlocks.length, kinds.length, 'objects.json is not a pretty List');
    for (const runtime of Object.keys(RUNTIMES)) {
      const printed = run(runtime, file, 'json');
      const blocks = itemBlocks(printed);
      assert.equal(blocks.length, goldenBlocks.length, `${runtime}: ${blocks.length} objects, the fixture has ${goldenBlocks.length}`);
      blocks.forEach((block, i) => assert.equal(block, goldenBlocks[i], `${runtime}: ${kinds[i]} differs from objects.json`));
      assert.equal(printed, golden, `${runtime}: the List around the objects differs from objects.json`);
    }
    const yaml = fs.readFileSync(path.join(fixturesDir, name, 'objects.yaml'), 'utf8');
    for (const runtime of Object.keys(RUNTIMES)) {
      assert.equal(run(runtime, file, 'yaml'), yaml, `${runtime}: YAML differs from objects.yaml`);
    }
  });
}
