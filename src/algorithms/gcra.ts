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
import type { CompiledPolicy } from '../policy.js';
import { ceilDiv, floorDiv } from './integer.js';
import { impossible, outcome } from './outcome.js';
import type { SlotAlgorithm } from './types.js';
import { decideWideLevel } from './wide-level.js';

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
    // Wide policies, and a backlog beyond the capacity (a key a wide policy or a lower limit left):
    // the same state read with the wide arithmetic (wide-level.ts), which stays exact.
    if (policy.wide || ahead > tolerance) return decideWide(state, at, now, cost, policy, commit);
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

function decideWide(state: Float64Array, at: number, now: number, cost: number, policy: CompiledPolicy, commit: boolean): Decision {
  const result = decideWideLevel(state[at + TAT_MS]!, state[at + TAT_REMAINDER]!, now, cost, policy, false);
  if (commit && result.admitted) {
    state[at + TAT_MS] = result.tatMs;
    state[at + TAT_REMAINDER] = result.tatR;
  }
  return result.decision;
}
