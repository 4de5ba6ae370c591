// The component's entry: the Queue module as the `reconciler` export (the
// build adds `writes`, the model the definition declares).
import { defineModule } from "@wasm-operator/sdk";
import { queue } from "./logic.js";

export const reconciler = defineModule(queue);
