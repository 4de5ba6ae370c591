/**
 * The answers that are not a result: each becomes the WIT `error` variant
 * (`malformed`, `invalid`, `unsupported`) when thrown from `references`,
 * `desired` or `status`. Anything else thrown is a bug in the module: the
 * SDK logs it (with its stack) and the call traps.
 */

/** One problem, located by a field path such as `spec.replicas`. */
export interface FieldError {
  path: string;
  message: string;
}

function describe(errors: readonly FieldError[]): string {
  return errors.map((e) => (e.path ? `${e.path}: ${e.message}` : e.message)).join("; ");
}

/** Base of the three module errors. */
export abstract class ModuleError extends Error {}

/** The object parsed but breaks the module's rules; every broken rule listed. */
export class InvalidError extends ModuleError {
  readonly errors: FieldError[];
  constructor(errors: readonly FieldError[]) {
    super(describe(errors));
    this.name = "InvalidError";
    this.errors = [...errors];
  }
}

/** The text is not JSON, or not the expected shape. */
export class MalformedError extends ModuleError {
  readonly errors: FieldError[];
  constructor(errors: readonly FieldError[]) {
    super(describe(errors));
    this.name = "MalformedError";
    this.errors = [...errors];
  }
}

/** The host asked for something this module does not do. */
export class UnsupportedError extends ModuleError {
  constructor(message: string) {
    super(message);
    this.name = "UnsupportedError";
  }
}

/** `throw invalid("spec.size", "must be positive")`. */
export function invalid(path: string, message: string): InvalidError {
  return new InvalidError([{ path, message }]);
}

/** `throw malformed("spec", "must be an object")`. */
export function malformed(path: string, message: string): MalformedError {
  return new MalformedError([{ path, message }]);
}

/** `throw unsupported("references of kind X")`. */
export function unsupported(message: string): UnsupportedError {
  return new UnsupportedError(message);
}

/**
 * Collects field errors while validating, then throws them all at once:
 *
 * ```ts
 * const problems = new Problems();
 * if (typeof spec.size !== "number") problems.add("spec.size", "must be a number");
 * problems.throwIfAny(); // InvalidError listing every one
 * ```
 */
export class Problems {
  readonly errors: FieldError[] = [];
  add(path: string, message: string): this {
    this.errors.push({ path, message });
    return this;
  }
  get empty(): boolean {
    return this.errors.length === 0;
  }
  /** The problems as one line: `spec.a: must be ...; spec.b: must be ...`. */
  toString(): string {
    return describe(this.errors);
  }
  throwIfAny(): void {
    if (this.errors.length > 0) throw new InvalidError(this.errors);
  }
}

/** The WIT `error` variant, as componentize-js lowers it. */
export type WitError =
  | { tag: "malformed"; val: FieldError[] }
  | { tag: "invalid"; val: FieldError[] }
  | { tag: "unsupported"; val: string };

/** The WIT variant for a module error; undefined for anything else. */
export function toWitError(error: unknown): WitError | undefined {
  const copy = (errors: FieldError[]) => errors.map((e) => ({ path: String(e.path), message: String(e.message) }));
  if (error instanceof InvalidError) return { tag: "invalid", val: copy(error.errors) };
  if (error instanceof MalformedError) return { tag: "malformed", val: copy(error.errors) };
  if (error instanceof UnsupportedError) return { tag: "unsupported", val: error.message };
  return undefined;
}
