/**
 * `limiter.usage(key, policy)`: how much of a quota is used and over which period, read from a
 * look (cost 0, nothing spent) through the same stack of layers every decision goes down. What
 * `used` and the period mean per algorithm is in docs/semantics.md (Usage).
 */
import type { Decision } from '../decision.js';
import { StoreUnavailableError } from '../errors.js';
import type { CompiledPolicy } from '../policy.js';
import { checkOptions } from '../options.js';
import { checkNow } from './checks.js';
import { degradedReasonOf } from './failure-modes.js';

/** A key's usage of one policy's quota. Times are epoch ms; the period is [periodStart, periodEnd). */
export interface Usage {
  /** Units of the quota in use: `limit − remaining` of a look (so at most `limit`). */
  readonly used: number;
  /** The quota `used` counts against (a decision's `limit`: `limit`, or `burst` for buckets and GCRA). */
  readonly limit: number;
  readonly periodStart: number;
  readonly periodEnd: number;
}

/** Options of {@link LimiterCore.usage}: the instant to read at (tests, replays). */
export interface UsageOptions {
  readonly now?: number;
}

/** The call's `now`, checked (undefined: the limiter's clock or the store's time). */
export function checkUsageOptions(options: UsageOptions): number | undefined {
  checkOptions('usage', options, ['now'], '{ now: Date.now() }');
  return options.now === undefined ? undefined : checkNow(options.now);
}

/**
 * The usage a look `decision` shows under `policy`. A degraded look (the store could not answer
 * and a failure mode made one up) is no usage at all: a StoreUnavailableError.
 */
export function usageOf(decision: Decision, policy: CompiledPolicy): Usage {
  const degraded = degradedReasonOf(decision);
  if (degraded !== undefined) {
    throw new StoreUnavailableError(`usage needs the store's answer, and the store could not give one (the failure mode answered ${degraded}); retry when the store is back`);
  }
  const { now, resetAt, limit } = decision;
  const used = Math.max(0, limit - decision.remaining);
  const [periodStart, periodEnd] = periodOf(policy, now, resetAt, used);
  return { used, limit, periodStart, periodEnd };
}

/** The period `used` is counted over, per algorithm (docs/semantics.md, Usage). */
function periodOf(policy: CompiledPolicy, now: number, resetAt: number, used: number): readonly [number, number] {
  switch (policy.algorithm) {
    case 'fixed-window':
      return windowPeriod(policy, now, resetAt, used);
    case 'sliding-window':
    case 'sliding-log':
      // The rolling window ending at `now` (inclusive): (now − W, now].
      return [now - policy.windowMs + 1, now + 1];
    default:
      // Buckets and GCRA: from now until the bucket would be full (level 0) again.
      return [now, Math.max(now, resetAt)];
  }
}

/**
 * A fixed window's period: the window holding the count when there is one (its end is `resetAt`,
 * a clock gone back included), else the window `now` falls in — a first-hit window would start now.
 */
function windowPeriod(policy: CompiledPolicy, now: number, resetAt: number, used: number): readonly [number, number] {
  const calendar = policy.calendar;
  if (calendar !== undefined) {
    const period = calendar.periodAt(used > 0 && resetAt > now ? resetAt - 1 : now);
    return [period.start, period.end];
  }
  const windowMs = policy.windowMs;
  if (used > 0 && resetAt > now) return [resetAt - windowMs, resetAt];
  if (policy.firstHit) return [now, now + windowMs];
  const start = Math.floor(now / windowMs) * windowMs;
  return [start, start + windowMs];
}
