/**
 * Forwarding an admitted request to its upstream with undici (a pooled `Pool` per upstream; an
 * https:// one verified with its `tls` settings, under its own name):
 * bodies streamed both ways (never buffered), hop-by-hop headers dropped both ways,
 * `X-Forwarded-For` appended and `X-Forwarded-Proto` / `X-Forwarded-Host` set, upstream failures
 * answered 502 (refused, reset) or 504 (timed out) with a small JSON body, and a client that goes
 * away aborts the upstream request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { Pool, buildConnector, errors, type Dispatcher } from 'undici';
import type { HeaderList } from '../http/report.js';
import type { UpstreamConfig } from './config/types.js';
import { TICKET_HEADER } from './defer/upstream-call.js';

/** Hop-by-hop headers (RFC 9110 §7.6.1, and the ones proxies have always dropped): never forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade']);
/**
 * Request headers the gateway writes itself (or undici refuses: `expect`). `Tollgate-Ticket` marks a
 * deferred request's replay: a client's own never reaches the upstream.
 */
const REWRITTEN = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'expect', TICKET_HEADER]);

/** What forwarding needs of the route (the route itself: nothing is built per request). */
export interface ForwardOptions {
  /** The upstream's name, for messages. */
  readonly upstream: string;
  /** Longest wait for the response headers, and between two body chunks, in ms. */
  readonly timeoutMs: number;
}

/**
 * Each upstream's pool: keep-alive connections, up to the upstream's `max_connections` (256 when
 * not given), one request at a time on each (no pipelining: a slow answer would hold up the ones
 * queued behind it on its connection, and undici writes a GET behind another only once that one's
 * answer has begun, so pipelining measured no different in A/Bs of bench/gateway.js, BENCHMARKS.md
 * "Gateway: cuts" and "Gateway: the floor under it"). Idle connections are kept for the upstream's
 * own `Keep-Alive: timeout` hint, else 4 s, at most 60 s.
 */
const POOL_OPTIONS = { pipelining: 1, keepAliveTimeout: 4_000, keepAliveMaxTimeout: 60_000 } as const;
const DEFAULT_MAX_CONNECTIONS = 256;

/** One pooled connection set per upstream. */
export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  private readonly dispatchers = new Map<string, Dispatcher>();

  constructor(readonly configs: ReadonlyMap<string, UpstreamConfig>, connectTimeoutMs: number) {
    for (const [name, upstream] of configs) {
      const connect = upstream.url.protocol === 'https:' ? tlsConnector(upstream, connectTimeoutMs) : { timeout: connectTimeoutMs };
      const pool = new Pool(upstream.url.origin, { connect, connections: upstream.maxConnections ?? DEFAULT_MAX_CONNECTIONS, ...POOL_OPTIONS });
      this.pools.set(name, pool);
      this.dispatchers.set(name, upstream.url.protocol === 'https:' ? pool.compose(pinnedServerName(upstream)) : pool);
    }
  }

  /** The upstream's origin (`https://host:port`). */
  origin(name: string): string | undefined {
    return this.configs.get(name)?.url.origin;
  }

  /** Where requests to the upstream go: live ones (proxy.ts) and deferred ones (the deferral). */
  pool(name: string): Dispatcher {
    return this.dispatchers.get(name)!;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.destroy()));
  }
}

/**
 * The name an https:// upstream is reached by: sent as SNI and checked against its certificate.
 * `server_name`, else the URL's host name; none for an address (RFC 6066 has no SNI for those: the
 * certificate must carry the address).
 */
function serverNameOf(upstream: UpstreamConfig): string | undefined {
  const host = upstream.url.hostname.replace(/^\[|\]$/g, '');
  return upstream.tls?.serverName ?? (isIP(host) === 0 ? host : undefined);
}

/**
 * Connects to an https:// upstream, trusting its `ca_file` (instead of Node's bundled CAs) when given,
 * and always by the upstream's own name: undici would otherwise take the SNI (and the name the
 * certificate is checked against) from each request's `Host`, which is the client's.
 */
function tlsConnector(upstream: UpstreamConfig, timeout: number): buildConnector.connector {
  const connect = buildConnector({ timeout, ...(upstream.tls?.ca !== undefined ? { ca: upstream.tls.ca } : {}) });
  const servername = serverNameOf(upstream);
  return (options, callback) => connect({ ...options, servername }, callback);
}

/**
 * Every request to an https:// upstream under one server name: undici closes a connection when a
 * request's name (from its `Host`) differs from the connection's, so clients with different hosts
 * would never share one. The name itself is set by {@link tlsConnector}.
 */
function pinnedServerName(upstream: UpstreamConfig): Dispatcher.DispatcherComposeInterceptor {
  const name = serverNameOf(upstream) ?? upstream.url.host;
  // undici reads `servername` from a request's options (core/request.js), though its types leave it out.
  return (dispatch) => (options, handler) => dispatch({ ...options, servername: name } as Dispatcher.DispatchOptions, handler);
}

/** The names listed in `Connection` (also hop-by-hop), lower-case. */
function connectionNames(value: string | undefined): Set<string> | undefined {
  // The usual values name only headers that are dropped anyway.
  if (value === undefined || value === 'keep-alive' || value === 'close') return undefined;
  return new Set(value.split(',').map((name) => name.trim().toLowerCase()).filter((name) => name !== ''));
}

/** `lengths[n]`: some name of `names` is n characters long. A header of another length is kept without lower-casing its name. */
function lengthsOf(names: ReadonlySet<string>): boolean[] {
  const lengths: boolean[] = [];
  for (const name of names) lengths[name.length] = true;
  return lengths;
}
const REQUEST_DROPPED_LENGTHS = lengthsOf(new Set([...HOP_BY_HOP, ...REWRITTEN]));
const RESPONSE_DROPPED_LENGTHS = lengthsOf(HOP_BY_HOP);

/** The request headers sent upstream: the client's, minus hop-by-hop ones, plus X-Forwarded-*. */
export function upstreamHeaders(request: IncomingMessage): string[] {
  const raw = request.rawHeaders;
  const named = connectionNames(request.headers.connection);
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (named !== undefined || REQUEST_DROPPED_LENGTHS[name.length] === true) {
      const lower = name.toLowerCase();
      if (HOP_BY_HOP.has(lower) || REWRITTEN.has(lower) || named?.has(lower) === true) continue;
    }
    headers.push(name, raw[i + 1]!);
  }
  const peer = request.socket.remoteAddress ?? 'unknown';
  const forwarded = request.headers['x-forwarded-for'];
  headers.push('x-forwarded-for', forwarded === undefined || forwarded === '' ? peer : `${forwarded}, ${peer}`);
  headers.push('x-forwarded-proto', (request.socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http');
  if (request.headers.host !== undefined) headers.push('x-forwarded-host', request.headers.host);
  return headers;
}

const CONTENT_LENGTH = 'content-length';

/**
 * The upstream's raw response headers for the client: minus hop-by-hop ones, plus `extra`; the
 * answer's `Content-Length` goes to `relay.bodyLength` (read in the same pass).
 */
function clientHeaders(raw: Buffer[], extra: HeaderList, relay: Relay): string[] {
  const headers: string[] = [];
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1');
    if (RESPONSE_DROPPED_LENGTHS[name.length] === true) {
      const lower = name.toLowerCase();
      if (lower === 'connection') named = connectionNames(raw[i + 1]!.toString('latin1'));
      if (HOP_BY_HOP.has(lower)) continue;
    }
    const value = raw[i + 1]!.toString('latin1');
    if (name.length === CONTENT_LENGTH.length && name.toLowerCase() === CONTENT_LENGTH) relay.bodyLength = Number(value);
    headers.push(name, value);
  }
  const kept = named === undefined ? headers : headers.filter((_, i, all) => !named.has((i % 2 === 0 ? all[i]! : all[i - 1]!).toLowerCase()));
  for (const [name, value] of extra) kept.push(name, value);
  return kept;
}

/** Whether the client sends a body: declared by Content-Length or Transfer-Encoding, as HTTP/1.1 says. */
function hasBody(request: IncomingMessage): boolean {
  return request.headers['transfer-encoding'] !== undefined || (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0');
}

/**
 * Forwards `request` to `pool` and streams the answer to `response`, with `extraHeaders` added to
 * it; `done`, when given, is called once the exchange is over, whatever its outcome (an upstream
 * failure is answered, not thrown). `options` is the route: nothing of it is built per request.
 */
export function forward(pool: Dispatcher, request: IncomingMessage, response: ServerResponse, options: ForwardOptions, extraHeaders: HeaderList, done?: () => void): void {
  const body = hasBody(request);
  const relay = new Relay(request, response, options, extraHeaders, done);
  pool.dispatch({ method: request.method as 'GET', path: request.url ?? '/', headers: upstreamHeaders(request), body: body ? request : null, headersTimeout: 0, bodyTimeout: 0 }, relay);
  relay.start(body);
}

/** The relay of a response being forwarded (its listeners are shared functions, not closures per request). */
const RELAY = Symbol('tollgate.relay');
type RelayedResponse = ServerResponse & { [RELAY]?: Relay };

/** A whole answer up to this size goes out as one latin1 string that node joins to its headers (one buffer, one `end`). */
const ONE_STRING_BYTES = 16 * 1024;

/**
 * One exchange as undici's dispatch handler: the upstream's status and headers go to the client as
 * they arrive, then each body chunk, with backpressure (undici pauses the socket while the client's
 * buffer is full). Not `pool.request()` and `stream.pipeline`: a promise, a body stream and an
 * AbortController per request were a third of the gateway's CPU. The first body chunk is held until
 * the end of the upstream read it came in (a `nextTick`; none when it is the whole declared
 * `Content-Length`): when the answer ends in that read, headers and body go out in one write
 * (`end(body)`), else the chunk is written as it would have been.
 */
class Relay implements Dispatcher.DispatchHandler {
  private abortUpstream: ((reason: Error) => void) | undefined;
  private resume: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** What the upstream request was aborted with when the route's timeout ran out. */
  private timedOut: Error | undefined;
  private answering = false;
  private done = false;
  private began = false;
  private held: Buffer | undefined;
  private waitingDrain = false;
  /** The answer's declared `Content-Length` (-1: none, streamed or chunked). */
  bodyLength = -1;
  /** Starts the timer once a request body is all in (only requests with a body wait for it). */
  private onRequestEnd: (() => void) | undefined;

  constructor(
    private readonly request: IncomingMessage,
    private readonly response: RelayedResponse,
    private readonly options: ForwardOptions,
    private readonly extraHeaders: HeaderList,
    private readonly settle: (() => void) | undefined,
  ) {}

  /** Follows the client; the route's timeout runs from the end of the request (as envoy's) to the response headers. */
  start(hasRequestBody: boolean): void {
    this.response[RELAY] = this;
    // `on`, not `once` (which wraps the listener in a closure per call): `finish` takes it off.
    this.response.on('close', onClientClose);
    if (!hasRequestBody || this.request.complete) this.startTimer();
    else this.request.once('end', (this.onRequestEnd = () => this.startTimer()));
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.abortUpstream = abort;
    // Called before any byte is written: a request whose client left, or whose timeout ran out
    // while it waited for a connection (and was answered 504), never reaches the upstream.
    if (this.timedOut !== undefined) abort(this.timedOut);
    else if (this.response.destroyed) abort(new errors.RequestAbortedError());
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true;
    // From here the route's timeout bounds the wait between two body chunks.
    this.answering = true;
    this.startTimer();
    this.resume = resume;
    this.response.writeHead(statusCode, clientHeaders(rawHeaders, this.extraHeaders, this));
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (!this.began) {
      this.began = true;
      this.held = chunk;
      // A first chunk that is the whole declared body ends the answer in this same parse (undici's
      // parser completes the message as soon as its last byte is read): `onComplete` follows at
      // once and clears the timer, so neither a tick nor a timer refresh is needed.
      if (chunk.length === this.bodyLength) return true;
      this.timer?.refresh();
      process.nextTick(releaseHeld, this);
      return true;
    }
    this.timer?.refresh();
    this.release();
    const flowing = this.response.write(chunk);
    if (!flowing && !this.waitingDrain) {
      this.waitingDrain = true;
      this.response.on('drain', onDrain);
    }
    return flowing;
  }

  onComplete(): void {
    const held = this.held;
    this.held = undefined;
    if (held === undefined) this.response.end();
    else if (held.length <= ONE_STRING_BYTES) this.response.end(held.toString('latin1'), 'latin1');
    else this.response.end(held);
    this.finish();
  }

  onError(error: Error): void {
    this.release();
    answerFailure(this.response, this.timedOut ?? error, this.options);
    this.finish();
  }

  /** Writes the held first chunk (the answer goes on past the read it came in). */
  release(): void {
    const held = this.held;
    if (held === undefined) return;
    this.held = undefined;
    // Backpressure on this one chunk is seen by the next: `write` answers false while the buffer is full.
    if (!this.response.destroyed) this.response.write(held);
  }

  /**
   * The route's timeout, timed here rather than by undici (its timers tick every half second, and
   * its body timer was a timer object made per request besides its keep-alive one): from the end
   * of the request to the response headers, then between two body chunks (refreshed by each).
   */
  startTimer(): void {
    if (this.timer === undefined) this.timer = setTimeout(onTimeout, this.options.timeoutMs, this);
    else this.timer.refresh();
  }

  timeOut(): void {
    this.timedOut = this.answering ? new errors.BodyTimeoutError() : new errors.HeadersTimeoutError();
    if (this.abortUpstream !== undefined) {
      this.abortUpstream(this.timedOut);
      return;
    }
    // Still waiting for a connection (every one of `max_connections` busy): answered now; the
    // request is dropped when its turn comes (`onConnect`).
    answerFailure(this.response, this.timedOut, this.options);
    this.finish();
  }

  drained(): void {
    this.waitingDrain = false;
    this.response.off('drain', onDrain);
    this.resume?.();
  }

  clientClosed(): void {
    // The client left before the answer was complete: the upstream request goes too.
    if (!this.response.writableFinished) this.abortUpstream?.(new errors.RequestAbortedError());
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    if (this.onRequestEnd !== undefined) this.request.off('end', this.onRequestEnd);
    this.response.off('close', onClientClose);
    if (this.waitingDrain) this.response.off('drain', onDrain);
    this.response[RELAY] = undefined;
    this.settle?.();
  }
}

function releaseHeld(relay: Relay): void {
  relay.release();
}
function onTimeout(relay: Relay): void {
  relay.timeOut();
}
function onDrain(this: RelayedResponse): void {
  this[RELAY]?.drained();
}
function onClientClose(this: RelayedResponse): void {
  this[RELAY]?.clientClosed();
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
