/**
 * Leaky bucket: a queue of at most `burst` requests draining at `limit` per `window`. As a meter it
 * admits at once whatever fits; it also returns `delay`, the time until the work queued ahead of
 * this request has drained, which a shaping caller (the gateway) waits before forwarding.
 */
import { ceilDiv } from './integer.js';
import { decideLevel, levelAt } from './level.js';
import type { SlotAlgorithm } from './types.js';

export const leakyBucket: SlotAlgorithm = {
  stateSize: 2,
  decide(state, at, now, cost, policy, commit) {
    const level = levelAt(state, at, now, policy);
    const decision = decideLevel(state, at, now, cost, policy, commit, level);
    return { ...decision, delay: decision.allowed ? ceilDiv(level, policy.limit) : 0 };
  },
};
