// The Memcached logic component in Node.js, through jco's transpiled
// bindings (`npm run build` writes them to gen/ from target/memcached.wasm).
// The core module is compiled once; each `instance()` is a fresh, isolated
// instance, as the Rust operator makes one per reconcile.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { instantiate } from '../gen/memcached.js';

const CORE = fileURLToPath(new URL('../gen/memcached.core.wasm', import.meta.url));

/// A failure the component answered with: the WIT `error` variant.
/// `tag` is malformed, invalid or unsupported; `fieldErrors` are
/// { path, message } (empty for unsupported).
export class LogicError extends Error {
  constructor(tag, fieldErrors, detail) {
    const text = fieldErrors.length ? fieldErrors.map((e) => `${e.path || '(document)'}: ${e.message}`).join('; ') : detail;
    super(`${tag}: ${text}`);
    this.name = 'LogicError';
    this.tag = tag;
    this.fieldErrors = fieldErrors;
  }
}

let compiled = null;

/// A fresh instance: { memcached, reconciler } with every WIT function, and
/// failures thrown as LogicError. `memcached` is the typed
/// `c5c3:memcached/memcached@0.2.0` interface, `reconciler` the generic
/// `wasm-operator:controller/reconciler@1.2.0` contract a host drives.
export async function instance() {
  compiled ??= WebAssembly.compile(fs.readFileSync(CORE));
  const core = await compiled;
  const exports = await instantiate(() => core, {});
  return { memcached: wrap(exports.memcached), reconciler: wrap(exports.reconciler) };
}

function wrap(iface) {
  const wrapped = {};
  for (const [name, fn] of Object.entries(iface)) {
    if (typeof fn !== 'function') continue;
    wrapped[name] = (...args) => {
      try {
        return fn(...args);
      } catch (err) {
        throw asLogicError(err);
      }
    };
  }
  return wrapped;
}

/// jco throws a result's error as a ComponentError with `payload` = the
/// variant ({ tag, val }); anything else (a trap) passes through.
function asLogicError(err) {
  const payload = err?.payload;
  if (!payload || typeof payload.tag !== 'string') return err;
  if (payload.tag === 'unsupported') return new LogicError(payload.tag, [], String(payload.val));
  return new LogicError(payload.tag, payload.val.map(({ path, message }) => ({ path, message })), '');
}

/// What `memcached-operator render -o json` prints: a pretty `v1` List
/// (serde_json's pretty format is JSON.stringify's with two spaces).
export function asJsonList(objects) {
  return `${JSON.stringify({ apiVersion: 'v1', items: objects, kind: 'List' }, null, 2)}\n`;
}
