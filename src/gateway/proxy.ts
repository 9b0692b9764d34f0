/**
 * Forwarding an admitted request to its upstream with undici (a pooled `Pool` per upstream):
 * bodies streamed both ways (never buffered), hop-by-hop headers dropped both ways,
 * `X-Forwarded-For` appended and `X-Forwarded-Proto` / `X-Forwarded-Host` set, upstream failures
 * answered 502 (refused, reset) or 504 (timed out) with a small JSON body, and a client that goes
 * away aborts the upstream request.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { Pool, errors } from 'undici';
import type { HeaderList } from '../http/report.js';

/** Hop-by-hop headers (RFC 9110 §7.6.1, and the ones proxies have always dropped): never forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade']);
/** Request headers the gateway writes itself (or undici refuses: `expect`). */
const REWRITTEN = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'expect']);

/** What forwarding needs of the route. */
export interface ForwardOptions {
  /** The upstream's name, for messages. */
  readonly upstream: string;
  /** Longest wait for the response headers, and between two body chunks, in ms. */
  readonly timeoutMs: number;
  /** Headers added to the response (the rate-limit headers of an admitted request). */
  readonly extraHeaders: HeaderList;
}

/** One pooled connection set per upstream. */
export class Upstreams {
  private readonly pools = new Map<string, Pool>();

  constructor(upstreams: ReadonlyMap<string, URL>, connectTimeoutMs: number) {
    for (const [name, url] of upstreams) {
      this.pools.set(name, new Pool(url.origin, { connect: { timeout: connectTimeoutMs }, connections: 256, pipelining: 1 }));
    }
  }

  pool(name: string): Pool {
    return this.pools.get(name)!;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.destroy()));
  }
}

/** The names listed in `Connection` (also hop-by-hop), lower-case. */
function connectionNames(value: string | undefined): Set<string> | undefined {
  if (value === undefined) return undefined;
  return new Set(value.split(',').map((name) => name.trim().toLowerCase()).filter((name) => name !== ''));
}

/** The request headers sent upstream: the client's, minus hop-by-hop ones, plus X-Forwarded-*. */
export function upstreamHeaders(request: IncomingMessage): string[] {
  const raw = request.rawHeaders;
  const named = connectionNames(request.headers.connection);
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || REWRITTEN.has(name) || named?.has(name) === true) continue;
    headers.push(raw[i]!, raw[i + 1]!);
  }
  const peer = request.socket.remoteAddress ?? 'unknown';
  const forwarded = request.headers['x-forwarded-for'];
  headers.push('x-forwarded-for', forwarded === undefined || forwarded === '' ? peer : `${forwarded}, ${peer}`);
  headers.push('x-forwarded-proto', 'http');
  if (request.headers.host !== undefined) headers.push('x-forwarded-host', request.headers.host);
  return headers;
}

/** The upstream's response headers for the client: minus hop-by-hop ones, plus `extra`. */
function clientHeaders(upstream: Record<string, string | string[] | undefined>, extra: HeaderList): (string | string[])[] {
  const named = connectionNames(typeof upstream.connection === 'string' ? upstream.connection : undefined);
  const headers: (string | string[])[] = [];
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || HOP_BY_HOP.has(name) || named?.has(name) === true) continue;
    headers.push(name, value);
  }
  for (const [name, value] of extra) headers.push(name, value);
  return headers;
}

/** Whether the client sends a body: declared by Content-Length or Transfer-Encoding, as HTTP/1.1 says. */
function hasBody(request: IncomingMessage): boolean {
  return request.headers['transfer-encoding'] !== undefined || (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0');
}

/**
 * Forwards `request` to `pool` and streams the answer to `response`. Resolves once the exchange is
 * over, whatever its outcome (an upstream failure is answered, not thrown).
 */
export async function forward(pool: Pool, request: IncomingMessage, response: ServerResponse, options: ForwardOptions): Promise<void> {
  // undici takes an EventEmitter as the signal: an AbortController per request cost ~8% of the CPU.
  const abort = new EventEmitter();
  const onClose = (): void => {
    if (!response.writableFinished) abort.emit('abort');
  };
  response.once('close', onClose);
  // The route's timeout runs from the end of the request (as envoy's) to the response headers;
  // timed here, since undici's own timers tick every half second.
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const startTimer = (): void => {
    timer = setTimeout(() => {
      timedOut = true;
      abort.emit('abort');
    }, options.timeoutMs);
  };
  const body = hasBody(request);
  if (!body || request.complete) startTimer();
  else request.once('end', startTimer);
  try {
    const upstream = await pool.request({
      method: request.method as 'GET',
      path: request.url ?? '/',
      headers: upstreamHeaders(request),
      body: body ? request : null,
      signal: abort,
      headersTimeout: 0,
      bodyTimeout: options.timeoutMs,
    });
    clearTimeout(timer);
    response.writeHead(upstream.statusCode, clientHeaders(upstream.headers, options.extraHeaders) as string[]);
    await relay(upstream.body, response);
  } catch (error) {
    answerFailure(response, timedOut ? new errors.HeadersTimeoutError() : error, options);
  } finally {
    clearTimeout(timer);
    request.off('end', startTimer);
    response.off('close', onClose);
  }
}

/**
 * Streams the upstream's body to the client (with backpressure); resolves once the response is
 * finished, or cut short: a body that fails midway destroys the response, a client that leaves
 * destroys the body. Not stream.pipeline: it makes and aborts an AbortController per call, a
 * tenth of the gateway's CPU.
 */
function relay(body: Readable, response: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      body.off('error', failed);
      response.off('finish', done).off('close', gone);
      resolve();
    };
    const failed = (): void => {
      response.destroy();
      done();
    };
    const gone = (): void => {
      if (!body.destroyed) body.destroy();
      done();
    };
    body.once('error', failed);
    response.once('finish', done).once('close', gone);
    body.pipe(response);
  });
}

/** An upstream failure as the client sees it: 504 when it timed out, 502 otherwise; a cut stream once the answer began. */
function answerFailure(response: ServerResponse, error: unknown, options: ForwardOptions): void {
  if (response.destroyed || response.writableEnded) return;
  if (response.headersSent) {
    // The answer began: the client must see it cut short, not complete.
    response.destroy();
    return;
  }
  const timedOut = error instanceof errors.ConnectTimeoutError || error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError;
  const code = (error as { code?: string }).code ?? 'unknown';
  const body = timedOut
    ? { error: 'gateway_timeout', message: `upstream ${JSON.stringify(options.upstream)} did not answer in time (${code})` }
    : { error: 'bad_gateway', message: `upstream ${JSON.stringify(options.upstream)} failed: ${describeFailure(error)}` };
  const text = JSON.stringify(body);
  response.writeHead(timedOut ? 504 : 502, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), connection: 'close' });
  response.end(text);
}

function describeFailure(error: unknown): string {
  const cause = (error as { cause?: { code?: string } }).cause;
  const code = (error as { code?: string }).code ?? cause?.code;
  if (code === 'ECONNREFUSED') return 'the connection was refused (ECONNREFUSED)';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return `the connection was reset (${code})`;
  return code ?? (error as Error).message ?? String(error);
}
