/**
 * Small HTTP helpers: a capped JSON/text body reader, JSON replies, and the mapping from errors to
 * status codes (a bad request is a 400 with a clear message, never a 500 or a crash). Every error
 * body is `{ error, code, message }`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RulesError, StoreUnavailableError, TollgateError } from '../../errors.js';

/** Largest request body accepted. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * After a 413 is written, how much more of the body is read and thrown away, and for how long,
 * before the connection is closed (see {@link sendJsonAndLinger}).
 */
export const LINGER_MAX_BYTES = 16 * 1024 * 1024;
export const LINGER_MAX_MS = 2_000;

/** Codes of the errors only the service's HTTP API answers (the library's are in errors.ts). */
export type ServiceErrorCode =
  | 'ERR_TOLLGATE_INVALID_REQUEST'
  | 'ERR_TOLLGATE_INVALID_JSON'
  | 'ERR_TOLLGATE_UNAUTHORIZED'
  | 'ERR_TOLLGATE_ADMIN_DISABLED'
  | 'ERR_TOLLGATE_NOT_FOUND'
  | 'ERR_TOLLGATE_METHOD_NOT_ALLOWED'
  | 'ERR_TOLLGATE_BODY_TOO_LARGE'
  | 'ERR_TOLLGATE_TOO_MANY_CLIENTS'
  | 'ERR_TOLLGATE_AUTH_BACKOFF'
  | 'ERR_TOLLGATE_INTERNAL';

/** The `error` name and the default code of each status an {@link HttpError} can have. */
const STATUS_ERRORS: Readonly<Record<number, { error: string; code: ServiceErrorCode }>> = {
  400: { error: 'bad_request', code: 'ERR_TOLLGATE_INVALID_REQUEST' },
  401: { error: 'unauthorized', code: 'ERR_TOLLGATE_UNAUTHORIZED' },
  403: { error: 'forbidden', code: 'ERR_TOLLGATE_ADMIN_DISABLED' },
  404: { error: 'not_found', code: 'ERR_TOLLGATE_NOT_FOUND' },
  405: { error: 'method_not_allowed', code: 'ERR_TOLLGATE_METHOD_NOT_ALLOWED' },
  413: { error: 'payload_too_large', code: 'ERR_TOLLGATE_BODY_TOO_LARGE' },
  429: { error: 'too_many_requests', code: 'ERR_TOLLGATE_AUTH_BACKOFF' },
  503: { error: 'too_many_clients', code: 'ERR_TOLLGATE_TOO_MANY_CLIENTS' },
};

/** A request the client got wrong: status, code and message. */
export class HttpError extends Error {
  readonly code: ServiceErrorCode;

  constructor(
    readonly status: number,
    message: string,
    code?: ServiceErrorCode,
    /** Headers the answer carries (`Retry-After`). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.code = code ?? STATUS_ERRORS[status]?.code ?? 'ERR_TOLLGATE_INVALID_REQUEST';
  }

  /** The JSON body answering this error. */
  body(): { error: string; code: ServiceErrorCode; message: string } {
    return { error: STATUS_ERRORS[this.status]?.error ?? 'bad_request', code: this.code, message: this.message };
  }
}

/**
 * Reads the whole body as text, refusing more than `limit` bytes with a 413. On a 413 the request
 * is left paused with the rest of its body unread: answer with {@link sendJsonAndLinger}.
 */
export function readBody(request: IncomingMessage, limit = MAX_BODY_BYTES): Promise<string> {
  return new Promise((resolve, reject) => readBodyThen(request, resolve, reject, limit));
}

/**
 * {@link readBody} without a promise: `then(text)` once the body has ended, or `fail(error)` (a 413,
 * the request's error).
 */
export function readBodyThen(request: IncomingMessage, then: (text: string) => void, fail: (error: unknown) => void, limit = MAX_BODY_BYTES): void {
  readBodyFor(request, then, fail, passText, passError, limit);
}

const passText = (_request: IncomingMessage, then: (text: string) => void, _fail: unknown, text: string): void => then(text);
const passError = (_request: IncomingMessage, _then: unknown, fail: (error: unknown) => void, error: unknown): void => fail(error);

/**
 * Reads the whole body as text, then calls `then(request, a, b, text)`, or `fail(request, a, b, error)` for a 413 or
 * the request's error; on a 413 the request is left paused with the rest of its body unread
 * (answer with {@link sendJsonAndLinger}). The hot route (`/json`) reads this way with callbacks
 * made once and the request and response as `a` and `b`: one closure per request, the listener of
 * the body's 'data', 'end' and 'error' alike (issue 32: a closure per event was ~0.3 KB of garbage
 * per request). A body is most often one chunk, kept as it is until a second one comes.
 */
export function readBodyFor<A, B>(
  request: IncomingMessage,
  a: A,
  b: B,
  then: (request: IncomingMessage, a: A, b: B, text: string) => void,
  fail: (request: IncomingMessage, a: A, b: B, error: unknown) => void,
  limit = MAX_BODY_BYTES,
): void {
  const declared = Number(request.headers['content-length'] ?? 0);
  if (declared > limit) return fail(request, a, b, new HttpError(413, `the body is ${declared} bytes; at most ${limit} bytes are accepted`));
  let first: Buffer | undefined;
  let more: Buffer[] | undefined;
  let size = 0;
  // Answered once, as a promise settles once: an error after the end (or after a 413) is not a second answer.
  let settled = false;
  // 'data' passes a chunk, 'end' nothing, 'error' an error.
  const listener = (event?: Buffer | Error): void => {
    if (settled) return;
    if (event === undefined) {
      settled = true;
      then(request, a, b, more !== undefined ? Buffer.concat(more).toString('utf8') : first === undefined ? '' : first.toString('utf8'));
    } else if (event instanceof Error) {
      settled = true;
      fail(request, a, b, event);
    } else if ((size += event.length) > limit) {
      request.off('data', listener);
      request.pause();
      first = more = undefined;
      settled = true;
      fail(request, a, b, new HttpError(413, `the body is over ${limit} bytes (${size} read so far); at most ${limit} bytes are accepted`));
    } else if (first === undefined) first = event;
    else (more ??= [first]).push(event);
  };
  request.on('data', listener);
  request.on('end', listener);
  request.on('error', listener);
}

/**
 * Deepest JSON nesting (arrays and objects) a body may have. envoy's deepest message, a
 * RateLimitRequest, needs 5 (request, descriptors, descriptor, entries, entry); every other body
 * fewer. Past it JSON.parse is refused unread: 1 MiB of `[` took it ~750 ms of the event loop.
 */
export const MAX_JSON_DEPTH = 32;

const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether `text` nests arrays and objects deeper than `max`, by one pass over its characters
 * (brackets inside strings do not count). Malformed text is left to JSON.parse: this only bounds
 * the work it is given.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (char === QUOTE) {
      // Skip the string: to the next quote not escaped.
      for (i++; i < text.length; i++) {
        const inside = text.charCodeAt(i);
        if (inside === BACKSLASH) i++;
        else if (inside === QUOTE) break;
      }
    } else if (char === OPEN_BRACKET || char === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (char === CLOSE_BRACKET || char === CLOSE_BRACE) {
      depth--;
    }
  }
  return false;
}

/** Parses a JSON body (400 on malformed JSON, or JSON nested deeper than {@link MAX_JSON_DEPTH}). */
export function parseJsonBody(text: string): unknown {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new HttpError(400, `the body nests JSON more than ${MAX_JSON_DEPTH} levels deep; at most ${MAX_JSON_DEPTH} levels are accepted (envoy's requests need 5)`, 'ERR_TOLLGATE_INVALID_JSON');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new HttpError(400, `the body is not valid JSON: ${(error as Error).message}`, 'ERR_TOLLGATE_INVALID_JSON');
  }
}

/** Reads and parses a JSON body ({@link parseJsonBody}). */
export async function readJson(request: IncomingMessage): Promise<unknown> {
  return parseJsonBody(await readBody(request));
}

/**
 * {@link readJson} without a promise, for a route whose callbacks are made once (see
 * {@link readBodyFor}): `route.then(request, response, body)`, or `route.fail(request, response,
 * error)` for a bad body, a 413, the request's error, or whatever `then` throws.
 */
export function readJsonThen(request: IncomingMessage, response: ServerResponse, route: JsonRoute): void {
  readBodyFor(request, response, route, parseThen, failWith);
}

/** A route that reads a JSON body: what it does with the body, and how it answers an error; made once per route. */
export interface JsonRoute {
  readonly then: (request: IncomingMessage, response: ServerResponse, body: unknown) => void;
  readonly fail: (request: IncomingMessage, response: ServerResponse, error: unknown) => void;
}

function parseThen(request: IncomingMessage, response: ServerResponse, route: JsonRoute, text: string): void {
  try {
    route.then(request, response, parseJsonBody(text));
  } catch (error) {
    route.fail(request, response, error);
  }
}

function failWith(request: IncomingMessage, response: ServerResponse, route: JsonRoute, error: unknown): void {
  route.fail(request, response, error);
}

const JSON_TYPE = 'application/json; charset=utf-8';

export function sendJson(response: ServerResponse, status: number, body: unknown, headers?: Readonly<Record<string, string>>): void {
  sendJsonText(response, status, JSON.stringify(body), headers);
}

/**
 * Answers JSON text made already: the headers as node:http's flat [name, value, ...] list (no
 * object to spread and walk), `headers` after the content type and length as {@link sendJson}
 * sends them; the body is ended with the headers in one write.
 */
export function sendJsonText(response: ServerResponse, status: number, text: string, headers?: Readonly<Record<string, string>>): void {
  const list = ['content-type', JSON_TYPE, 'content-length', String(Buffer.byteLength(text))];
  if (headers !== undefined) for (const name in headers) list.push(name, headers[name]!);
  response.writeHead(status, list);
  endThisTurn(response, text);
}

/** Answers whose bytes go out at the end of this event-loop turn: [response, body, response, body, ...]. */
const endingThisTurn: (ServerResponse | string)[] = [];

/**
 * Ends `response` with `text` once the event loop has read every socket that was ready this turn
 * (setImmediate runs right after the poll phase). Every answer is one socket write that wakes the
 * client; written back to back, the wake-ups of a busy turn overlap instead of each one paying for
 * itself between two requests' JavaScript. Measured on /json at full load: +35–45% requests/s for
 * a few µs of added latency (bench/service.js, BENCHMARKS.md). A lone request waits for nothing
 * but the rest of its own turn.
 */
function endThisTurn(response: ServerResponse, text: string): void {
  if (endingThisTurn.push(response, text) === 2) setImmediate(endAll);
}

function endAll(): void {
  // Taken out first: an answer ended here can make more answers (a pipelined request) for the next turn.
  const ending = endingThisTurn.splice(0);
  for (let i = 0; i < ending.length; i += 2) {
    const response = ending[i] as ServerResponse;
    if (!response.destroyed) response.end(ending[i + 1] as string);
  }
}

/**
 * Answers while the request body is still arriving (a 413), the way nginx's lingering close does:
 * the answer (with `Connection: close`) is written at once, then the rest of the body is read and
 * thrown away until it ends, or for at most {@link LINGER_MAX_BYTES} / {@link LINGER_MAX_MS}, and
 * only then is the connection closed. Closing with unread bytes makes the kernel reset the
 * connection, and a reset can destroy the answer before the client reads it (RFC 9112 §9.6).
 */
export function sendJsonAndLinger(request: IncomingMessage, response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text), connection: 'close' });
  response.write(text);
  if (request.complete) {
    response.end();
    return;
  }
  let discarded = 0;
  const done = (): void => {
    clearTimeout(timer);
    request.off('data', discard).off('end', done).off('close', done).off('error', done);
    // The body's end was read: a clean close. Otherwise Node closes the socket with bytes unread.
    if (!response.writableEnded) response.end();
  };
  const discard = (chunk: Buffer): void => {
    discarded += chunk.length;
    if (discarded > LINGER_MAX_BYTES) done();
  };
  const timer = setTimeout(done, LINGER_MAX_MS);
  request.on('data', discard).once('end', done).once('close', done).once('error', done);
  request.resume();
}

/** Status and body for an error thrown by a handler. */
export function errorReply(error: unknown): { status: number; body: Record<string, unknown> } {
  if (error instanceof HttpError) return { status: error.status, body: error.body() };
  if (error instanceof RulesError) {
    return { status: 400, body: { error: 'invalid_rules', code: error.code, message: error.message } };
  }
  if (error instanceof StoreUnavailableError) {
    return { status: 503, body: { error: 'store_unavailable', code: error.code, message: error.message } };
  }
  if (error instanceof TollgateError && error.code.startsWith('ERR_TOLLGATE_INVALID')) {
    return { status: 400, body: { error: 'bad_request', code: error.code, message: error.message } };
  }
  if (error instanceof TollgateError) {
    return { status: 500, body: { error: 'store_error', code: error.code, message: error.message } };
  }
  return { status: 500, body: { error: 'internal', code: 'ERR_TOLLGATE_INTERNAL', message: 'internal error; the service log has the details' } };
}
