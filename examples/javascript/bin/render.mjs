#!/usr/bin/env node
// `memcached-operator render` in Node.js: every object the operator would own
// for the CRs in a YAML file, computed by the same component.
//   node bin/render.mjs -f cr.yaml [-o yaml|json]     (-f - reads stdin)
import fs from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { LogicError, asJsonList, instance } from '../src/logic.js';

function usage(message) {
  process.stderr.write(`${message}\nusage: render.mjs -f FILE [-o yaml|json]\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let file;
let output = 'yaml';
for (let i = 0; i < args.length; i += 1) {
  if (args[i] === '-f' || args[i] === '--filename') file = args[++i];
  else if (args[i] === '-o' || args[i] === '--output') output = args[++i];
  else usage(`unknown argument ${args[i]}`);
}
if (!file) usage('missing -f FILE');
if (output !== 'yaml' && output !== 'json') usage(`unknown output ${output}`);

let text;
try {
  text = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
} catch (err) {
  process.stderr.write(`error: reading ${file}: ${err.message}\n`);
  process.exit(1);
}

const crs = [];
for (const [index, doc] of parseAllDocuments(text, { prettyErrors: true }).entries()) {
  if (doc.errors.length) {
    process.stderr.write(`${file}: document ${index + 1}: ${doc.errors[0].message}\n`);
    process.exit(1);
  }
  const value = doc.toJS({ maxAliasCount: 1000 });
  if (value !== null && value !== undefined) crs.push(value);
}

const { memcached } = await instance();
const raw = [];
let failed = false;
crs.forEach((cr, index) => {
  const name = cr?.metadata?.name;
  const what = `document ${index + 1} (${cr?.kind ?? 'object'}${name ? ` ${name}` : ''})`;
  try {
    raw.push(...memcached.render(JSON.stringify(cr)));
  } catch (err) {
    if (!(err instanceof LogicError)) throw err;
    failed = true;
    const lines = err.fieldErrors.map((e) => `  ${e.path ? `${e.path}: ` : ''}${e.message}`);
    process.stderr.write(lines.length ? `${file}: ${what} is invalid:\n${lines.join('\n')}\n` : `${file}: ${what}: ${err.message}\n`);
  }
});
if (failed) process.exit(1);

process.stdout.write(output === 'json' ? asJsonList(raw.map((o) => JSON.parse(o))) : memcached.toYaml(`[${raw.join(',')}]`));
