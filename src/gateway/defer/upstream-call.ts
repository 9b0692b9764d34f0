/**
 * A ready-made `deliver` for the drain worker: replays an entry to one upstream base URL with undici,
 * adding the `Idempotency-Key` header. The gateway may pass its own (its routes pick the upstream).
 */
import { request, type Dispatcher } from 'undici';
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkOptions, checkWholeNumber } from '../../options.js';
import type { DeferredEntry, DeliveryResponse } from './types.js';

/** Options of {@link upstreamDeliverer}. */
export interface UpstreamDelivererOptions {
  /** Longest wait for the upstream's headers, then for its body, in ms. Default 30,000. */
  readonly timeoutMs?: number;
  /** An undici dispatcher (an Agent or Pool) to reuse connections; default undici's global one. */
  readonly dispatcher?: Dispatcher;
}

const WHERE = 'upstreamDeliverer';

/** The header every attempt carries: the ticket, so the upstream can drop a repeat. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';

/** A `deliver` that sends each entry to `baseUrl` + its path (a network error or timeout throws: the worker retries). */
export function upstreamDeliverer(baseUrl: string, options: UpstreamDelivererOptions = {}): (entry: DeferredEntry, idempotencyKey: string, signal: AbortSignal) => Promise<DeliveryResponse> {
  checkOptions(WHERE, options, ['timeoutMs', 'dispatcher'], '{ timeoutMs: 10000 }');
  let origin: URL;
  try {
    origin = new URL(baseUrl);
  } catch {
    throw new InvalidOptionError(`${WHERE}: baseUrl must be an http:// or https:// URL, got ${describeValue(baseUrl)}`);
  }
  if (origin.protocol !== 'http:' && origin.protocol !== 'https:') throw new InvalidOptionError(`${WHERE}: baseUrl must be an http:// or https:// URL, got ${describeValue(baseUrl)}`);
  const timeoutMs = checkWholeNumber(options.timeoutMs, { name: `${WHERE}: timeoutMs`, min: 1, max: 3_600_000, fallback: 30_000 });
  const base = origin.href.replace(/\/$/, '');
  return async (entry, idempotencyKey, signal) => {
    const headers: string[] = [];
    for (const [name, value] of entry.headers) {
      // The upstream's own host, and our key rather than any the client sent.
      const lower = name.toLowerCase();
      if (lower !== 'host' && lower !== IDEMPOTENCY_HEADER && lower !== 'content-length') headers.push(name, value);
    }
    headers.push(IDEMPOTENCY_HEADER, idempotencyKey);
    const response = await request(`${base}${entry.path}`, {
      method: entry.method as Dispatcher.HttpMethod,
      headers,
      body: entry.body.length > 0 ? entry.body : null,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
    });
    const body = Buffer.from(await response.body.arrayBuffer());
    const pairs: [string, string][] = [];
    for (const [name, value] of Object.entries(response.headers)) {
      for (const one of Array.isArray(value) ? value : [value]) if (one !== undefined) pairs.push([name, one]);
    }
    return { status: response.statusCode, headers: pairs, body };
  };
}
