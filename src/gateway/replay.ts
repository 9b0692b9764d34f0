/**
 * A throttled request as the deferred queue keeps it, and as it comes back: the client's own
 * headers plus one of ours naming the peer it came from, so that on replay `remote_address` (and
 * every other action) sees the request as it was, and the upstream gets the `X-Forwarded-*`
 * headers a live forward would have carried.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { DeferredEntry, HeaderPair } from './defer/index.js';
import type { RequestFacts } from './request.js';

/** The stored request's header naming the client's peer address; never sent upstream, and a client's own is dropped. */
export const PEER_HEADER = 'x-tollgate-client-peer';

/** Headers the gateway writes itself when it sends a request upstream. */
const FORWARDED = new Set(['x-forwarded-proto', 'x-forwarded-host']);

/** The client's headers as sent, minus any `PEER_HEADER` of its own, plus ours (hop-by-hop ones the queue drops). */
export function storedHeaders(req: IncomingMessage): HeaderPair[] {
  const raw = req.rawHeaders;
  const pairs: HeaderPair[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== PEER_HEADER && raw[i]!.toLowerCase() !== 'expect') pairs.push([raw[i]!, raw[i + 1]!]);
  }
  if (req.socket.remoteAddress !== undefined) pairs.push([PEER_HEADER, req.socket.remoteAddress]);
  return pairs;
}

/** The stored request as the routes and actions read a live one (node's header record, joined as node joins them). */
export function replayFacts(entry: DeferredEntry): RequestFacts {
  const headers: IncomingHttpHeaders = {};
  let peer: string | undefined;
  for (const [name, value] of entry.headers) {
    const lower = name.toLowerCase();
    if (lower === PEER_HEADER) peer = value;
    else if (lower === 'set-cookie') (headers['set-cookie'] ??= []).push(value);
    else headers[lower] = headers[lower] === undefined ? value : `${headers[lower] as string}${lower === 'cookie' ? '; ' : ', '}${value}`;
  }
  return { method: entry.method, url: entry.path, headers, socket: { remoteAddress: peer } };
}

/** The headers a delivery carries: the client's, with `X-Forwarded-For/Proto/Host` as a live forward sets them. */
export function deliveryHeaders(entry: DeferredEntry): HeaderPair[] {
  const facts = replayFacts(entry);
  const pairs: HeaderPair[] = [];
  for (const pair of entry.headers) {
    const lower = pair[0].toLowerCase();
    if (lower !== PEER_HEADER && lower !== 'x-forwarded-for' && !FORWARDED.has(lower)) pairs.push(pair);
  }
  const peer = facts.socket.remoteAddress ?? 'unknown';
  const forwarded = facts.headers['x-forwarded-for'] as string | undefined;
  pairs.push(['x-forwarded-for', forwarded === undefined || forwarded === '' ? peer : `${forwarded}, ${peer}`], ['x-forwarded-proto', 'http']);
  if (facts.headers.host !== undefined) pairs.push(['x-forwarded-host', facts.headers.host]);
  return pairs;
}
