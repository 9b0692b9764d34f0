/**
 * The level algorithms' wide arithmetic (docs/semantics.md, "Wide policies"): for a policy whose
 * (capacity + 1) × window passes 2^53 − 1 the level in 1/limit ms no longer fits a double, so the
 * bucket is held as the time it is empty, TAT = whole ms + r / limit (0 ≤ r < limit), and every
 * quantity of the level section is a time of that form. Products go through mulDivmod; every
 * figure is the same integer the plain formulas give (test/algorithms/wide.test.ts forces this path on plain
 * policies and compares).
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import { floorDiv, mulDivmod } from './integer.js';
import { impossible, outcome, shapedOutcome } from './outcome.js';

/** A duration of `ms + r / limit` milliseconds, 0 ≤ r < limit. */
type Span = [ms: number, r: number];

/** a ≤ b */
function atMost(a: Span, b: Span): boolean {
  return a[0] < b[0] || (a[0] === b[0] && a[1] <= b[1]);
}

function add(a: Span, b: Span, limit: number): Span {
  const r = a[1] + b[1];
  return r >= limit ? [a[0] + b[0] + 1, r - limit] : [a[0] + b[0], r];
}

/** a − b for a ≥ b. */
function subtract(a: Span, b: Span, limit: number): Span {
  const r = a[1] - b[1];
  return r < 0 ? [a[0] - b[0] - 1, r + limit] : [a[0] - b[0], r];
}

function ceilMs(span: Span): number {
  return span[1] > 0 ? span[0] + 1 : span[0];
}

/** Whole requests the bucket has room for with `ahead` queued: ⌊(full − ahead) × limit / window⌋. */
function roomFor(full: Span, ahead: Span, policy: CompiledPolicy): number {
  if (atMost(full, ahead)) return 0;
  const [ms, r] = subtract(full, ahead, policy.limit);
  const [quotient, remainder] = mulDivmod(ms, policy.limit, policy.windowMs);
  return quotient + floorDiv(remainder + r, policy.windowMs);
}

/** A wide decision and, when admitted, the bucket's new empty time (`tatMs + tatR / limit`). */
export interface WideLevel {
  readonly decision: Decision;
  readonly admitted: boolean;
  readonly tatMs: number;
  readonly tatR: number;
}

/**
 * Decides one request against a bucket empty at `tatMs + tatR / limit` (tatR may be ≥ limit when
 * the limit changed: it is carried into whole ms first, the same value). With `shaping`
 * (leaky-bucket) the decision carries its delay.
 */
export function decideWideLevel(tatMs: number, tatR: number, now: number, cost: number, policy: CompiledPolicy, shaping: boolean): WideLevel {
  const { windowMs, limit, capacity } = policy;
  if (tatR >= limit) {
    const carry = floorDiv(tatR, limit);
    tatMs += carry;
    tatR -= carry * limit;
  }
  const ahead: Span = tatMs >= now ? [tatMs - now, tatR] : [0, 0];
  const full = mulDivmod(capacity, windowMs, limit);
  if (cost > capacity) {
    const decision = impossible(policy, now, roomFor(full, ahead, policy), now + ceilMs(ahead));
    return { decision: shaping ? { ...decision, delay: 0 } : decision, admitted: false, tatMs, tatR };
  }
  const next = add(ahead, mulDivmod(cost, windowMs, limit), limit);
  if (!atMost(next, full)) {
    const retryAfter = ceilMs(subtract(next, full, limit));
    const remaining = roomFor(full, ahead, policy);
    const resetAt = now + ceilMs(ahead);
    const decision = shaping
      ? shapedOutcome(policy, now, false, remaining, resetAt, retryAfter, 0)
      : outcome(policy, now, false, remaining, resetAt, retryAfter);
    return { decision, admitted: false, tatMs, tatR };
  }
  const remaining = roomFor(full, next, policy);
  const resetAt = now + ceilMs(next);
  const decision = shaping
    ? shapedOutcome(policy, now, true, remaining, resetAt, 0, ceilMs(ahead))
    : outcome(policy, now, true, remaining, resetAt, 0);
  return { decision, admitted: true, tatMs: now + next[0], tatR: next[1] };
}
