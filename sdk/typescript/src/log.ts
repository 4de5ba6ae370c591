/**
 * Lines a module writes to its operator's log, through the contract's
 * optional `log` import (`wasm-operator:controller/log@1.3.0`). The SDK
 * never imports it itself, so it loads under plain Node: the module's entry
 * imports `write` and hands it to `defineModule({...}, { log: write })` (or
 * `setLogWriter`). Until then every line is dropped.
 */

/** The WIT `level` enum. */
export type LogLevel = "error" | "warn" | "info" | "debug";

/** The signature of the `log` import's `write`. */
export type LogWriter = (level: LogLevel, message: string) => void;

let writer: LogWriter | undefined;

/** Routes `log.*` through `write` (the `log` import); undefined drops lines again. */
export function setLogWriter(write: LogWriter | undefined): void {
  writer = write;
}

function emit(level: LogLevel, message: string): void {
  if (writer !== undefined) writer(level, message);
}

/** `log.info("created", name)`: the arguments joined with spaces. */
export const log = {
  error: (...parts: unknown[]): void => emit("error", format(parts)),
  warn: (...parts: unknown[]): void => emit("warn", format(parts)),
  info: (...parts: unknown[]): void => emit("info", format(parts)),
  debug: (...parts: unknown[]): void => emit("debug", format(parts)),
};

function format(parts: unknown[]): string {
  return parts
    .map((part) => {
      if (typeof part === "string") return part;
      if (part instanceof Error) return describeError(part);
      try {
        return JSON.stringify(part) ?? String(part);
      } catch {
        return String(part);
      }
    })
    .join(" ");
}

/**
 * An exception as one text: `Name: message`, then its stack. SpiderMonkey's
 * (componentize-js) `stack` lists only the frames; V8's starts with the
 * message, which is then not repeated.
 */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) {
    try {
      return `uncaught exception: ${typeof error === "string" ? error : JSON.stringify(error)}`;
    } catch {
      return `uncaught exception: ${String(error)}`;
    }
  }
  const head = `${error.name}: ${error.message}`;
  const stack = typeof error.stack === "string" ? error.stack.trimEnd() : "";
  if (stack === "") return head;
  if (stack.startsWith(head)) return stack;
  return `${head}\n${stack}`;
}
