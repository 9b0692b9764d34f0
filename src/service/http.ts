/**
 * The HTTP API: envoy's `/json`, Tollgate's `/v1/check` and `/v1/limit`, health, rules and admin.
 * node:http with a table of routes: per-request overhead is a map lookup. Other modules (metrics,
 * dashboard) add routes with {@link HttpRoutes.add}.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { InvalidCheckError, describeValue } from '../errors.js';
import { checkHeaders, decisionHeaders } from '../http/headers.js';
import { compilePolicy, type Policy } from '../policy.js';
import type { CheckRequest } from '../rules/check.js';
import { parseRules } from '../rules/parse.js';
import { compileRules } from '../rules/ruleset.js';
import type { ServiceContext } from './context.js';
import { degradedReasonOf } from '../fault/failure-mode.js';
import { DEGRADED_HEADER, UNAVAILABLE_ANSWER, announceLimit, decideCheck, degradedAnswer } from './decide.js';
import { adminRoute } from './admin-auth.js';
import { blockScope } from './blocks.js';
import { closeSilentConnections } from './http-close.js';
import { envoyResponseOptions, fromEnvoyRequest, responseHeadersOf, toEnvoyResponse } from './envoy.js';
import { HttpError, MAX_BODY_BYTES, errorReply, readBody, readJson, sendJson, sendJsonAndLinger } from './http-util.js';

/** A route's handler; `url()` parses the request's URL (its query) when the handler needs it. */
export type RouteHandler = (request: IncomingMessage, response: ServerResponse, url: () => URL) => Promise<void> | void;

/** A path made of these characters routes as it is; anything else is normalised by `new URL` first. */
const PLAIN_PATH = /^(?:\/[A-Za-z0-9_-]+)+$|^\/$/;

/** How often node:http checks the headers and request timeouts: a short configured timeout is kept within a fraction of itself. */
function checkingInterval(headersTimeoutMs: number): number {
  return Math.min(1_000, Math.max(50, Math.floor(headersTimeoutMs / 4)));
}

/** Routes by `METHOD /path`. */
export class HttpRoutes {
  private readonly routes = new Map<string, RouteHandler>();

  add(method: string, path: string, handler: RouteHandler): void {
    this.routes.set(`${method} ${path}`, handler);
  }

  find(method: string, path: string): RouteHandler | undefined {
    return this.routes.get(`${method} ${path}`);
  }

  /** The methods that serve `path` (none: a 404, some: a 405). */
  methods(path: string): string[] {
    const methods: string[] = [];
    for (const route of this.routes.keys()) if (route.endsWith(` ${path}`)) methods.push(route.slice(0, route.indexOf(' ')));
    return methods;
  }
}

/** Creates the HTTP server with the core routes. */
export function createHttpServer(ctx: ServiceContext, routes: HttpRoutes = new HttpRoutes()): { server: Server; routes: HttpRoutes } {
  addCoreRoutes(ctx, routes);
  // Slow-loris: a client that trickles its headers or body is cut off (408) instead of holding a
  // socket; the timeouts are checked every second or sooner (Node's default is every 30 s).
  const onRequest = (request: IncomingMessage, response: ServerResponse): void => {
    const target = request.url ?? '/';
    let parsed: URL | undefined;
    const url = (): URL => (parsed ??= new URL(target, 'http://tollgate'));
    const query = target.indexOf('?');
    const path = query === -1 ? target : target.slice(0, query);
    const pathname = PLAIN_PATH.test(path) ? path : url().pathname;
    const handler = routes.find(request.method ?? 'GET', pathname);
    if (handler === undefined) return notServed(routes, request, response, pathname);
    const fail = (error: unknown): void => answerError(ctx, response, request, pathname, error);
    try {
      handler(request, response, url)?.catch(fail);
    } catch (error) {
      fail(error);
    }
  };
  const { keepAliveTimeoutMs, headersTimeoutMs, requestTimeoutMs, maxRequestsPerSocket } = ctx.options.connections;
  const server = createServer(
    { connectionsCheckingInterval: checkingInterval(headersTimeoutMs), headersTimeout: headersTimeoutMs, requestTimeout: requestTimeoutMs, keepAliveTimeout: keepAliveTimeoutMs },
    onRequest,
  );
  // 0: no cap. Past the cap, node answers with `Connection: close` and the client reconnects.
  server.maxRequestsPerSocket = maxRequestsPerSocket;
  // A connection that never sends a byte is not reliably followed by the headers timeout: close it after as long.
  closeSilentConnections(server, headersTimeoutMs);
  // `Expect: 100-continue` with a body declared too large: answer the 413 without inviting the body.
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    if (Number(request.headers['content-length'] ?? 0) <= MAX_BODY_BYTES) response.writeContinue();
    onRequest(request, response);
  });
  return { server, routes };
}

/** 404 for a path no route serves, 405 (with Allow) for a method its routes do not take. */
function notServed(routes: HttpRoutes, request: IncomingMessage, response: ServerResponse, pathname: string): void {
  const methods = routes.methods(pathname);
  const error =
    methods.length > 0
      ? new HttpError(405, `${request.method} ${pathname} is not served; ${pathname} takes ${methods.join(', ')}`)
      : new HttpError(404, `${request.method} ${pathname} is not served; see docs/service.md for the endpoints`);
  sendJson(response, error.status, error.body(), methods.length > 0 ? { allow: methods.join(', ') } : {});
  request.resume();
}

/** Answers an error a handler threw: 4xx for the client's mistakes, 503 for the store, else 500 (logged). */
function answerError(ctx: ServiceContext, response: ServerResponse, request: IncomingMessage, pathname: string, error: unknown): void {
  const { status, body } = errorReply(error);
  if (status === 400 || status === 413) ctx.events.emit('rejected', { via: 'http', reason: String(body.message) });
  if (status >= 500) {
    ctx.events.emit('storeError', { kind: String(body.code ?? body.error) });
    if (status !== 503) ctx.logger.error({ err: error, path: pathname }, 'request failed');
  }
  if (response.headersSent) response.destroy();
  // The rest of the body is still arriving: answer first, then read it away before closing.
  else if (status === 413) sendJsonAndLinger(request, response, status, body);
  else sendJson(response, status, body);
}

function addCoreRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  addDecisionRoutes(ctx, routes);
  addHealthRoutes(ctx, routes);
  addRulesRoutes(ctx, routes);
  addKeyRoutes(ctx, routes);
}

/** The decisions: envoy's `/json`, the friendlier `/v1/check`, and `/v1/limit` for one key. */
function addDecisionRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  // envoy's /json: the RateLimitResponse as its body, 429 when over the limit; rate-limit headers
  // (in the body's responseHeadersToAdd and as HTTP headers) only with --response-headers.
  // The service's settings do not change while it runs: its response options are read once.
  const envoyOptions = envoyResponseOptions(ctx);
  routes.add('POST', '/json', async (request, response) => {
    const checkRequest = fromEnvoyRequest(await readJson(request));
    const decided = decideCheck(ctx, checkRequest, 'json');
    const result = decided instanceof Promise ? await decided : decided;
    const degraded = degradedAnswer(ctx, result.degraded);
    if (degraded?.unavailable === true) return sendJson(response, 503, UNAVAILABLE_ANSWER, { [DEGRADED_HEADER]: degraded.reason, 'retry-after': '1' });
    const headers: Record<string, string> = {};
    if (envoyOptions.headers !== undefined) for (const { key, value } of responseHeadersOf(result, envoyOptions)) headers[key] = value;
    if (degraded !== undefined) headers[DEGRADED_HEADER] = degraded.reason;
    sendJson(response, result.overallCode === 'OK' ? 200 : 429, toEnvoyResponse(result, checkRequest, envoyOptions), headers);
  });

  routes.add('POST', '/v1/check', async (request, response) => {
    const result = await decideCheck(ctx, friendlyCheck(await readJson(request)), 'check');
    const { overallCode, statuses } = result;
    const degraded = degradedAnswer(ctx, result.degraded);
    if (degraded?.unavailable === true) return sendJson(response, 503, UNAVAILABLE_ANSWER, { [DEGRADED_HEADER]: degraded.reason, 'retry-after': '1' });
    const headers = checkHeaders(result);
    if (degraded !== undefined) headers[DEGRADED_HEADER] = degraded.reason;
    sendJson(response, overallCode === 'OK' ? 200 : 429, { overallCode, statuses, ...(degraded !== undefined ? { degraded: degraded.reason } : {}) }, headers);
  });

  routes.add('POST', '/v1/limit', async (request, response) => {
    const body = await readJson(request);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, `the body must be { key, policy, cost? }, got ${describeValue(body)}`);
    const { key, policy, cost, ...rest } = body as { key?: unknown; policy?: unknown; cost?: unknown };
    if (Object.keys(rest).length > 0) throw new HttpError(400, `unknown field ${JSON.stringify(Object.keys(rest)[0])}; the fields are key, policy, cost`);
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
  });
}

/** Liveness and readiness. */
function addHealthRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/healthz', (_request, response) => sendJson(response, 200, { status: 'ok', uptimeMs: Date.now() - ctx.startedAt }));

  routes.add('GET', '/readyz', async (_request, response) => {
    const { ready, status, notReady, details } = await ctx.readiness();
    sendJson(response, ready ? 200 : 503, { status, ...(ready ? {} : { notReady }), ...details });
  });
}

/** The rules in force, and replacing domains (admin). */
function addRulesRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/v1/rules', (_request, response) => {
    const rules = ctx.holder.current;
    sendJson(response, 200, {
      version: rules.version,
      domains: rules.domainNames(),
      ...(ctx.watcher !== undefined ? { files: ctx.watcher.status() } : {}),
      ...(ctx.sync !== undefined ? { pushed: ctx.sync.status() } : {}),
    });
  });

  // envoy's /rlconfig: the limits in force, one per line.
  routes.add('GET', '/rlconfig', (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
    response.end(ctx.holder.current.dump());
  });

  routes.add('PUT', '/v1/rules', adminRoute(ctx, 'rules.push', async (request, response, _url, subject) => {
    const yaml = await readBody(request);
    if (ctx.sync !== undefined) {
      const { version, domains, skipped } = await ctx.sync.publish(yaml, 'PUT /v1/rules');
      subject.domains = domains;
      if (skipped.length > 0) ctx.logger.warn({ skipped }, 'stored rules documents that every node skips; push those domains again');
      sendJson(response, 200, { pushed: version, domains, version: ctx.holder.current.version, skipped });
      return;
    }
    // No Redis: this node only.
    const parsed = parseRules(yaml, 'PUT /v1/rules');
    subject.domains = parsed.map((d) => d.domain);
    ctx.holder.replacePushed(ctx.holder.pushedRules().withDomains(compileRules(parsed, [yaml])));
    sendJson(response, 200, { domains: subject.domains, version: ctx.holder.current.version });
  }));
}

/** Inspecting, resetting and blocking keys (admin). */
function addKeyRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/v1/keys', adminRoute(ctx, undefined, async (_request, response, url) => {
    const { key, policy } = keyQuery(url());
    const decision = await ctx.limiter.peek(key, policy);
    sendJson(response, 200, { key, decision });
  }));

  routes.add('GET', '/v1/keys/blocked', adminRoute(ctx, undefined, (_request, response) => {
    sendJson(response, 200, { blocked: ctx.blocks.list() });
  }));

  routes.add('POST', '/v1/keys/block', adminRoute(ctx, 'keys.block', async (request, response, _url, subject) => {
    const body = (await readJson(request)) as { key?: unknown; ttlMs?: unknown; domain?: unknown } | null;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, `the body must be { key, ttlMs?, domain? }, got ${describeValue(body)}`);
    const key = body.key as string;
    if (typeof key === 'string') subject.key = key;
    // A block names its domain, or applies to all of them ("*", the default).
    const domain = blockScope(body.domain);
    subject.domains = [domain];
    const until = ctx.blocks.block(key, body.ttlMs === undefined ? 3_600_000 : (body.ttlMs as number), ctx.clock(), domain);
    sendJson(response, 200, { key, domain, blockedUntil: until });
  }));

  routes.add('DELETE', '/v1/keys/block', adminRoute(ctx, 'keys.unblock', (_request, response, url, subject) => {
    const key = url().searchParams.get('key');
    if (key === null) throw new HttpError(400, 'give the key to unblock: ?key=... (and &domain=... for a block of one domain)');
    subject.key = key;
    const domain = blockScope(url().searchParams.get('domain') ?? undefined);
    subject.domains = [domain];
    sendJson(response, 200, { key, domain, unblocked: ctx.blocks.unblock(key, domain) });
  }));

  routes.add('DELETE', '/v1/keys', adminRoute(ctx, 'keys.reset', async (_request, response, url, subject) => {
    const { key, policy } = keyQuery(url());
    subject.key = key;
    await ctx.limiter.reset(key, policy);
    sendJson(response, 200, { key, reset: true });
  }));
}


/**
 * `/v1/check` takes envoy's shape, or a friendlier one where a descriptor is a plain object of
 * key → value (in order): `{ domain, descriptors: [{ remote_address: "1.2.3.4" }], hits? }`.
 */
function friendlyCheck(body: unknown): CheckRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidCheckError(`the body must be { domain, descriptors, hits? }, got ${describeValue(body)}`);
  }
  const { domain, descriptors, hits, ...rest } = body as Record<string, unknown>;
  if (Object.keys(rest).length > 0) throw new InvalidCheckError(`unknown field ${JSON.stringify(Object.keys(rest)[0])}; the fields are domain, descriptors, hits`);
  if (!Array.isArray(descriptors)) throw new InvalidCheckError('descriptors must be an array');
  return {
    domain: domain as string,
    descriptors: descriptors.map((descriptor: unknown) => {
      if (typeof descriptor === 'object' && descriptor !== null && !Array.isArray(descriptor) && !('entries' in descriptor)) {
        return { entries: Object.entries(descriptor).map(([key, value]) => ({ key, value: value as string })) };
      }
      return descriptor as CheckRequest['descriptors'][number];
    }),
    ...(hits !== undefined ? { hits: hits as number } : {}),
  };
}

function keyQuery(url: URL): { key: string; policy: Policy } {
  const key = url.searchParams.get('key');
  const algorithm = url.searchParams.get('algorithm');
  const limit = url.searchParams.get('limit');
  const window = url.searchParams.get('window');
  if (key === null || algorithm === null || limit === null || window === null) {
    throw new HttpError(400, 'give key, algorithm, limit and window as query parameters, e.g. ?key=user:42&algorithm=token-bucket&limit=10&window=1s');
  }
  // precision (sliding-window's buckets) is optional: compilePolicy refuses what is not a number in range.
  const precision = url.searchParams.get('precision');
  const buckets = precision === null ? {} : { precision: /^\d+$/.test(precision) ? Number(precision) : (precision as unknown as number) };
  return { key, policy: { algorithm: algorithm as Policy['algorithm'], limit: Number(limit), window: /^\d+$/.test(window) ? Number(window) : window, ...buckets } };
}
