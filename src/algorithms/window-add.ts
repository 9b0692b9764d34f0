/**
 * Adding to a window counter whatever the limit: what local-first mode (limiter/local-first.ts) does
 * with units a node has already admitted — the store adds a node's increments to the shared
 * counter, and the node adds its own to its view. The same window arithmetic as a decision (a
 * window rolls over, a sliding window's current count becomes the previous one), never a denial.
 */
import { CompiledPolicy } from '../policy.js';
import { fixedWindow } from './fixed-window.js';
import { slidingWindow } from './sliding-window.js';
import type { SlotAlgorithm } from './types.js';

/**
 * Whether `policy`'s state is window counts that local-first can add to: a fixed window or a
 * two-window counter (a sliding window of precision N > 1 keeps N + 1 counts, which the sync's
 * (count, start, previous) cannot carry).
 */
export function countsInWindows(policy: CompiledPolicy): boolean {
  // A calendar window's periods are not window multiples the sync's window arithmetic can name.
  if (policy.calendar !== undefined) return false;
  return policy.algorithm === 'fixed-window' || (policy.algorithm === 'sliding-window' && policy.precision === 1);
}

/** The algorithm, with a sliding window's precision when it is not 1: for messages. */
export function describeState(policy: CompiledPolicy): string {
  if (policy.calendar !== undefined) return `${policy.algorithm} with a calendar window ('${policy.calendar.unit}')`;
  return policy.precision > 1 ? `${policy.algorithm} (precision ${policy.precision})` : policy.algorithm;
}

/** The window counter algorithm of a {@link countsInWindows} policy. */
export function windowAlgorithm(policy: CompiledPolicy): SlotAlgorithm {
  return policy.algorithm === 'sliding-window' ? slidingWindow : fixedWindow;
}

const unbounded = new WeakMap<CompiledPolicy, CompiledPolicy>();

/** `policy` with no limit: every request is admitted and recorded. */
function unboundedPolicy(policy: CompiledPolicy): CompiledPolicy {
  let copy = unbounded.get(policy);
  if (copy === undefined) {
    copy = new CompiledPolicy({ ...policy, capacity: Number.MAX_SAFE_INTEGER, nominalCapacity: Number.MAX_SAFE_INTEGER, softExtra: 0 });
    unbounded.set(policy, copy);
  }
  return copy;
}

/**
 * Adds `units` (≥ 0) to the counter in `state[at ..]` in the window of `now`; returns when that
 * state expires (the window's end, or a sliding window's reset).
 */
export function addToWindowState(state: Float64Array, at: number, now: number, units: number, policy: CompiledPolicy): number {
  return windowAlgorithm(policy).decide(state, at, now, units, unboundedPolicy(policy), true).resetAt;
}
