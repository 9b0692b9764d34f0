/**
 * Checking a request before it is stored, and the headers the queue never keeps: hop-by-hop
 * headers (RFC 9110 §7.6.1) belong to one connection, not to a replay minutes later.
 */
import { DeferredBodyTooLargeError, InvalidDeferredRequestError, describeValue } from '../../errors.js';
import type { DeferredRequest, DeferredRequestInput, HeaderPair, HeadersInput } from './types.js';

const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade',
]);
/** RFC 9110 token: methods and header names. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Visible ASCII, no spaces: what a request target may hold. */
const REQUEST_TARGET = /^\/[\x21-\x7e]*$/;
/** A header value must not end the header early: no CR, LF or NUL. */
const UNSAFE_VALUE = /[\r\n\0]/;
const MAX_PATH_LENGTH = 8_192;
const MAX_HEADERS = 256;
const MAX_HEADER_BYTES = 64 * 1024;

/** Header pairs from pairs or a record, in order, with multi-valued fields as one pair per value. */
export function headerPairs(headers: HeadersInput | undefined, where: string): HeaderPair[] {
  if (headers === undefined) return [];
  if (typeof headers !== 'object' || headers === null) throw new InvalidDeferredRequestError(`${where} must be an array of [name, value] pairs or an object, got ${describeValue(headers)}`);
  const pairs: HeaderPair[] = [];
  const add = (name: unknown, value: unknown): void => {
    if (typeof name !== 'string' || !TOKEN.test(name)) throw new InvalidDeferredRequestError(`${where}: ${describeValue(name)} is not a valid header name`);
    if (typeof value !== 'string' || UNSAFE_VALUE.test(value)) throw new InvalidDeferredRequestError(`${where}: the value of ${name} must be a string without CR, LF or NUL, got ${describeValue(value)}`);
    pairs.push([name, value]);
  };
  if (Array.isArray(headers)) {
    for (const pair of headers as readonly unknown[]) {
      if (!Array.isArray(pair) || pair.length !== 2) throw new InvalidDeferredRequestError(`${where}: each header must be a [name, value] pair, got ${describeValue(pair)}`);
      add(pair[0], pair[1]);
    }
  } else {
    for (const [name, value] of Object.entries(headers)) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) add(name, one);
    }
  }
  return pairs;
}

/** `pairs` without hop-by-hop headers and without those the `Connection` header names. */
export function endToEndHeaders(pairs: readonly HeaderPair[]): HeaderPair[] {
  const dropped = new Set(HOP_BY_HOP);
  for (const [name, value] of pairs) {
    if (name.toLowerCase() !== 'connection') continue;
    for (const named of value.split(',')) dropped.add(named.trim().toLowerCase());
  }
  return pairs.filter(([name]) => !dropped.has(name.toLowerCase()));
}

/** The bytes of a body given as a Buffer, a Uint8Array or a string (UTF-8). */
export function bodyBytes(body: Buffer | Uint8Array | string | undefined, where: string): Buffer {
  if (body === undefined) return Buffer.alloc(0);
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (body instanceof Uint8Array) return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw new InvalidDeferredRequestError(`${where} must be a Buffer, a Uint8Array or a string, got ${describeValue(body)}`);
}

/** Validates `input` and returns the request the queue stores, or throws a typed error (400- or 413-style). */
export function storableRequest(input: DeferredRequestInput, maxBodyBytes: number): DeferredRequest {
  if (typeof input !== 'object' || input === null) throw new InvalidDeferredRequestError(`enqueue: the request must be an object like { method, path, headers, body }, got ${describeValue(input)}`);
  const { method, path } = input;
  if (typeof method !== 'string' || method.length > 32 || !TOKEN.test(method)) throw new InvalidDeferredRequestError(`enqueue: method must be an HTTP method such as "POST", got ${describeValue(method)}`);
  if (typeof path !== 'string' || path.length > MAX_PATH_LENGTH || !REQUEST_TARGET.test(path)) {
    throw new InvalidDeferredRequestError(`enqueue: path must start with "/" and hold at most ${MAX_PATH_LENGTH} visible ASCII characters, got ${describeValue(path)}`);
  }
  const headers = endToEndHeaders(headerPairs(input.headers, 'enqueue: headers'));
  const headerBytes = headers.reduce((sum, [name, value]) => sum + name.length + Buffer.byteLength(value), 0);
  if (headers.length > MAX_HEADERS || headerBytes > MAX_HEADER_BYTES) {
    throw new InvalidDeferredRequestError(`enqueue: at most ${MAX_HEADERS} headers of ${MAX_HEADER_BYTES} bytes in all are kept, got ${headers.length} of ${headerBytes} bytes`);
  }
  const body = bodyBytes(input.body, 'enqueue: body');
  if (body.length > maxBodyBytes) throw new DeferredBodyTooLargeError(maxBodyBytes, body.length);
  return { method, path, headers, body };
}
