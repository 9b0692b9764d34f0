/**
 * One request through the gateway: the first route that takes it (none: 404, as envoy), the
 * descriptors of its rate-limit actions, ONE check through the service's decision path
 * (`decideCheck`: blocked keys, the limiter, the metrics event), then the middleware's answer
 * (`applyVerdict`: the same headers and 429 body), and, when admitted, now or after its shaping
 * delay, the upstream.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { TollgateError } from '../errors.js';
import { checkReports } from '../http/headers.js';
import { UNAVAILABLE_BODY, type HeaderList, type LimitReport } from '../http/report.js';
import { applyVerdict, type Verdict, type VerdictActions } from '../http/verdict.js';
import type { CheckRequest, CheckResult } from '../rules/check.js';
import { decideCheck, degradedAnswer, errorReply, type ServiceContext } from '../service/index.js';
import { DEFERRED_STATUS_PREFIX } from './defer/config.js';
import { answerTicket, deferRequest } from './defer/answers.js';
import { normalizeTarget } from './paths.js';
import { forward } from './proxy.js';
import { sendJson, sendText } from './reply.js';
import type { GatewayRoute, GatewayState } from './state.js';
import { GatewayRequest, repeatedHeader } from './request.js';
import { descriptorsOf, findRoute } from './routes.js';

/** One exchange as the verdict actions see it. */
interface Exchange {
  readonly state: GatewayState;
  readonly route: GatewayRoute;
  readonly request: GatewayRequest;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** A defer route's request that limits refused on a decision the store made: stored, not refused. */
  readonly deferrable?: boolean;
  /** Headers the waiting room adds to the forwarded answer (its place cookie). */
  readonly roomHeaders?: HeaderList;
}

/** Handles one request; never throws (every failure is answered). */
export function handleRequest(state: GatewayState, req: IncomingMessage, res: ServerResponse): void {
  const normalized = normalizeTarget(req.url ?? '/', state.paths);
  if (normalized.kind === 'refuse') return badRequest(state, res, normalized.reason);
  if (normalized.kind === 'redirect') {
    // envoy's UNESCAPE_AND_REDIRECT: the client asks again for the unescaped path, and every party on the way sees that one.
    sendJson(res, 307, { error: 'redirect', message: `escaped slashes are unescaped: ask for ${normalized.target}` }, [['location', normalized.target]]);
    return;
  }
  // The upstream gets the path the routes matched (forward, and a deferred request, read req.url).
  req.url = normalized.target;
  const request = new GatewayRequest(req);
  if (state.deferral !== undefined && request.path.startsWith(DEFERRED_STATUS_PREFIX)) {
    answerTicket(state.deferral, request.method, request.path, res);
    return;
  }
  const route = findRoute(state.routes, request);
  if (route === undefined) {
    sendJson(res, 404, { error: 'not_found', message: `no route takes ${request.method} ${request.path}; the gateway's routes are in its configuration (docs/gateway.md)` });
    return;
  }
  const repeated = repeatedHeader(req.rawHeaders, route.countedHeaders);
  if (repeated !== undefined) return badRequest(state, res, `the header ${repeated} comes more than once; a rate limit counts it, so send it once`);
  const exchange: Exchange = { state, route, request, req, res };
  // The waiting room first: only a request of an active session reaches the rate limits.
  if (route.waitingRoom !== undefined && state.waitingRooms !== undefined) {
    state.waitingRooms.gate(route.waitingRoom, req, res, (roomHeaders) => limit(roomHeaders.length === 0 ? exchange : { ...exchange, roomHeaders }));
    return;
  }
  limit(exchange);
}

/** The route's rate limits decide the request (no descriptor: it passes). */
function limit(exchange: Exchange): void {
  const { state, route, request } = exchange;
  const descriptors = route.domain === undefined ? [] : descriptorsOf(route.beforeLimits, route, request, state);
  if (descriptors.length === 0) {
    pass(exchange, []);
    return;
  }
  let decided: CheckResult | Promise<CheckResult>;
  try {
    decided = decide(state.context, route, { domain: route.domain!, descriptors });
  } catch (error) {
    failed(exchange, error);
    return;
  }
  if (decided instanceof Promise) decided.then((result) => answer(exchange, result), (error: unknown) => failed(exchange, error));
  else answer(exchange, decided);
}

/** A request the gateway cannot take as sent: 400, counted as the service counts rejected input. */
function badRequest(state: GatewayState, res: ServerResponse, reason: string): void {
  state.context.events.emit('rejected', { via: 'http', reason });
  sendJson(res, 400, { error: 'bad_request', message: reason });
}

function decide(context: ServiceContext, route: GatewayRoute, request: CheckRequest): CheckResult | Promise<CheckResult> {
  return decideCheck(context, request, 'gateway', route.onLimit === 'shape' ? { maxDelayMs: route.maxDelayMs } : undefined);
}

/** Acts on a check's result as the middleware acts on its verdict. */
function answer(exchange: Exchange, result: CheckResult): void {
  const degraded = degradedAnswer(exchange.state.context, result.degraded);
  const allowed = result.overallCode === 'OK';
  let reports: LimitReport[] = checkReports(result);
  // Denied with no limit to report (an operator's block): say when to come back all the same.
  if (!allowed && reports.length === 0) reports = [blockedReport(result)];
  const verdict: Verdict = {
    reports: reports.length === 0 ? undefined : reports,
    allowed,
    delayMs: allowed && exchange.route.onLimit === 'shape' ? shapingDelay(result) : 0,
    now: result.now,
    ...(degraded !== undefined ? { degraded: degraded.reason, unavailable: degraded.unavailable } : {}),
  };
  // A degraded refusal (the store could not decide) is answered as on any route: the queue lives in the same Redis.
  const deferrable = exchange.route.onLimit === 'defer' && exchange.state.deferral !== undefined && result.degraded === undefined;
  applyVerdict(exchange.state.answer, verdict, deferrable ? { ...exchange, deferrable } : exchange, GATEWAY_ACTIONS);
}

/** The longest queue wait among the request's leaky-bucket limits. */
function shapingDelay(result: CheckResult): number {
  let delay = 0;
  for (const status of result.statuses) if (status.delay !== undefined && status.delay > delay) delay = status.delay;
  return delay;
}

function blockedReport(result: CheckResult): LimitReport {
  const wait = Math.max(1, ...result.statuses.map((status) => status.retryAfter ?? status.durationUntilReset));
  return { name: 'blocked', limit: 0, windowMs: wait, remaining: 0, resetAt: result.now + wait, allowed: false, retryAfter: wait, partitionKey: 'blocked' };
}

const ENVOY_RATELIMITED: [string, string] = ['x-envoy-ratelimited', 'true'];

const GATEWAY_ACTIONS: VerdictActions<Exchange, void> = {
  reportsHolder: (x) => x.req,
  accept: (x) => x.req.headers.accept,
  unavailable: (x, headers) => sendText(x.res, 503, 'application/json; charset=utf-8', UNAVAILABLE_BODY, headers),
  skip: (x) => pass(x, []),
  admit: (x, headers, delayMs) => {
    if (delayMs === 0) return pass(x, headers);
    // Shaping: the request waits its turn; a client that left meanwhile is not forwarded.
    setTimeout(() => {
      if (!x.res.destroyed && !x.res.writableEnded) pass(x, headers);
    }, delayMs);
  },
  // envoy's rate-limit filter marks its 429s so routers do not retry them: so does the gateway.
  refuse: (x, headers, info) => {
    const refuse = (): void => sendText(x.res, 429, info.body.contentType, x.req.method === 'HEAD' ? '' : info.body.text, [...(x.roomHeaders ?? []), ...headers, ENVOY_RATELIMITED]);
    if (x.deferrable === true) deferRequest(x.state.deferral!, x.route, x.req, x.res, headers, refuse);
    else refuse();
  },
};

/** Forwards the request; then sends the route's stream-done descriptors, which only count. */
function pass(exchange: Exchange, headers: HeaderList): void {
  const { state, route, req, res } = exchange;
  // The client waits for this before sending its body (a refused request never sends it).
  if (req.headers.expect?.toLowerCase() === '100-continue') res.writeContinue();
  const extraHeaders = exchange.roomHeaders === undefined ? headers : [...exchange.roomHeaders, ...headers];
  // The route is the forwarding options (nothing built per request); a callback only for stream-done limits.
  const done = route.afterLimits.length === 0 || route.domain === undefined ? undefined : () => countAfter(exchange);
  forward(state.upstreams.pool(route.upstream), req, res, route, extraHeaders, done);
}

/** The route's stream-done descriptors, sent once the response is over: they only count. */
function countAfter(exchange: Exchange): void {
  const { state, route } = exchange;
  const descriptors = descriptorsOf(route.afterLimits, route, exchange.request, state);
  if (descriptors.length === 0) return;
  try {
    const counted = decide(state.context, route, { domain: route.domain!, descriptors });
    if (counted instanceof Promise) counted.catch((error: unknown) => state.context.logger.warn({ err: error }, 'a stream-done rate limit could not be counted'));
  } catch (error) {
    state.context.logger.warn({ err: error }, 'a stream-done rate limit could not be counted');
  }
}

/**
 * A check that threw: bad input from the request (a header value too long for a key) is the
 * client's 400; anything else is a store failure the limiter did not answer, and the service's
 * failure mode decides (closed refuses with 503, open and local pass).
 */
function failed(exchange: Exchange, error: unknown): void {
  const { status, body } = errorReply(error);
  const { context } = exchange.state;
  if (status === 400) {
    context.events.emit('rejected', { via: 'http', reason: String(body.message) });
    sendJson(exchange.res, 400, body);
    return;
  }
  context.logger.error({ err: error, route: exchange.route.where }, error instanceof TollgateError ? 'the rate limit check failed' : 'the gateway failed deciding a request');
  if (context.options.failureMode === 'closed') sendText(exchange.res, 503, 'application/json; charset=utf-8', UNAVAILABLE_BODY, [['retry-after', '1']]);
  else pass(exchange, []);
}
