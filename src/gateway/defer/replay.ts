/**
 * A throttled request as the deferred queue keeps it, and as it comes back: the client's own
 * headers plus ours naming the peer it came from and whether it came over TLS, so that on replay
 * `remote_address`, `:scheme` (and every other action) see the request as it was, and the upstream
 * gets the `X-Forwarded-*` headers a live forward would have carried.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { DeferredEntry, HeaderPair } from './index.js';
import type { RequestFacts } from '../request.js';

/** The stored request's header naming the client's peer address; never sent upstream, and a client's own is dropped. */
export const PEER_HEADER = 'x-tollgate-client-peer';
/** The stored request's header saying it came over TLS (`https`); never sent upstream, and a client's own is dropped. */
export const SCHEME_HEADER = 'x-tollgate-client-scheme';
/** Our own headers in a stored request. */
const OURS = new Set([PEER_HEADER, SCHEME_HEADER]);

/** Headers the gateway writes itself when it sends a request upstream. */
const FORWARDED = new Set(['x-forwarded-proto', 'x-forwarded-host']);

/** The client's headers as sent, minus any `PEER_HEADER` of its own, plus ours (hop-by-hop ones the queue drops). */
export function storedHeaders(req: IncomingMessage): HeaderPair[] {
  const raw = req.rawHeaders;
  const pairs: HeaderPair[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (!OURS.has(lower) && lower !== 'expect') pairs.push([raw[i]!, raw[i + 1]!]);
  }
  if (req.socket.remoteAddress !== undefined) pairs.push([PEER_HEADER, req.socket.remoteAddress]);
  if ((req.socket as { encrypted?: boolean }).encrypted === true) pairs.push([SCHEME_HEADER, 'https']);
  return pairs;
}

/** The stored request as the routes and actions read a live one (node's header record, joined as node joins them). */
export function replayFacts(entry: DeferredEntry): RequestFacts {
  const headers: IncomingHttpHeaders = {};
  let peer: string | undefined;
  let encrypted = false;
  for (const [name, value] of entry.headers) {
    const lower = name.toLowerCase();
    if (lower === PEER_HEADER) peer = value;
    else if (lower === SCHEME_HEADER) encrypted = value === 'https';
    else if (lower === 'set-cookie') (headers['set-cookie'] ??= []).push(value);
    else headers[lower] = headers[lower] === undefined ? value : `${headers[lower] as string}${lower === 'cookie' ? '; ' : ', '}${value}`;
  }
  return { method: entry.method, url: entry.path, headers, socket: { remoteAddress: peer, encrypted } };
}

/** The headers a delivery carries: the client's, with `X-Forwarded-For/Proto/Host` as a live forward sets them. */
export function deliveryHeaders(entry: DeferredEntry): HeaderPair[] {
  const facts = replayFacts(entry);
  const pairs: HeaderPair[] = [];
  for (const pair of entry.headers) {
    const lower = pair[0].toLowerCase();
    if (!OURS.has(lower) && lower !== 'x-forwarded-for' && !FORWARDED.has(lower)) pairs.push(pair);
  }
  const peer = facts.socket.remoteAddress ?? 'unknown';
  const forwarded = facts.headers['x-forwarded-for'] as string | undefined;
  pairs.push(['x-forwarded-for', forwarded === undefined || forwarded === '' ? peer : `${forwarded}, ${peer}`], ['x-forwarded-proto', facts.socket.encrypted === true ? 'https' : 'http']);
  if (facts.headers.host !== undefined) pairs.push(['x-forwarded-host', facts.headers.host]);
  return pairs;
}
