/**
 * An admitted request's rate-limit headers, sent with the response's head on node's HTTP/1
 * responses (node:http, Express, Connect, Hono on @hono/node-server).
 *
 * Why not `setHeader` for each: once any header is set that way, node's `writeHead(status, headers)`
 * sends the app's own headers through `setHeader` too (its "progressive" path, each header
 * validated and stored in a map, then read back). Three headers set before a `writeHead` of two
 * cost ~3.2 µs per response against ~1.6 µs through this (node 20, in process, bench/http-head-inprocess.js;
 * BENCHMARKS.md, "Middleware × bare: the headers with the head"). So the response's `writeHead` is
 * wrapped, once, to add them to the headers the app passes, at the place and with the value
 * `setHeader` first would have given them: the same bytes on the wire.
 */
import type { HeaderList } from './report.js';

/** What this needs of node's ServerResponse (or any response with its head-writing API). */
export interface HeadResponse {
  writeHead: (...args: never[]) => unknown;
  getHeaderNames(): string[];
  hasHeader(name: string): boolean;
  setHeader(name: string, value: string): unknown;
}

type HeadersArgument = Record<string, unknown> | readonly unknown[] | undefined;
type WriteHead = (this: HeadResponse, statusCode: number, reason?: string | HeadersArgument, headers?: HeadersArgument) => unknown;

/**
 * Sends `headers` (lowercase names, as report.ts builds them) with `res`'s head. Nothing if the
 * head is already sent (its `writeHead` is not called again), as `setHeader` would have refused: no
 * `headersSent` read first, which on Express's responses costs V8 a runtime lookup. An app header of
 * the same name, set before the head, wins, as before.
 */
export function sendWithHead(res: HeadResponse, headers: HeaderList): void {
  if (headers.length === 0) return;
  const writeHead = res.writeHead as unknown as WriteHead;
  const wrapped: WriteHead = function writeHeadWithLimits(this: HeadResponse, statusCode, reason, own) {
    res.writeHead = writeHead as unknown as HeadResponse['writeHead'];
    const reasonGiven = typeof reason === 'string';
    // As node reads its arguments: writeHead(status[, reason][, headers]).
    const appHeaders = reasonGiven ? own : (own ?? (reason as HeadersArgument));
    // The app set headers with setHeader (Express does), or passes an array: node's progressive
    // path runs anyway; ours are set beside the app's, unless it set the same name.
    if (this.getHeaderNames().length > 0 || Array.isArray(appHeaders)) {
      for (const [name, value] of headers) if (!this.hasHeader(name)) this.setHeader(name, value);
      return writeHead.call(this, statusCode, reason, own);
    }
    const flat = withAppHeaders(headers, appHeaders as Record<string, unknown> | undefined);
    return reasonGiven ? writeHead.call(this, statusCode, reason, flat) : writeHead.call(this, statusCode, flat);
  };
  res.writeHead = wrapped as unknown as HeadResponse['writeHead'];
}

/**
 * `ours`, then the app's headers, as one flat [name, value, ...] array: an app header of one of our
 * names takes our place with its own name and value, as its `setHeader` after ours would have.
 */
function withAppHeaders(ours: HeaderList, app: Record<string, unknown> | undefined): unknown[] {
  const flat: unknown[] = [];
  for (let i = 0; i < ours.length; i++) flat.push(ours[i]![0], ours[i]![1]);
  if (app === undefined || app === null) return flat;
  for (const name in app) {
    // An empty name is skipped, as node's progressive path (which ours set first led to) skips it.
    if (name === '' || !Object.prototype.hasOwnProperty.call(app, name)) continue;
    const at = indexOfName(ours, name);
    if (at < 0) flat.push(name, app[name]);
    else {
      flat[at * 2] = name;
      flat[at * 2 + 1] = app[name];
    }
  }
  return flat;
}

/** Where `name` (any case) is among `ours` (lowercase), or -1. */
function indexOfName(ours: HeaderList, name: string): number {
  for (let i = 0; i < ours.length; i++) {
    const own = ours[i]![0];
    if (own.length === name.length && own === name.toLowerCase()) return i;
  }
  return -1;
}
