/**
 * A ready-made `deliver` for the drain worker: replays an entry to one upstream base URL with undici,
 * with the client's headers as it sent them (its `Host` and its `Idempotency-Key` too) and the
 * ticket in `Tollgate-Ticket`. The gateway may pass its own (its routes pick the upstream).
 */
import { isIP } from 'node:net';
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

/** The client's idempotency key, forwarded as it sent it; the ticket stands in for it when the client sent none. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** The header every attempt carries: the ticket, so the upstream can drop a repeat of one deferred request. */
export const TICKET_HEADER = 'tollgate-ticket';

/** A `deliver` that sends each entry to `baseUrl` + its path (a network error or timeout throws: the worker retries). */
export function upstreamDeliverer(baseUrl: string, options: UpstreamDelivererOptions = {}): (entry: DeferredEntry, ticket: string, signal: AbortSignal) => Promise<DeliveryResponse> {
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
  // The client's Host goes upstream, but TLS names the upstream: undici would take the server name
  // (and the name the certificate is checked against) from Host. An address gets no name (RFC 6066).
  const host = origin.hostname.replace(/^\[|\]$/g, '');
  const serverName = origin.protocol === 'https:' && isIP(host) === 0 ? { servername: host } : {};
  return async (entry, ticket, signal) => {
    const headers: string[] = [];
    let clientKey = false;
    for (const [name, value] of entry.headers) {
      const lower = name.toLowerCase();
      // undici sets the length of the body it sends; the ticket header is ours alone.
      if (lower === 'content-length' || lower === TICKET_HEADER) continue;
      if (lower === IDEMPOTENCY_HEADER) clientKey = true;
      headers.push(name, value);
    }
    headers.push(TICKET_HEADER, ticket);
    // The client's own key lets the upstream drop the client's retry; without one, the ticket does.
    if (!clientKey) headers.push(IDEMPOTENCY_HEADER, ticket);
    const response = await request(`${base}${entry.path}`, {
      method: entry.method as Dispatcher.HttpMethod,
      headers,
      body: entry.body.length > 0 ? entry.body : null,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // undici reads `servername` from a request's options (core/request.js), though its types leave it out.
      ...serverName,
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
