/**
 * Token bucket: a bucket of `burst` tokens refilled continuously at `limit` per `window`; a request
 * takes `cost` tokens. Stored as the bucket's missing tokens (its level), so all-zero state is a
 * full bucket. See level.ts for the integer units.
 */
import type { SlotAlgorithm } from './types.js';
import { decideLevel, decideWideLevelState } from './level.js';

export const tokenBucket: SlotAlgorithm = {
  stateSize: 2,
  decide(state, at, now, cost, policy, commit) {
    if (policy.wide) return decideWideLevelState(state, at, now, cost, policy, commit, false);
    return decideLevel(state, at, now, cost, policy, commit, false);
  },
};
