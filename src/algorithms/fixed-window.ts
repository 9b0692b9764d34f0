/**
 * Fixed window: a counter per window, windows aligned to multiples of `window` since the epoch
 * (a 1-minute window resets on the round minute, the same on every node).
 *
 * With `countRejected`, a denied hit is counted too (as envoyproxy/ratelimit counts every hit), so
 * the count may pass the capacity: a later look of cost 0 then sees the window overdrawn.
 *
 * State (2 doubles): [0] count in the window, [1] the window's start (epoch ms).
 */
import type { Decision } from '../decision.js';
import { floorDiv } from './integer.js';
import { impossible, outcome } from './outcome.js';
import type { SlotAlgorithm } from './types.js';

const COUNT = 0;
const START = 1;

export const fixedWindow: SlotAlgorithm = {
  stateSize: 2,
  decide(state, at, now, cost, policy, commit): Decision {
    const { windowMs, capacity } = policy;
    let start = floorDiv(now, windowMs) * windowMs;
    const storedStart = state[at + START]!;
    // A clock that went back keeps counting in the later window rather than opening a fresh one.
    if (storedStart > start) start = storedStart;
    const count = storedStart === start ? state[at + COUNT]! : 0;
    const end = start + windowMs;
    if (cost > capacity) return impossible(policy, now, capacity - count, count > 0 ? end : now);
    if (count + cost > capacity) {
      if (commit && policy.countRejected) {
        state[at + COUNT] = count + cost;
        state[at + START] = start;
        return outcome(policy, now, false, capacity - count, end, end - now);
      }
      return outcome(policy, now, false, capacity - count, count > 0 ? end : now, end - now);
    }
    if (commit) {
      state[at + COUNT] = count + cost;
      state[at + START] = start;
    }
    return outcome(policy, now, true, capacity - count - cost, end, 0);
  },
};
