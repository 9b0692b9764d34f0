/**
 * Fixed window: a counter per window. By default windows are aligned to multiples of `window` since
 * the epoch (a 1-minute window resets on the round minute, the same on every node). With
 * `windowStart: 'first-hit'` a key's window starts at its first admitted request after its previous
 * window ended, and lasts `window` (express-rate-limit's stores): a fresh caller gets a whole window.
 *
 * With `countRejected`, a denied hit is counted too (as envoyproxy/ratelimit counts every hit), so
 * the count may pass the capacity: a later look of cost 0 then sees the window overdrawn.
 *
 * With a calendar window (`window: 'month'`, `timeZone`; calendar.ts) the window is the calendar
 * period holding `now` instead of a multiple of its length: [start, end), `end` the next period's start.
 *
 * State (2 doubles): [0] count in the window, [1] the window's start (epoch ms). A count of 0 is a
 * fresh key (a recorded request costs at least 1).
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import type { CalendarPeriods } from './calendar.js';
import { floorDiv } from './integer.js';
import { impossible, outcome } from './outcome.js';
import type { SlotAlgorithm } from './types.js';

const COUNT = 0;
const START = 1;

/** The start of the window `now` falls in, given the stored window (count 0: none). */
function windowStartAt(now: number, storedCount: number, storedStart: number, policy: CompiledPolicy): number {
  const { windowMs } = policy;
  if (policy.calendar !== undefined) {
    const { start } = policy.calendar.periodAt(now);
    return storedCount > 0 && storedStart > start ? storedStart : start;
  }
  if (policy.firstHit) {
    // The stored window goes on until it ends; a clock that went back keeps counting in it.
    return storedCount > 0 && now < storedStart + windowMs ? storedStart : now;
  }
  const start = floorDiv(now, windowMs) * windowMs;
  // A clock that went back keeps counting in the later window rather than opening a fresh one.
  return storedCount > 0 && storedStart > start ? storedStart : start;
}

/** The end of a calendar period starting at `start`: the period of `now`, or the later one a clock that went back still counts in. */
function windowEnd(calendar: CalendarPeriods, now: number, start: number): number {
  const period = calendar.periodAt(now);
  return period.start === start ? period.end : calendar.periodAt(start).end;
}

export const fixedWindow: SlotAlgorithm = {
  stateSize: 2,
  decide(state, at, now, cost, policy, commit): Decision {
    const { windowMs, capacity } = policy;
    const storedCount = state[at + COUNT]!;
    const storedStart = state[at + START]!;
    const start = windowStartAt(now, storedCount, storedStart, policy);
    const count = storedCount > 0 && storedStart === start ? storedCount : 0;
    const end = policy.calendar === undefined ? start + windowMs : windowEnd(policy.calendar, now, start);
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
