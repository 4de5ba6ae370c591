// Builds the playground into dist/: transpiles target/memcached.wasm with jco
// (the same component bytes the operator loads), embeds deploy/samples, and
// bundles the app with esbuild. Prints each file's size, raw and gzipped.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');
const component = path.join(repo, 'target', 'memcached.wasm');
const gen = path.join(here, '.gen');
const dist = path.join(here, 'dist');

// The sample menu's order: one per feature, simplest first; any sample not
// listed here is appended alphabetically, so a new sample shows up by itself.
const ORDER = ['minimal', 'monitoring', 'network-policy', 'tls', 'sasl', 'high-availability', 'autoscaling', 'everything'];

if (!fs.existsSync(component)) {
  console.error(`build: ${path.relative(repo, component)} is missing; run \`make wasm\` first`);
  process.exit(1);
}
fs.rmSync(gen, { recursive: true, force: true });
fs.rmSync(dist, { recursive: true, force: true });
fs.mkdirSync(gen, { recursive: true });
fs.mkdirSync(dist, { recursive: true });

// Async instantiation: the page compiles the core module once and can make
// a fresh instance whenever one traps.
const jcoDir = path.join(here, 'node_modules', '@bytecodealliance', 'jco');
const jcoBin = JSON.parse(fs.readFileSync(path.join(jcoDir, 'package.json'), 'utf8')).bin.jco;
execFileSync(
  process.execPath,
  [path.join(jcoDir, jcoBin), 'transpile', component,
    '--name', 'memcached', '--instantiation', 'async', '--no-nodejs-compat', '--no-typescript', '--quiet',
    '-o', path.join(gen, 'component')],
  { stdio: 'inherit' },
);

const samplesDir = path.join(repo, 'deploy', 'samples');
const names = fs.readdirSync(samplesDir).filter((f) => f.endsWith('.yaml')).map((f) => f.slice(0, -5));
names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
const samples = names.map((name) => {
  const text = fs.readFileSync(path.join(samplesDir, `${name}.yaml`), 'utf8');
  const title = /^#\s*(.*)/.exec(text)?.[1] ?? name;
  return { name, title, text };
});
fs.writeFileSync(path.join(gen, 'samples.js'), `export default ${JSON.stringify(samples, null, 2)};\n`);

await esbuild.build({
  entryPoints: [path.join(here, 'src', 'main.js')],
  bundle: true,
  format: 'esm',
  minify: true,
  target: 'es2022',
  outfile: path.join(dist, 'app.js'),
  legalComments: 'none',
  logLevel: 'warning',
});
for (const file of ['index.html', 'style.css']) {
  fs.copyFileSync(path.join(here, 'src', file), path.join(dist, file));
}
const core = fs.readdirSync(path.join(gen, 'component')).filter((f) => f.endsWith('.wasm'));
for (const file of core) fs.copyFileSync(path.join(gen, 'component', file), path.join(dist, file));

let total = 0;
let totalGz = 0;
for (const file of fs.readdirSync(dist).sort()) {
  const bytes = fs.readFileSync(path.join(dist, file));
  const gz = zlib.gzipSync(bytes, { level: 9 }).length;
  total += bytes.length;
  totalGz += gz;
  console.log(`  dist/${file.padEnd(22)} ${kib(bytes.length).padStart(10)}  ${kib(gz).padStart(10)} gzipped`);
}
console.log(`  ${'total'.padEnd(27)} ${kib(total).padStart(10)}  ${kib(totalGz).padStart(10)} gzipped`);

function rank(name) {
  const i = ORDER.indexOf(name);
  return i < 0 ? ORDER.length : i;
}

function kib(n) {
  return `${(n / 1024).toFixed(1)} KiB`;
}
