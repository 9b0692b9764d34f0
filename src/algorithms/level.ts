/**
 * The continuous bucket shared by token-bucket and leaky-bucket. The bucket's level is kept in
 * integer units: one request is worth `windowMs` units and the level drains `limit` units per ms,
 * so every refill instant is an exact integer computation (a rate of 3 per 1000 ms never drifts).
 *
 * State (2 doubles): [0] level in units after the last admitted request, [1] its time (epoch ms).
 * A wide policy (wide-level.ts) stores instead [0] r − 2^52, [1] −1 − t: the bucket is empty at
 * t + r / limit ms (0 ≤ r < limit ≤ 2^51). A plain state is never negative, and a wide one always
 * computes to a negative level below, whatever the limit, so each reads the other's state exactly.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import { ceilDiv, floorDiv } from './integer.js';
import { impossible, outcome, shapedOutcome } from './outcome.js';
import { decideWideLevel } from './wide-level.js';

const LEVEL = 0;
const LAST = 1;
/** Subtracted from a wide state's remainder, so that its level field is always negative (2^52). */
export const WIDE_LEVEL_OFFSET = 2 ** 52;

/**
 * The level as seen at `now`: drained since `last`, higher if the clock went back. −1 for a wide
 * state (r − 2^52, −1 − t), which always computes as negative here.
 */
function levelAt(state: Float64Array, at: number, now: number, policy: CompiledPolicy): number {
  const last = state[at + LAST]!;
  const level = state[at + LEVEL]! - (now - last) * policy.limit;
  if (level > 0) return level;
  return last < 0 ? -1 : 0;
}

/** Whole requests the bucket still has room for at `level`. */
function rawRemaining(fullUnits: number, level: number, windowMs: number): number {
  return fullUnits > level ? floorDiv(fullUnits - level, windowMs) : 0;
}

/**
 * Decides one request against the bucket. With `shaping` (leaky-bucket) an admitted request is also
 * given its delay: the time until the level ahead of it has drained.
 */
export function decideLevel(
  state: Float64Array,
  at: number,
  now: number,
  cost: number,
  policy: CompiledPolicy,
  commit: boolean,
  shaping: boolean,
): Decision {
  const level = levelAt(state, at, now, policy);
  if (level < 0) return decideWideLevelState(state, at, now, cost, policy, commit, shaping);
  const { windowMs, limit, capacity } = policy;
  const fullUnits = capacity * windowMs;
  if (cost > capacity) {
    const decision = impossible(policy, now, rawRemaining(fullUnits, level, windowMs), now + ceilDiv(level, limit));
    return shaping ? { ...decision, delay: 0 } : decision;
  }
  const units = cost * windowMs;
  if (level + units > fullUnits) {
    const retryAfter = ceilDiv(level + units - fullUnits, limit);
    const remaining = rawRemaining(fullUnits, level, windowMs);
    const resetAt = now + ceilDiv(level, limit);
    return shaping
      ? shapedOutcome(policy, now, false, remaining, resetAt, retryAfter, 0)
      : outcome(policy, now, false, remaining, resetAt, retryAfter);
  }
  const next = level + units;
  if (commit) {
    state[at + LEVEL] = next;
    state[at + LAST] = now;
  }
  const remaining = rawRemaining(fullUnits, next, windowMs);
  const resetAt = now + ceilDiv(next, limit);
  return shaping
    ? shapedOutcome(policy, now, true, remaining, resetAt, 0, ceilDiv(level, limit))
    : outcome(policy, now, true, remaining, resetAt, 0);
}

/**
 * A wide policy (the callers check `policy.wide` first), or a key last written by one. A plain
 * state (level, last) is the empty time last + level / limit; a plain policy writes its level back
 * (it fits: at most capacity × window once admitted).
 */
export function decideWideLevelState(state: Float64Array, at: number, now: number, cost: number, policy: CompiledPolicy, commit: boolean, shaping: boolean): Decision {
  const last = state[at + LAST]!;
  const result =
    last < 0
      ? decideWideLevel(-1 - last, state[at + LEVEL]! + WIDE_LEVEL_OFFSET, now, cost, policy, shaping)
      : decideWideLevel(last, state[at + LEVEL]!, now, cost, policy, shaping);
  if (commit && result.admitted) {
    if (policy.wide) {
      state[at + LEVEL] = result.tatR - WIDE_LEVEL_OFFSET;
      state[at + LAST] = -1 - result.tatMs;
    } else {
      state[at + LEVEL] = (result.tatMs - now) * policy.limit + result.tatR;
      state[at + LAST] = now;
    }
  }
  return result.decision;
}
