/**
 * Sliding window counter: two fixed-window counters (current and previous) and an estimate of the
 * rolling window = current + previous × the share of the previous window still inside it, rounded
 * down. O(1) memory; approximate (it assumes the previous window's requests were spread evenly).
 *
 * State (3 doubles): [0] current count, [1] current window start (epoch ms), [2] previous count.
 * A wide policy (docs/semantics.md) keeps the same state and takes its products with mulDivmod.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import { floorDiv, mulDivmod } from './integer.js';
import { impossible, outcome } from './outcome.js';
import type { SlotAlgorithm } from './types.js';

const CURRENT = 0;
const START = 1;
const PREVIOUS = 2;

export const slidingWindow: SlotAlgorithm = {
  stateSize: 3,
  decide(state, at, now, cost, policy, commit): Decision {
    const { windowMs, capacity } = policy;
    let start = floorDiv(now, windowMs) * windowMs;
    const storedStart = state[at + START]!;
    let elapsed: number;
    if (storedStart > start) {
      // The clock went back: keep counting in the later window, as if at its very start.
      start = storedStart;
      elapsed = 0;
    } else {
      elapsed = now - start;
    }
    let current = 0;
    let previous = 0;
    if (storedStart === start) {
      current = state[at + CURRENT]!;
      previous = state[at + PREVIOUS]!;
    } else if (storedStart === start - windowMs) {
      previous = state[at + CURRENT]!;
    }
    let previousWeighted = 0;
    if (previous > 0) {
      previousWeighted = policy.wide ? mulDivmod(previous, windowMs - elapsed, windowMs)[0] : floorDiv(previous * (windowMs - elapsed), windowMs);
    }
    const estimate = current + previousWeighted;

    if (cost > capacity) {
      return impossible(policy, now, capacity - estimate, resetTime(now, start, windowMs, current, previous));
    }
    if (estimate + cost > capacity) {
      const retryAfter = retryDelay(now, start, policy, cost, current, previous);
      return outcome(policy, now, false, capacity - estimate, resetTime(now, start, windowMs, current, previous), retryAfter);
    }
    const nextCurrent = current + cost;
    if (commit) {
      state[at + CURRENT] = nextCurrent;
      state[at + START] = start;
      state[at + PREVIOUS] = previous;
    }
    return outcome(policy, now, true, capacity - nextCurrent - previousWeighted, resetTime(now, start, windowMs, nextCurrent, previous), 0);
  },
};

/** When the estimate has decayed to 0 (rounded down): the quota is whole again. */
function resetTime(now: number, start: number, windowMs: number, current: number, previous: number): number {
  if (current > 0) return start + 2 * windowMs - floorDiv(windowMs - 1, current);
  if (previous > 0) {
    const reset = start + windowMs - floorDiv(windowMs - 1, previous);
    return reset > now ? reset : now;
  }
  return now;
}

/** The first instant at which ⌊estimate⌋ + cost ≤ capacity (cost ≤ capacity assumed). */
function retryDelay(now: number, start: number, policy: CompiledPolicy, cost: number, current: number, previous: number): number {
  const { windowMs, capacity, wide } = policy;
  // Later in this window, once enough of the previous window has slid out? (Denied means
  // ⌊previous × (W − e) / W⌋ > room, so room + 1 ≤ previous: the quotient is at most W.)
  const room = capacity - cost - current;
  if (room >= 0 && previous > 0) {
    const offset = windowMs - (wide ? floorOfProductLessOne(room + 1, windowMs, previous) : floorDiv((room + 1) * windowMs - 1, previous));
    if (offset < windowMs) return start + offset - now;
  }
  // Otherwise in the next window, where this window's count becomes the decaying previous one.
  let offset = 0;
  if (current > 0) {
    const count = capacity - cost + 1;
    // Wide: count > current puts the quotient at W or more (offset 0) and past mulDivmod's range.
    if (!wide) offset = windowMs - floorDiv(count * windowMs - 1, current);
    else if (count <= current) offset = windowMs - floorOfProductLessOne(count, windowMs, current);
    if (offset < 0) offset = 0;
  }
  return start + windowMs + offset - now;
}

/** ⌊(a × b − 1) / m⌋ for a, b ≥ 1, with a quotient below 2^53. */
function floorOfProductLessOne(a: number, b: number, m: number): number {
  const [quotient, remainder] = mulDivmod(a, b, m);
  return remainder > 0 ? quotient : quotient - 1;
}
