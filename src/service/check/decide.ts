/**
 * One check as the service answers it, over HTTP or gRPC: blocked entries first (denied without
 * touching the store), then the limiter, then an event for metrics and the dashboard.
 */
import type { Decision } from '../../decision.js';
import { degradedReasonOf, type DegradedReason } from '../../limiter/index.js';
import type { CheckOptions, CheckRequest, CheckResult, DescriptorStatus } from '../../rules/check.js';
import type { MaybePromise } from '../../store/types.js';
import type { CheckEvent, ServiceContext } from '../context.js';

/**
 * Decides a check and tells the listeners. The result itself when the store answers synchronously
 * (the memory store): no promise on that path. Bad input throws synchronously.
 */
export function decideCheck(ctx: ServiceContext, request: CheckRequest, via: CheckEvent['via'], extra?: Pick<CheckOptions, 'maxDelayMs'>): MaybePromise<CheckResult> {
  const started = performance.now();
  const blocked = blockedResult(ctx, request);
  if (blocked !== undefined) return announce(ctx, request, blocked, via, started);
  const { quotaMode, shadowMode } = ctx.options;
  const options = quotaMode || shadowMode ? { quotaMode, shadowMode, ...extra } : extra;
  const result = ctx.limiter.decideCheck(request, options);
  if (result instanceof Promise) return result.then((decided) => announce(ctx, request, decided, via, started));
  return announce(ctx, request, result, via, started);
}

/** Emits the check's event for metrics and the dashboard; returns `result` (reserve.ts too: a reserve through rules is counted as a check). */
export function announce(ctx: ServiceContext, request: CheckRequest, result: CheckResult, via: CheckEvent['via'], started: number): CheckResult {
  // Nobody listening (metrics and dashboard off): no event made at all.
  if (ctx.events.listenerCount('check') === 0) return result;
  try {
    ctx.events.emit('check', { domain: request.domain, result, keys: keysOf(result), via, durationMs: performance.now() - started });
  } catch (error) {
    // A failing listener (metrics, dashboard) must never fail the decision.
    ctx.logger.error({ err: error }, 'a check listener failed');
  }
  return result;
}

/** The event's key per status: its counter key, else its rule (a loop: no closure per check). */
function keysOf(result: CheckResult): (string | undefined)[] {
  const keys: (string | undefined)[] = [];
  for (const status of result.statuses) keys.push(status.key ?? status.rule);
  return keys;
}

/**
 * Tells the listeners about a `POST /v1/limit` decision, as a check of one status (`via: 'limit'`;
 * metrics and the dashboard label it `(v1/limit)`): the key is the caller's, never a label.
 */
export function announceLimit(ctx: ServiceContext, key: string, decision: Decision, started: number, blocked = false): void {
  const status: DescriptorStatus = {
    code: decision.allowed ? 'OK' : 'OVER_LIMIT',
    // Only requestsPerUnit is read (near-limit); the unit is not the policy's.
    currentLimit: { requestsPerUnit: decision.limit, unit: 'second', unitMultiplier: 1 },
    limitRemaining: decision.remaining,
    durationUntilReset: Math.max(0, decision.resetAt - decision.now),
    rule: blocked ? 'blocked' : undefined,
    key,
    // A penalty (the policy's blockDuration), or an operator's block: the answers say blocked.
    ...(blocked || decision.reason === 'blocked' ? { blocked: true as const } : {}),
    ...(decision.blockStarted === true ? { blockStarted: true as const } : {}),
  };
  const degraded = degradedReasonOf(decision);
  const result: CheckResult = { overallCode: status.code, statuses: [status], now: decision.now, ...(degraded !== undefined ? { degraded } : {}) };
  announce(ctx, LIMIT_REQUEST, result, 'limit', started);
}

/** What a `/v1/limit` decision's event names as its request: no domain, no descriptors (made once). */
const LIMIT_REQUEST: CheckRequest = { domain: '', descriptors: [] };

/** The answer when an entry of the request is blocked: every blocked descriptor over limit (reserve.ts too). */
export function blockedResult(ctx: ServiceContext, request: CheckRequest): CheckResult | undefined {
  if (ctx.blocks.size === 0 || !Array.isArray(request.descriptors)) return undefined;
  const now = ctx.clock();
  let blocked = false;
  const statuses = request.descriptors.map((descriptor): DescriptorStatus => {
    let longest = 0;
    for (const entry of Array.isArray(descriptor?.entries) ? descriptor.entries : []) {
      longest = Math.max(longest, ctx.blocks.remaining(`${entry?.key}=${entry?.value}`, now, request.domain));
    }
    if (longest === 0) return { code: 'OK', limitRemaining: 0, durationUntilReset: 0 };
    blocked = true;
    return { code: 'OVER_LIMIT', limitRemaining: 0, durationUntilReset: longest, retryAfter: longest, rule: 'blocked', blocked: true };
  });
  return blocked ? { overallCode: 'OVER_LIMIT', statuses, now } : undefined;
}

/** The header (HTTP) and metadata key (gRPC) naming the failure mode that answered a degraded check. */
export const DEGRADED_HEADER = 'tollgate-degraded';

/** The body of a check refused by `closed` with `--fail-closed-status 503`. */
export const UNAVAILABLE_ANSWER = Object.freeze({
  error: 'rate_limiter_unavailable',
  message: 'The rate limit store is unavailable and the failure mode is closed; retry shortly.',
});

/**
 * How a check the store could not decide is answered: its reason (always said, in a header or
 * metadata), and whether it is refused as unavailable (503 / UNAVAILABLE) instead of OVER_LIMIT.
 */
export function degradedAnswer(ctx: ServiceContext, degraded: DegradedReason | undefined): { reason: DegradedReason; unavailable: boolean } | undefined {
  if (degraded === undefined) return undefined;
  return { reason: degraded, unavailable: degraded === 'fail-closed' && ctx.options.failClosedStatus === 503 };
}
