/**
 * Small HTTP helpers: a capped JSON/text body reader, JSON replies, and the mapping from errors to
 * status codes (a bad request is a 400 with a clear message, never a 500 or a crash).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RulesError, StoreUnavailableError, TollgateError } from '../errors.js';

/** Largest request body accepted. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** A request the client got wrong: status and message. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

/** Reads the whole body as text, refusing more than `limit` bytes with a 413. */
export function readBody(request: IncomingMessage, limit = MAX_BODY_BYTES): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers['content-length'] ?? 0);
    if (declared > limit) {
      reject(new HttpError(413, `the body is ${declared} bytes; at most ${limit} are accepted`));
      request.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new HttpError(413, `the body is over ${limit} bytes`));
        request.destroy();
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

/** Reads and parses a JSON body (400 on malformed JSON). */
export async function readJson(request: IncomingMessage): Promise<unknown> {
  const text = await readBody(request);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new HttpError(400, `the body is not valid JSON: ${(error as Error).message}`);
  }
}

export function sendJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  response.end(text);
}

const STATUS_NAMES: Readonly<Record<number, string>> = { 401: 'unauthorized', 403: 'forbidden', 413: 'payload_too_large' };

/** Status and body for an error thrown by a handler. */
export function errorReply(error: unknown): { status: number; body: Record<string, unknown> } {
  if (error instanceof HttpError) {
    const name = STATUS_NAMES[error.status] ?? 'bad_request';
    return { status: error.status, body: { error: name, message: error.message, ...(error.details !== undefined ? { details: error.details } : {}) } };
  }
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
  return { status: 500, body: { error: 'internal', message: 'internal error' } };
}
