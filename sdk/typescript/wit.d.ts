// Typings for the contract's `log` import, which componentize-js links when a
// module's source imports it. Reference it from a module's tsconfig
// ("types": ["@wasm-operator/sdk/wit"]) or with
// /// <reference types="@wasm-operator/sdk/wit" />.
declare module "wasm-operator:controller/log@1.3.0" {
  export type Level = "error" | "warn" | "info" | "debug";
  export function write(level: Level, message: string): void;
}
