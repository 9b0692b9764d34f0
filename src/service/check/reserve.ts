/**
 * `POST /v1/reserve` and `POST /v1/settle` (docs/service.md): reserve then settle for callers in
 * any language, through the service's limiter like `/v1/limit`. A reserve answers as `/v1/limit`
 * does (200 admitted, 429 refused, rate-limit headers, a degraded answer said in a header); a
 * settle answers 200 with what it did, and 503 when the store is down (safe to retry: once per id).
 */
import type { Decision } from '../../decision.js';
import { describeValue, InvalidOptionError } from '../../errors.js';
import { decisionHeaders } from '../../http/headers.js';
import { degradedReasonOf } from '../../limiter/index.js';
import { compilePolicy, type CompiledPolicy, type Policy } from '../../policy.js';
import type { ServiceContext, SettleEvent } from '../context.js';
import { validateReservationRequest } from '../../rules/reservations.js';
import { byRules, descriptorsOf } from './acquire.js';
import { LIMIT_API } from './outcomes.js';
import { DEGRADED_HEADER, UNAVAILABLE_ANSWER, announce, announceLimit, blockedResult, degradedAnswer } from './decide.js';

/** What a route answers: its status, JSON body and headers. */
export interface RouteAnswer {
  readonly status: number;
  readonly body: object;
  readonly headers: Record<string, string>;
}

const RESERVE_FIELDS = ['key', 'policy', 'cost', 'id', 'ttl'] as const;
const SETTLE_FIELDS = ['key', 'policy', 'id', 'cost'] as const;
const RULES_RESERVE_FIELDS = ['domain', 'descriptors', 'cost', 'id', 'ttl'] as const;
const RULES_SETTLE_FIELDS = ['domain', 'descriptors', 'id', 'cost'] as const;

/** The body's fields, every one of them named in `fields` (a misspelt field is a 400, never ignored). */
function fieldsOf<F extends string>(body: unknown, fields: readonly F[], route: string): Partial<Record<F, unknown>> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidOptionError(`${route}: the body must be { ${fields.join(', ')} }, got ${describeValue(body)}`);
  }
  const unknown = Object.keys(body).find((name) => !(fields as readonly string[]).includes(name));
  if (unknown !== undefined) throw new InvalidOptionError(`${route}: unknown field ${JSON.stringify(unknown)}; the fields are ${fields.join(', ')}`);
  return body as Partial<Record<F, unknown>>;
}

/**
 * `POST /v1/reserve` with `{ domain, descriptors, cost, id, ttl? }`: the estimate on every limit the
 * rules match, all or nothing (rules/reservations.ts); 200 reserved, 429 refused (nothing kept,
 * `Retry-After` the longest wait of the refusing limits), as is an entry blocked by hand.
 */
async function answerRulesReserve(ctx: ServiceContext, body: unknown): Promise<RouteAnswer> {
  const { domain, descriptors, cost, id, ttl } = fieldsOf(body, RULES_RESERVE_FIELDS, 'POST /v1/reserve');
  const request = { domain: domain as string, descriptors: descriptorsOf(descriptors), cost: cost as number, id: id as string, ...(ttl === undefined ? {} : { ttl: ttl as number }) };
  // An entry blocked by hand is refused as /v1/check refuses it (a bad body is still a 400): nothing reserved, no store call.
  validateReservationRequest(request, 'reserveCheck');
  const started = performance.now();
  const blocked = blockedResult(ctx, request);
  const result = blocked === undefined ? await ctx.limiter.reserveCheck(request) : { ...blocked, id: request.id };
  // Counted on /metrics and the dashboard as a check of the domain (each matched limit's rule).
  announce(ctx, request, result, 'check', started);
  const degraded = degradedAnswer(ctx, result.degraded);
  if (degraded?.unavailable === true) return { status: 503, body: UNAVAILABLE_ANSWER, headers: { [DEGRADED_HEADER]: degraded.reason, 'retry-after': '1' } };
  const waits = result.statuses.map((status) => (status.code === 'OVER_LIMIT' ? (status.retryAfter ?? status.durationUntilReset) : 0));
  const headers: Record<string, string> = result.overallCode === 'OK' ? {} : { 'retry-after': String(Math.ceil(Math.max(0, ...waits) / 1000)) };
  if (degraded !== undefined) headers[DEGRADED_HEADER] = degraded.reason;
  return { status: result.overallCode === 'OK' ? 200 : 429, body: result, headers };
}

/** `POST /v1/reserve` with `{ key, policy, cost, id, ttl? }`, or the rules' form. */
export async function answerReserve(ctx: ServiceContext, body: unknown): Promise<RouteAnswer> {
  if (byRules(body)) return answerRulesReserve(ctx, body);
  const { key, policy, cost, id, ttl } = fieldsOf(body, RESERVE_FIELDS, 'POST /v1/reserve');
  const compiled = compilePolicy(policy as Policy);
  const started = performance.now();
  // A key blocked by hand is refused as /v1/limit refuses it: nothing reserved, no store call.
  const blockedFor = typeof key === 'string' ? ctx.blocks.remaining(key, ctx.clock()) : 0;
  if (blockedFor > 0) return refusedAsBlocked(ctx, key as string, compiled, blockedFor, started);
  const options = { cost: cost as number, id: id as string, ...(ttl === undefined ? {} : { ttl: ttl as number }) };
  const decision: Decision = await ctx.limiter.reserve(key as string, compiled, options);
  announceLimit(ctx, key as string, decision, started);
  const degraded = degradedAnswer(ctx, degradedReasonOf(decision));
  if (degraded?.unavailable === true) return { status: 503, body: UNAVAILABLE_ANSWER, headers: { [DEGRADED_HEADER]: degraded.reason, 'retry-after': '1' } };
  const headers = decisionHeaders(decision, compiled.windowMs, key as string);
  if (degraded !== undefined) headers[DEGRADED_HEADER] = degraded.reason;
  return { status: decision.allowed ? 200 : 429, body: decision, headers };
}

function refusedAsBlocked(ctx: ServiceContext, key: string, policy: CompiledPolicy, blockedFor: number, started: number): RouteAnswer {
  const now = ctx.clock();
  const decision: Decision = { allowed: false, limit: policy.nominalCapacity, remaining: 0, resetAt: now + blockedFor, retryAfter: blockedFor, now };
  announceLimit(ctx, key, decision, started, true);
  return { status: 429, body: { ...decision, reason: 'blocked' }, headers: decisionHeaders(decision, policy.windowMs, key) };
}

/** `POST /v1/settle` with `{ key, policy, id, cost }`: the settlement, with the quota after it; or `{ domain, descriptors, id, cost }`: one per matched limit. */
export async function answerSettle(ctx: ServiceContext, body: unknown): Promise<RouteAnswer> {
  if (byRules(body)) {
    const { domain, descriptors, id, cost } = fieldsOf(body, RULES_SETTLE_FIELDS, 'POST /v1/settle');
    const result = await ctx.limiter.settleCheck({ domain: domain as string, descriptors: descriptorsOf(descriptors), id: id as string, cost: cost as number });
    announceSettle(ctx, { domain: domain as string, limits: result.statuses.flatMap((status) => (status === null ? [] : [{ rule: status.rule, status: status.status }])) });
    return { status: 200, body: result, headers: {} };
  }
  const { key, policy, id, cost } = fieldsOf(body, SETTLE_FIELDS, 'POST /v1/settle');
  const compiled = compilePolicy(policy as Policy);
  const settlement = await ctx.limiter.settle(key as string, compiled, { id: id as string, cost: cost as number });
  announceSettle(ctx, { domain: LIMIT_API, limits: [{ rule: LIMIT_API, status: settlement.status }] });
  return { status: 200, body: settlement, headers: decisionHeaders(settlement.decision, compiled.windowMs, key as string) };
}

/** Tells the metrics what a settle did (a failing listener never fails the settle). */
function announceSettle(ctx: ServiceContext, event: SettleEvent): void {
  try {
    ctx.events.emit('settle', event);
  } catch (error) {
    ctx.logger.error({ err: error }, 'a settle listener failed');
  }
}
