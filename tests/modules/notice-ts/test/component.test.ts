// The built component (target/notice-ts.wasm, `make target/notice-ts.wasm`),
// run under Node: jco transpiles it to JavaScript with the `log` import
// mapped to a recorder, so these tests see what componentize-js made of the
// SDK's answers (results, error variants, the trap after an unexpected error).
import { strict as assert } from "node:assert";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const moduleDir = resolve(here, "..");
const wasm = process.env.NOTICE_WASM ?? resolve(moduleDir, "../../../target/notice-ts.wasm");

interface Component {
  reconciler: {
    manifest(): { name: string; owned: { kind: string }[] };
    desired(parent: string, owned: string[], related: string[]): string[];
    status(parent: string, owned: string[], related: string[], now: string, problem?: string): string;
  };
}

let out: string;
let lines: [string, string][];

/** A fresh instance (one that trapped cannot be entered again). */
async function instance(): Promise<Component> {
  const version = Math.random().toString(36).slice(2);
  return (await import(`${pathToFileURL(join(out, "notice.js")).href}?${version}`)) as Component;
}

const parent = (spec: Record<string, unknown>) =>
  JSON.stringify({
    apiVersion: "typescript.example.c5c3.io/v1",
    kind: "Notice",
    metadata: { name: "hello", namespace: "default", uid: "u-1", generation: 2 },
    spec,
  });

before(async () => {
  assert.ok(existsSync(wasm), `${wasm} is missing: make target/notice-ts.wasm builds it`);
  out = mkdtempSync(join(tmpdir(), "notice-ts-"));
  writeFileSync(join(out, "log.js"), "export const lines = [];\nexport function write(level, message) { lines.push([level, message]); }\n");
  execFileSync(
    join(moduleDir, "node_modules/.bin/jco"),
    ["transpile", wasm, "-o", out, "--name", "notice", "--quiet", "--map", "wasm-operator:controller/log@1.3.0=./log.js"],
    { stdio: "inherit" },
  );
  lines = ((await import(pathToFileURL(join(out, "log.js")).href)) as { lines: [string, string][] }).lines;
});

after(() => rmSync(out, { recursive: true, force: true }));

describe("the component", () => {
  it("imports only the log and answers its manifest", async () => {
    const { reconciler } = await instance();
    const manifest = reconciler.manifest();
    assert.equal(manifest.name, "notice-ts");
    assert.deepEqual(manifest.owned.map((k) => k.kind), ["ConfigMap"]);
  });

  it("answers the desired ConfigMap and the status", async () => {
    const { reconciler } = await instance();
    const [cm] = reconciler.desired(parent({ message: "hi" }), [], []).map((t) => JSON.parse(t) as { data: unknown; metadata: { ownerReferences: { uid: string }[] } });
    assert.deepEqual(cm?.data, { message: "hi", level: "info", language: "typescript" });
    assert.equal(cm?.metadata.ownerReferences[0]?.uid, "u-1");
    const status = JSON.parse(reconciler.status(parent({ message: "hi" }), [], [], "2026-01-01T00:00:00Z")) as { observedGeneration: number };
    assert.equal(status.observedGeneration, 2);
  });

  it("answers an invalid spec as the error variant, naming the field", async () => {
    const { reconciler } = await instance();
    assert.throws(
      () => reconciler.desired(parent({ message: "hi", level: "loud" }), [], []),
      (e: unknown) => {
        assert.deepEqual((e as { payload: unknown }).payload, {
          tag: "invalid",
          val: [{ path: "spec.level", message: "must be one of info, warning" }],
        });
        return true;
      },
    );
    assert.throws(() => reconciler.desired("[]", [], []), (e: unknown) => (e as { payload: { tag: string } }).payload.tag === "malformed");
  });

  it("traps on an unexpected error, after logging it with its stack", async () => {
    const { reconciler } = await instance();
    lines.length = 0;
    assert.throws(() => reconciler.desired(parent({ message: "throw" }), [], []), /wasm trap|unreachable/);
    const last = lines.at(-1);
    assert.equal(last?.[0], "error");
    assert.match(last?.[1] ?? "", /^Error: asked to throw by Notice hello\n.*desired@/s);
  });
});
