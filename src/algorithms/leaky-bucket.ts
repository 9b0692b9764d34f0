/**
 * Leaky bucket: a queue of at most `burst` requests draining at `limit` per `window`. As a meter it
 * admits at once whatever fits; it also returns `delay`, the time until the work queued ahead of
 * this request has drained, which a shaping caller (the gateway) waits before forwarding.
 */
import { decideLevel, decideWideLevelState } from './level.js';
import type { SlotAlgorithm } from './types.js';

export const leakyBucket: SlotAlgorithm = {
  stateSize: 2,
  decide(state, at, now, cost, policy, commit) {
    if (policy.wide) return decideWideLevelState(state, at, now, cost, policy, commit, true);
    return decideLevel(state, at, now, cost, policy, commit, true);
  },
};
