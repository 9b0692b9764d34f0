/**
 * The one family of errors Tollgate throws. Every error has a stable `code` (`ERR_TOLLGATE_*`,
 * explained in docs/errors.md) and a message naming the field, the value and the fix.
 * A denial is never an error: it is a normal `Decision` with `allowed: false`.
 */

/** Stable error codes; never renamed once released. */
export type TollgateErrorCode =
  | 'ERR_TOLLGATE_INVALID_POLICY'
  | 'ERR_TOLLGATE_INVALID_COST'
  | 'ERR_TOLLGATE_INVALID_KEY'
  | 'ERR_TOLLGATE_INVALID_TIME'
  | 'ERR_TOLLGATE_INVALID_OPTION'
  | 'ERR_TOLLGATE_STORE_UNAVAILABLE'
  | 'ERR_TOLLGATE_STORE_DATA'
  | 'ERR_TOLLGATE_STORE_ERROR'
  | 'ERR_TOLLGATE_INVALID_RULES'
  | 'ERR_TOLLGATE_INVALID_CHECK'
  | 'ERR_TOLLGATE_INVALID_DEFERRED_REQUEST'
  | 'ERR_TOLLGATE_DEFERRED_BODY_TOO_LARGE'
  | 'ERR_TOLLGATE_INVALID_LOG'
  | 'ERR_TOLLGATE_INVALID_GATEWAY_CONFIG'
  | 'ERR_TOLLGATE_ADMIN_API';

/** Base class of every error Tollgate throws on purpose. */
export class TollgateError extends Error {
  readonly code: TollgateErrorCode;

  constructor(code: TollgateErrorCode, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A policy field is missing, of the wrong type or out of range. */
export class InvalidPolicyError extends TollgateError {
  /** The policy field at fault, e.g. `limit` or `window`. */
  readonly field: string;

  constructor(field: string, message: string) {
    super('ERR_TOLLGATE_INVALID_POLICY', `Invalid rate limit policy: ${message}`);
    this.field = field;
  }
}

/** A request cost is not an integer ≥ 1. */
export class InvalidCostError extends TollgateError {
  constructor(message: string) {
    super('ERR_TOLLGATE_INVALID_COST', message);
  }
}

/** A key is not a string, is empty or is longer than the 1 KiB limit. */
export class InvalidKeyError extends TollgateError {
  constructor(message: string) {
    super('ERR_TOLLGATE_INVALID_KEY', message);
  }
}

/** An explicit `now` is not a finite, non-negative epoch time in milliseconds. */
export class InvalidTimeError extends TollgateError {
  constructor(message: string) {
    super('ERR_TOLLGATE_INVALID_TIME', message);
  }
}

/** A constructor option (of `createLimiter`, `memoryStore`, ...) is unknown or out of range. */
export class InvalidOptionError extends TollgateError {
  constructor(message: string) {
    super('ERR_TOLLGATE_INVALID_OPTION', message);
  }
}

/** The store cannot be reached (not connected yet, connection lost, or timed out). */
export class StoreUnavailableError extends TollgateError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_TOLLGATE_STORE_UNAVAILABLE', message);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/**
 * A key holds something Tollgate did not write: a value of another type (another application's
 * key under the same name) or unreadable state. The decision is refused; nothing is overwritten.
 */
export class StoreDataError extends TollgateError {
  /** The Redis key at fault. */
  readonly key: string;

  constructor(key: string, message: string) {
    super('ERR_TOLLGATE_STORE_DATA', message);
    this.key = key;
  }
}

/** The store answered with an error Tollgate did not expect (a bug, or a server refusing scripts). */
export class StoreError extends TollgateError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_TOLLGATE_STORE_ERROR', message);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/**
 * A rules file is invalid. The message starts with `file:line:col`, names the path in the tree
 * (e.g. `descriptors[0].rate_limit.unit`) and says what to fix. A broken file never replaces
 * working rules.
 */
export class RulesError extends TollgateError {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  /** Path in the YAML tree, e.g. `descriptors[1].descriptors[0].rate_limit.unit`. */
  readonly path: string;

  constructor(file: string, line: number, column: number, path: string, problem: string) {
    super('ERR_TOLLGATE_INVALID_RULES', `${file}:${line}:${column}: ${path === '' ? '' : `${path}: `}${problem}`);
    this.file = file;
    this.line = line;
    this.column = column;
    this.path = path;
  }
}

/**
 * The gateway's configuration file (`tollgate gateway --config FILE`) is unreadable or invalid. The
 * message lists every problem, one per line, each as `file:line:col: path: message` (`errors`).
 */
export class GatewayConfigError extends TollgateError {
  constructor(
    message: string,
    readonly errors: readonly RulesError[],
  ) {
    super('ERR_TOLLGATE_INVALID_GATEWAY_CONFIG', message);
  }
}

/** A `check()` request (domain, descriptors, hits) is malformed. */
export class InvalidCheckError extends TollgateError {
  constructor(message: string) {
    super('ERR_TOLLGATE_INVALID_CHECK', message);
  }
}

/** A request handed to the deferred queue is malformed (method, path or a header); answer it with a 400. */
export class InvalidDeferredRequestError extends TollgateError {
  constructor(message: string) {
    super('ERR_TOLLGATE_INVALID_DEFERRED_REQUEST', message);
  }
}

/** A request's body is larger than the deferred queue keeps (`maxBodyBytes`); answer it with a 413. */
export class DeferredBodyTooLargeError extends TollgateError {
  /** The queue's cap, in bytes. */
  readonly limitBytes: number;

  constructor(limitBytes: number, actualBytes: number) {
    super('ERR_TOLLGATE_DEFERRED_BODY_TOO_LARGE', `The request body is ${actualBytes} bytes; the deferred queue keeps at most ${limitBytes} (raise maxBodyBytes, or send a smaller body)`);
    this.limitBytes = limitBytes;
  }
}

/** An access-log line `tollgate simulate --strict` was given is not in the log's format. */
export class InvalidLogError extends TollgateError {
  readonly file: string;
  readonly line: number;

  constructor(file: string, line: number, problem: string) {
    super('ERR_TOLLGATE_INVALID_LOG', `${file}:${line}: ${problem}`);
    this.file = file;
    this.line = line;
  }
}

/**
 * `tollgate check|rules|keys` could not get an answer from the service: it cannot be reached, took
 * too long, or answered with an error (`status`; the service's own message is kept in the message).
 */
export class AdminApiError extends TollgateError {
  /** The service's HTTP status; absent when no answer came. */
  readonly status: number | undefined;

  constructor(message: string, status?: number) {
    super('ERR_TOLLGATE_ADMIN_API', message);
    this.status = status;
  }
}

/** Renders a user-supplied value for an error message, short and unambiguous. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) {
    return String(value);
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
