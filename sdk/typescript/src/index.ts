/**
 * The wasm-operator SDK for TypeScript: a logic module (contract
 * `wasm-operator:controller@1.3.0`) on plain objects. See README.md.
 */

export {
  ComponentError,
  EPOCH,
  answerOf,
  defineModule,
  finishDesired,
  guard,
  parseObject,
  witManifest,
  writesOf,
  type Context,
  type DefineOptions,
  type DesiredAnswer,
  type KindInfo,
  type Manifest,
  type ModuleDefinition,
  type ObjectRef,
  type Reconciler,
  type StatusContext,
  type WitKindInfo,
  type WitManifest,
  type WitObjectRef,
  type WriteModel,
  type Writes,
} from "./module.js";
export { admission, reachOf, type Admission, type Reach, type WitDesiredState, type WitReachManifest } from "./reach.js";
export {
  InvalidError,
  MalformedError,
  ModuleError,
  Problems,
  UnsupportedError,
  invalid,
  malformed,
  toWitError,
  unsupported,
  type FieldError,
  type WitError,
} from "./errors.js";
export { describeError, log, setLogWriter, type LogLevel, type LogWriter } from "./log.js";
export {
  ObjectSet,
  adopt,
  findCondition,
  groupOf,
  isObject,
  merge,
  observedGeneration,
  ownerReference,
  prune,
  replaceAt,
  replacedPointers,
  replacing,
  required,
  setCondition,
  type Condition,
  type Json,
  type KubeObject,
  type ObjectMeta,
  type OwnerReference,
} from "./objects.js";
