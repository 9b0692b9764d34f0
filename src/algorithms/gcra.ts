/**
 * GCRA (generic cell rate algorithm): one timestamp per key, the theoretical arrival time (TAT) of
 * the next request if traffic flowed exactly at the rate. Emission interval T = window / limit;
 * `burst` is the total capacity, so a request is admitted when TAT − now ≤ (burst − 1) × T after
 * accounting for its own cost. T is usually fractional (1000 ms / 3), so TAT is kept exactly as
 * whole ms plus a remainder in 1/limit ms: state [0] TAT whole ms, [1] remainder (0 ≤ r < limit).
 *
 * Its decisions are identical to the token bucket's; it is the cheapest to store (one timestamp).
 */
import type { Decision } from '../decision.js';
import { ceilDiv, floorDiv } from './integer.js';
import { impossible, outcome } from './outcome.js';
import type { SlotAlgorithm } from './types.js';

const TAT_MS = 0;
const TAT_REMAINDER = 1;

export const gcra: SlotAlgorithm = {
  stateSize: 2,
  decide(state, at, now, cost, policy, commit): Decision {
    const { windowMs, limit, capacity } = policy;
    // How far TAT is ahead of now, in 1/limit ms (one request = windowMs of these).
    let ahead = (state[at + TAT_MS]! - now) * limit + state[at + TAT_REMAINDER]!;
    if (ahead < 0) ahead = 0;
    const tolerance = capacity * windowMs;
    const remainingAt = (aheadUnits: number): number =>
      tolerance > aheadUnits ? floorDiv(tolerance - aheadUnits, windowMs) : 0;
    if (cost > capacity) return impossible(policy, now, remainingAt(ahead), now + ceilDiv(ahead, limit));
    const increment = cost * windowMs;
    if (ahead + increment > tolerance) {
      const retryAfter = ceilDiv(ahead + increment - tolerance, limit);
      return outcome(policy, now, false, remainingAt(ahead), now + ceilDiv(ahead, limit), retryAfter);
    }
    const next = ahead + increment;
    if (commit) {
      const wholeMs = floorDiv(next, limit);
      state[at + TAT_MS] = now + wholeMs;
      state[at + TAT_REMAINDER] = next - wholeMs * limit;
    }
    return outcome(policy, now, true, remainingAt(next), now + ceilDiv(next, limit), 0);
  },
};
