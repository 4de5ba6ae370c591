// The component's entry: the Countdown module as the `reconciler` export,
// its log lines through the contract's `log` import (which only exists inside
// the component; src/logic.ts and the SDK load under Node without it). The
// build adds `writes`, `reach` (desired told the time, with its timer) and
// `admission`.
import { write } from "wasm-operator:controller/log@1.3.0";
import { defineModule } from "@wasm-operator/sdk";
import { countdown } from "./logic.js";

export const reconciler = defineModule(countdown, { log: write });
