/**
 * What a decision is when the store cannot make it. `open` admits (the API stays up, unprotected),
 * `closed` denies (protected, down), `local` decides on an in-process limiter enforcing
 * ⌈limit / nodes⌉ (up, and still protected: each of N nodes admits its share; node-count.ts says
 * how many nodes). Every degraded decision carries its `reason`, so it is never mistaken for a
 * normal one.
 */
import type { Decision } from '../decision.js';
import { InvalidOptionError, describeValue } from '../errors.js';
import { checkWholeNumber } from '../options.js';
import { compilePolicy, type CompiledPolicy, type Policy } from '../policy.js';

export type FailureMode = 'open' | 'closed' | 'local';
export const FAILURE_MODES: readonly FailureMode[] = ['open', 'closed', 'local'];
/**
 * What the library also takes: `throw` rejects with the store's error (after the deadline at the
 * latest, at once while the breaker is open), for callers with failure handling of their own
 * (express-rate-limit's `passOnStoreError`).
 */
export type LimiterFailureMode = FailureMode | 'throw';
const LIMITER_FAILURE_MODES: readonly LimiterFailureMode[] = [...FAILURE_MODES, 'throw'];

/** The reason a degraded decision carries, by failure mode. */
export const DEGRADED_REASON = { open: 'fail-open', closed: 'fail-closed', local: 'local-fallback' } as const;
export type DegradedReason = (typeof DEGRADED_REASON)[FailureMode];

/** How long a client denied by `closed` is told to wait: the store may be back by then. */
export const FAIL_CLOSED_RETRY_MS = 1_000;

/** Default deadline of one store call, in ms. */
export const DEFAULT_DEADLINE_MS = 50;
/** Longest deadline accepted, in ms. */
export const MAX_DEADLINE_MS = 60_000;

export function checkFailureMode(mode: unknown, where: string): LimiterFailureMode {
  if ((LIMITER_FAILURE_MODES as readonly unknown[]).includes(mode)) return mode as LimiterFailureMode;
  throw new InvalidOptionError(
    `${where} must be 'open' (admit while the store fails), 'closed' (deny), 'local' (an in-process limit of limit / expectedNodes) or 'throw' (reject with the store's error), got ${describeValue(mode)}`,
  );
}

export function checkDeadline(value: unknown, where: string): number {
  return checkWholeNumber(value, { name: where, min: 1, max: MAX_DEADLINE_MS, unit: 'ms' });
}

export function checkExpectedNodes(value: unknown, where: string): number {
  return checkWholeNumber(value, { name: where, min: 1, max: 10_000, meaning: 'the nodes sharing the store' });
}

/** `open`: admitted; the quota is unknown, so the full quota less this request is reported. */
export function failOpenDecision(policy: CompiledPolicy, cost: number, now: number): Decision {
  return {
    allowed: true,
    limit: policy.nominalCapacity,
    remaining: Math.max(0, policy.nominalCapacity - cost),
    resetAt: now + policy.windowMs,
    retryAfter: 0,
    now,
    reason: 'fail-open',
  };
}

/** `closed`: denied, retry in a second. */
export function failClosedDecision(policy: CompiledPolicy, now: number): Decision {
  return { allowed: false, limit: policy.nominalCapacity, remaining: 0, resetAt: now + FAIL_CLOSED_RETRY_MS, retryAfter: FAIL_CLOSED_RETRY_MS, now, reason: 'fail-closed' };
}

const BUCKETS: ReadonlySet<string> = new Set(['token-bucket', 'leaky-bucket', 'gcra']);

/**
 * The policy a node enforces on its own while the store is away: limit (and burst) divided by the
 * nodes sharing the quota, rounded up so no node is left with nothing. N nodes admit at most
 * N × ⌈limit / N⌉ < limit + N per window between them when load is spread evenly.
 */
export function localPolicy(policy: CompiledPolicy, nodes: number): CompiledPolicy {
  if (nodes === 1) return policy;
  const share = (value: number): number => Math.max(1, Math.ceil(value / nodes));
  const scaled: Policy = {
    algorithm: policy.algorithm,
    limit: share(policy.limit),
    window: policy.calendar?.unit ?? policy.windowMs,
    ...(policy.calendar === undefined ? {} : { timeZone: policy.calendar.timeZone }),
    ...(BUCKETS.has(policy.algorithm) ? { burst: share(policy.burst) } : {}),
    ...(policy.softPercent > 0 ? { softPercent: policy.softPercent } : {}),
    ...(policy.countRejected ? { countRejected: true } : {}),
    ...(policy.firstHit ? { windowStart: 'first-hit' as const } : {}),
    ...(policy.precision > 1 ? { precision: policy.precision } : {}),
  };
  return compilePolicy(scaled);
}

const DEGRADED_REASONS: ReadonlySet<string> = new Set(Object.values(DEGRADED_REASON));

/** The failure mode that made `decision`, if one did. */
export function degradedReasonOf(decision: Decision): DegradedReason | undefined {
  return decision.reason !== undefined && DEGRADED_REASONS.has(decision.reason) ? (decision.reason as DegradedReason) : undefined;
}

/** `decision` marked as made by the local fallback. */
export function locally(decision: Decision): Decision {
  return { ...decision, reason: 'local-fallback' };
}
