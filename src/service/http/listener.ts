/**
 * The HTTP listeners: a table of routes served by node:http (per-request overhead is a map
 * lookup), and the decision plane's routes: envoy's `/json`, Tollgate's `/v1/check` and
 * `/v1/limit`, and health. The admin plane's routes (rules, keys, metrics, dashboard) are added to
 * their own table by planes.ts; each route says who may call it ({@link RouteAccess}).
 */
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { TlsOptions } from 'node:tls';
import { describeValue } from '../../errors.js';
import { checkHeaders, decisionHeaders } from '../../http/headers.js';
import { compilePolicy, type Policy } from '../../policy.js';
import type { CheckRequest, CheckResult } from '../../rules/check.js';
import type { ServiceContext } from '../context.js';
import { degradedReasonOf } from '../../limiter/index.js';
import { DEGRADED_HEADER, UNAVAILABLE_ANSWER, announceLimit, decideCheck, degradedAnswer } from '../check/decide.js';
import { closeSilentConnections } from './close.js';
import { answerReserve, answerSettle, type RouteAnswer } from '../check/reserve.js';
import { envoyCheckOf, envoyResponseOptions, envoyResponseText, responseHeadersOf, type EnvoyResponseOptions } from '../check/envoy.js';
import { HttpError, MAX_BODY_BYTES, errorReply, readJson, readJsonThen, sendJson, sendJsonAndLinger, sendJsonText, type JsonRoute } from './body.js';
import { ClientGoneSummary, clientGoneCode } from './client-gone.js';
import { answerAcquire, answerRelease, type SlotReply } from '../check/acquire.js';
import { checkAnswer, decideBatch, friendlyCheck, readBatch } from '../check/batch.js';

/**
 * A route's handler; `url()` parses the request's URL (its query) when the handler needs it. An
 * error it throws or rejects with is answered (`answerError`); a handler that answers from a
 * callback hands its errors to `fail` instead.
 */
export type RouteHandler = (request: IncomingMessage, response: ServerResponse, url: () => URL, fail: (error: unknown) => void) => Promise<void> | void;

/** A path made of these characters routes as it is; anything else is normalised by `new URL` first. */
const PLAIN_PATH = /^(?:\/[A-Za-z0-9_-]+)+$|^\/$/;

/** How often node:http checks the headers and request timeouts: a short configured timeout is kept within a fraction of itself. */
function checkingInterval(headersTimeoutMs: number): number {
  return Math.min(1_000, Math.max(50, Math.floor(headersTimeoutMs / 4)));
}

/**
 * Who may call a route: `public` (decisions, health: anyone who reaches the listener), `observe`
 * (read-only pages that show callers: the metrics token when one is set, or the admin token), or
 * `admin` (the handler checks the admin token itself, admin/auth.ts). A route added without saying
 * is `observe`, so a new page is never left open by accident.
 */
export type RouteAccess = 'public' | 'observe' | 'admin';

/**
 * A route's handler given only the request and the response, which answers its own errors: nothing
 * is made for it per request (no URL or error closure; the hot route, `/json`). A synchronous throw
 * is still answered.
 */
export type PlainRouteHandler = (request: IncomingMessage, response: ServerResponse) => void;

/** A route: its handler and who may call it. */
export interface Route {
  readonly handler: RouteHandler;
  readonly access: RouteAccess;
  /** Called instead of `handler`, when the route was added with {@link HttpRoutes.addPlain}. */
  readonly plain?: PlainRouteHandler;
}

/** Routes by path, then method (a lookup makes no `METHOD /path` string). */
export class HttpRoutes {
  private readonly routes = new Map<string, Map<string, Route>>();

  add(method: string, path: string, handler: RouteHandler, access: RouteAccess = 'observe'): void {
    this.set(method, path, { handler, access });
  }

  /** Adds a route whose handler needs only the request and the response ({@link PlainRouteHandler}). */
  addPlain(method: string, path: string, plain: PlainRouteHandler, access: RouteAccess = 'observe'): void {
    this.set(method, path, { handler: (request, response) => plain(request, response), access, plain });
  }

  private set(method: string, path: string, route: Route): void {
    let methods = this.routes.get(path);
    if (methods === undefined) this.routes.set(path, (methods = new Map()));
    methods.set(method, route);
  }

  find(method: string, path: string): Route | undefined {
    return this.routes.get(path)?.get(method);
  }

  /** The methods that serve `path` (none: a 404, some: a 405). */
  methods(path: string): string[] {
    return [...(this.routes.get(path)?.keys() ?? [])];
  }
}

/** What one listener serves: its routes, and how `observe` routes are let in. */
export interface ListenerPlan {
  readonly routes: HttpRoutes;
  /** Refuses an `observe` request (401) or lets it in (undefined); none: `observe` routes are open. */
  readonly observeGuard?: (request: IncomingMessage) => HttpError | undefined;
  /** Routes another listener serves: a request for one gets a 404 saying where it is served. */
  readonly elsewhere?: { readonly routes: HttpRoutes; readonly where: string };
}

/** The decision plane: envoy's `/json`, `/v1/check`, `/v1/limit`, and health. */
export function decisionRoutes(ctx: ServiceContext): HttpRoutes {
  const routes = new HttpRoutes();
  addDecisionRoutes(ctx, routes);
  addReservationRoutes(ctx, routes);
  addSlotRoutes(ctx, routes);
  addHealthRoutes(ctx, routes);
  return routes;
}

/** An HTTP listener's server: node:http, or node:https with TLS. */
export type HttpServer = Server | HttpsServer;

/** Creates an HTTP server for one listener's routes; HTTPS with `tls` (tls.ts's secure-context options). */
export function createHttpServer(ctx: ServiceContext, plan: ListenerPlan, tls?: TlsOptions): HttpServer {
  const { routes, observeGuard } = plan;
  // Slow-loris: a client that trickles its headers or body is cut off (408) instead of holding a
  // socket; the timeouts are checked every second or sooner (Node's default is every 30 s).
  const onRequest = (request: IncomingMessage, response: ServerResponse): void => {
    const target = request.url ?? '/';
    const query = target.indexOf('?');
    const path = query === -1 ? target : target.slice(0, query);
    const parsed = PLAIN_PATH.test(path) ? undefined : new URL(target, 'http://tollgate');
    const pathname = parsed === undefined ? path : parsed.pathname;
    const route = routes.find(request.method ?? 'GET', pathname);
    if (route === undefined) return notServed(plan, request, response, pathname);
    const refused = route.access === 'observe' ? observeGuard?.(request) : undefined;
    if (refused !== undefined) return refuse(request, response, refused);
    if (route.plain === undefined) return handle(ctx, route.handler, request, response, target, parsed, pathname);
    try {
      route.plain(request, response);
    } catch (error) {
      answerError(ctx, response, request, pathname, error);
    }
  };
  const { keepAliveTimeoutMs, headersTimeoutMs, requestTimeoutMs, maxRequestsPerSocket } = ctx.options.connections;
  const httpOptions: ServerOptions = { connectionsCheckingInterval: checkingInterval(headersTimeoutMs), headersTimeout: headersTimeoutMs, requestTimeout: requestTimeoutMs, keepAliveTimeout: keepAliveTimeoutMs };
  // A TLS handshake must end within the headers timeout too: a client stalling in it holds a socket.
  const server = tls === undefined ? createServer(httpOptions, onRequest) : createHttpsServer({ ...httpOptions, ...tls, handshakeTimeout: headersTimeoutMs }, onRequest);
  // 0: no cap. Past the cap, node answers with `Connection: close` and the client reconnects.
  server.maxRequestsPerSocket = maxRequestsPerSocket;
  // A connection that never sends a byte is not reliably followed by the headers timeout: close it after as long.
  closeSilentConnections(server, headersTimeoutMs);
  // `Expect: 100-continue` with a body declared too large: answer the 413 without inviting the body.
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    if (Number(request.headers['content-length'] ?? 0) <= MAX_BODY_BYTES) response.writeContinue();
    onRequest(request, response);
  });
  return server;
}

/** Calls a route's handler with its URL (parsed when asked for) and its error answer. */
function handle(ctx: ServiceContext, handler: RouteHandler, request: IncomingMessage, response: ServerResponse, target: string, parsed: URL | undefined, pathname: string): void {
  const url = (): URL => (parsed ??= new URL(target, 'http://tollgate'));
  const fail = (error: unknown): void => answerError(ctx, response, request, pathname, error);
  try {
    handler(request, response, url, fail)?.catch(fail);
  } catch (error) {
    fail(error);
  }
}

/** 401 for an observability page without its token; the challenge lets a browser ask for it (Basic, the token as password). */
function refuse(request: IncomingMessage, response: ServerResponse, error: HttpError): void {
  sendJson(response, error.status, error.body(), { 'www-authenticate': 'Basic realm="tollgate", charset="UTF-8"', ...error.headers });
  request.resume();
}

/**
 * 404 for a path no route serves (saying which listener serves it, when another does), 405 (with
 * Allow) for a method its routes do not take.
 */
function notServed({ routes, elsewhere }: ListenerPlan, request: IncomingMessage, response: ServerResponse, pathname: string): void {
  const methods = routes.methods(pathname);
  const servedElsewhere = elsewhere !== undefined && elsewhere.routes.methods(pathname).length > 0;
  const error =
    methods.length > 0
      ? new HttpError(405, `${request.method} ${pathname} is not served; ${pathname} takes ${methods.join(', ')}`)
      : servedElsewhere
        ? new HttpError(404, `${request.method} ${pathname} is not served on this port: it is on ${elsewhere.where} (docs/service.md, "Planes")`)
        : new HttpError(404, `${request.method} ${pathname} is not served; see docs/service.md for the endpoints`);
  sendJson(response, error.status, error.body(), methods.length > 0 ? { allow: methods.join(', ') } : {});
  request.resume();
}

const clientGone = new WeakMap<ServiceContext, ClientGoneSummary>();

/** The service's count of requests their clients ended, made on first use. */
function clientGoneOf(ctx: ServiceContext): ClientGoneSummary {
  let summary = clientGone.get(ctx);
  if (summary === undefined) clientGone.set(ctx, (summary = new ClientGoneSummary(ctx.logger)));
  return summary;
}

/** Writes the pending count of requests their clients ended (at shutdown). */
export function flushClientGone(ctx: ServiceContext): void {
  clientGone.get(ctx)?.flush();
}

/**
 * Answers an error a handler threw: 4xx for the client's mistakes, 503 for the store, else 500
 * (logged). A request its client ended (an aborted upload, a reset) is only counted: nobody is
 * left to answer, and a client can cause as many as it likes.
 */
function answerError(ctx: ServiceContext, response: ServerResponse, request: IncomingMessage, pathname: string, error: unknown): void {
  const gone = clientGoneCode(error);
  if (gone !== undefined) {
    clientGoneOf(ctx).count(gone, pathname);
    response.destroy();
    return;
  }
  const { status, body } = errorReply(error);
  if (status === 400 || status === 413) ctx.events.emit('rejected', { via: 'http', reason: String(body.message) });
  if (status >= 500) {
    ctx.events.emit('storeError', { kind: String(body.code ?? body.error) });
    if (status !== 503) ctx.logger.error({ err: error, path: pathname }, 'request failed');
  }
  if (response.headersSent) response.destroy();
  // The rest of the body is still arriving: answer first, then read it away before closing.
  else if (status === 413) sendJsonAndLinger(request, response, status, body);
  else sendJson(response, status, body, error instanceof HttpError ? error.headers : {});
}

/** The decisions: envoy's `/json`, the friendlier `/v1/check`, and `/v1/limit` for one key. */
function addDecisionRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  addEnvoyRoute(ctx, routes);
  // Many checks in one request (check/batch.ts): one answer, 200, each check's result in order.
  routes.add('POST', '/v1/check/batch', async (request, response) => {
    const checks = readBatch(await readJson(request));
    const decided = decideBatch(ctx, checks);
    sendJson(response, 200, { results: decided instanceof Promise ? await decided : decided });
 }, 'public');

  routes.add('POST', '/v1/check', async (request, response) => {
    const checkRequest = friendlyCheck(await readJson(request));
    const result = await decideCheck(ctx, checkRequest, 'check');
    const answer = checkAnswer(ctx, checkRequest, result);
    if ('error' in answer) return sendJson(response, 503, UNAVAILABLE_ANSWER, { [DEGRADED_HEADER]: answer.degraded, 'retry-after': '1' });
    const headers = checkHeaders(result);
    if (answer.degraded !== undefined) headers[DEGRADED_HEADER] = answer.degraded;
    sendJson(response, result.overallCode === 'OK' ? 200 : 429, answer, headers);
 }, 'public');

  routes.add('POST', '/v1/limit', async (request, response) => {
    const body = await readJson(request);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, `the body must be { key, policy, cost? }, got ${describeValue(body)}`);
    const { key, policy, cost, ...rest } = body as { key?: unknown; policy?: unknown; cost?: unknown };
    if (Object.keys(rest).length > 0) throw new HttpError(400, `unknown field ${JSON.stringify(Object.keys(rest)[0])}; the fields are key, policy, cost`);
    // Any window a request names is taken: no table fills up with them (policy.ts, CompiledPolicy.stateId).
    const compiled = compilePolicy(policy as Policy);
    const started = performance.now();
    const blockedFor = typeof key === 'string' ? ctx.blocks.remaining(key, ctx.clock()) : 0;
    if (blockedFor > 0) {
      const now = ctx.clock();
      const blocked = { allowed: false, limit: compiled.nominalCapacity, remaining: 0, resetAt: now + blockedFor, retryAfter: blockedFor, now };
      announceLimit(ctx, key as string, blocked, started, true);
      sendJson(response, 429, { ...blocked, reason: 'blocked' }, decisionHeaders(blocked, compiled.windowMs, key as string));
      return;
    }
    const decision = await ctx.limiter.limit(key as string, compiled, cost === undefined ? {} : { cost: cost as number });
    announceLimit(ctx, key as string, decision, started);
    const degraded = degradedAnswer(ctx, degradedReasonOf(decision));
    if (degraded?.unavailable === true) return sendJson(response, 503, UNAVAILABLE_ANSWER, { [DEGRADED_HEADER]: degraded.reason, 'retry-after': '1' });
    const headers = decisionHeaders(decision, compiled.windowMs, key as string);
    if (degraded !== undefined) headers[DEGRADED_HEADER] = degraded.reason;
    sendJson(response, decision.allowed ? 200 : 429, decision, headers);
 }, 'public');
}

/** envoy's `/json` (issue 32: the hot path). */
function addEnvoyRoute(ctx: ServiceContext, routes: HttpRoutes): void {
  // envoy's /json: the RateLimitResponse as its body, 429 when over the limit; rate-limit headers
  // (in the body's responseHeadersToAdd and as HTTP headers) only with --response-headers, but
  // tollgate-blocked whenever a block refused the check.
  // The service's settings do not change while it runs: its response options are read once.
  const envoyOptions = envoyResponseOptions(ctx);
  // The hot path (issue 32): no promise between the body and the answer when the store answers
  // synchronously, the envoy request used as parsed when it is plain, the answer's JSON written
  // straight from the result with no object in between (check/envoy.ts); a plain route whose
  // callbacks are made here once, the body read by one listener per request (http/body.ts).
  const fail = (request: IncomingMessage, response: ServerResponse, error: unknown): void => answerError(ctx, response, request, '/json', error);
  const route: JsonRoute = {
    then: (request, response, body) => {
      const checkRequest = envoyCheckOf(body);
      const decided = decideCheck(ctx, checkRequest, 'json');
      if (!(decided instanceof Promise)) return answerEnvoy(ctx, response, checkRequest, decided, envoyOptions);
      decided.then((result) => answerEnvoy(ctx, response, checkRequest, result, envoyOptions)).catch((error: unknown) => fail(request, response, error));
    },
    fail,
  };
  routes.addPlain('POST', '/json', (request, response) => readJsonThen(request, response, route), 'public');
}

/** envoy's answer to a decided `/json` check: 200 or 429 (503 when refused as unavailable), the headers `options` ask for. */
function answerEnvoy(ctx: ServiceContext, response: ServerResponse, checkRequest: CheckRequest, result: CheckResult, options: EnvoyResponseOptions): void {
  const degraded = degradedAnswer(ctx, result.degraded);
  if (degraded?.unavailable === true) return sendJson(response, 503, UNAVAILABLE_ANSWER, { [DEGRADED_HEADER]: degraded.reason, 'retry-after': '1' });
  const status = result.overallCode === 'OK' ? 200 : 429;
  const text = envoyResponseText(result, checkRequest, options);
  const added = responseHeadersOf(result, options);
  if (added.length === 0 && degraded === undefined) return sendJsonText(response, status, text);
  const headers: Record<string, string> = {};
  for (const { key, value } of added) headers[key] = value;
  if (degraded !== undefined) headers[DEGRADED_HEADER] = degraded.reason;
  sendJsonText(response, status, text, headers);
}

/** Reserve then settle (check/reserve.ts): `/v1/reserve` and `/v1/settle`, beside `/v1/limit`. */
function addReservationRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  const send = (response: ServerResponse, answer: RouteAnswer): void => sendJson(response, answer.status, answer.body, answer.headers);
  routes.add('POST', '/v1/reserve', async (request, response) => send(response, await answerReserve(ctx, await readJson(request))), 'public');
  routes.add('POST', '/v1/settle', async (request, response) => send(response, await answerSettle(ctx, await readJson(request))), 'public');
}

/** Concurrency slots: `/v1/acquire` and `/v1/release` (check/acquire.ts). */
function addSlotRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  const reply = (response: ServerResponse, { status, body, headers }: SlotReply): void => sendJson(response, status, body, headers);
  routes.add('POST', '/v1/acquire', async (request, response) => reply(response, await answerAcquire(ctx, await readJson(request))), 'public');
  routes.add('POST', '/v1/release', async (request, response) => reply(response, await answerRelease(ctx, await readJson(request))), 'public');
}

/** Liveness and readiness: on both listeners, for probes that reach the pod's address. */
export function addHealthRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/healthz', (_request, response) => sendJson(response, 200, { status: 'ok', uptimeMs: Date.now() - ctx.startedAt }), 'public');

  routes.add('GET', '/readyz', async (_request, response) => {
    const { ready, status, notReady, details } = await ctx.readiness();
    sendJson(response, ready ? 200 : 503, { status, ...(ready ? {} : { notReady }), ...details });
 }, 'public');
}
