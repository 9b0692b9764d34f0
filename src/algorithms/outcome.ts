/**
 * Builds decisions the same way for every algorithm: soft allowance hidden from `remaining`,
 * special reasons, and one object shape (fast property access in callers).
 */
import type { Decision, DecisionReason } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';

/** A normal decision; `rawRemaining` is counted against the effective (soft) capacity. */
export function outcome(
  policy: CompiledPolicy,
  now: number,
  allowed: boolean,
  rawRemaining: number,
  resetAt: number,
  retryAfter: number,
): Decision {
  const remaining = rawRemaining - policy.softExtra;
  return { allowed, limit: policy.nominalCapacity, remaining: remaining > 0 ? remaining : 0, resetAt, retryAfter, now };
}

/** A leaky-bucket decision: {@link outcome} plus the shaping delay (same shape every time). */
export function shapedOutcome(
  policy: CompiledPolicy,
  now: number,
  allowed: boolean,
  rawRemaining: number,
  resetAt: number,
  retryAfter: number,
  delay: number,
): Decision {
  const remaining = rawRemaining - policy.softExtra;
  return { allowed, limit: policy.nominalCapacity, remaining: remaining > 0 ? remaining : 0, resetAt, retryAfter, now, delay };
}

/**
 * A request that can never be admitted (`cost > capacity`): reports the current state, and a retry
 * hint of one window so a client that retries anyway does not spin.
 */
export function impossible(policy: CompiledPolicy, now: number, rawRemaining: number, resetAt: number): Decision {
  return special(policy, now, 'cost-exceeds-capacity', rawRemaining, resetAt);
}

/**
 * `limit: 0`: deny everything (whatever the burst), store nothing, suggest checking back after one
 * window (the limit may have been raised by then).
 */
export function limitZero(policy: CompiledPolicy, now: number): Decision {
  const decision = { allowed: false, limit: 0, remaining: 0, resetAt: now, retryAfter: policy.windowMs, now, reason: 'limit-zero' as const };
  // leaky-bucket decisions always carry their shaping delay.
  return policy.algorithm === 'leaky-bucket' ? { ...decision, delay: 0 } : decision;
}

function special(policy: CompiledPolicy, now: number, reason: DecisionReason, rawRemaining: number, resetAt: number): Decision {
  const remaining = rawRemaining - policy.softExtra;
  return {
    allowed: false,
    limit: policy.nominalCapacity,
    remaining: remaining > 0 ? remaining : 0,
    resetAt,
    retryAfter: policy.windowMs,
    now,
    reason,
  };
}
