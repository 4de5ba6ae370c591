// The component's entry: the module as the `reconciler` export, its log
// lines through the contract's `log` import (which only exists inside the
// component; src/logic.ts and the SDK load under Node without it).
import { write } from "wasm-operator:controller/log@1.3.0";
import { defineModule } from "@wasm-operator/sdk";
import { definition } from "./logic.js";

export const reconciler = defineModule(definition, { log: write });
