/**
 * Settling a reservation on a key's state (reserve then settle, docs/semantics.md): refunding or
 * charging the difference between a request's actual cost and its estimate, in the state layout
 * of each of the six algorithms. The same steps as scripts/adjust.lua on Redis.
 *
 * - A refund (`units` < 0) gives back what the reservation still holds: a window counter only in
 *   the window it was recorded in (`mark`, that window's start) while that window still counts, a
 *   sliding window of precision N from its bucket while the estimate reads it, a sliding log from
 *   its own entry while it is in the rolling window, a bucket or GCRA at once (never past a full
 *   bucket / TAT before now).
 * - A charge (`units` > 0) is recorded now, whatever the limit (the work is done), in the window
 *   of `now`; a key is put at most one capacity into debt (its state holds at most twice the
 *   capacity), so the arithmetic stays exact.
 */
import type { CompiledPolicy } from '../policy.js';
import { floorDiv, mulDivmod } from './integer.js';
import type { SlidingLog } from './sliding-log.js';

/** Why `policy` cannot take reservations, naming the alternative; undefined when it can. */
export function reservationRefusal(policy: CompiledPolicy): string | undefined {
  if (policy.share !== undefined) return 'reserve/settle is not offered on a shared capacity (share): use limit() with the actual cost once it is known';
  // The state may hold twice the capacity after a charge, then a decision adds up to a capacity more.
  if (policy.algorithm !== 'fixed-window' && policy.algorithm !== 'sliding-log' && (3 * policy.capacity + 1) * policy.windowMs > Number.MAX_SAFE_INTEGER) {
    return `reserve/settle needs (3 × capacity + 1) × window ≤ 2^53 − 1 for ${policy.algorithm}, so a charged debt counts exactly: lower the limit or the window`;
  }
  return undefined;
}

/**
 * What a reservation records of the state it was decided into: a window counter's window start, a
 * sliding window of precision N's bucket index, a sliding log's entry time (the newest after it);
 * 0 for the buckets and GCRA. `state`: the slot state, a bucket record, or a log's [newest entry time].
 */
export function reservationMark(state: ArrayLike<number>, at: number, policy: CompiledPolicy): number {
  if (policy.algorithm === 'sliding-log' || (policy.algorithm === 'sliding-window' && policy.precision > 1)) return state[at]!;
  return policy.algorithm === 'fixed-window' || policy.algorithm === 'sliding-window' ? state[at + 1]! : 0;
}

/**
 * Refunds (`units` < 0) or charges (`units` > 0) a reservation recorded in the window starting at
 * `mark`, at `now`, in `state[at ..]`. Returns false when nothing was to change (a refund of a
 * window that has gone by, or of a key with nothing recorded).
 */
export function adjustState(state: Float64Array, at: number, now: number, units: number, mark: number, policy: CompiledPolicy, log?: SlidingLog): boolean {
  if (units === 0) return false;
  if (log !== undefined) return adjustSlidingLog(log, now, units, mark, policy);
  if (policy.precision > 1) return adjustSlidingBuckets(state, at, now, units, mark, policy);
  switch (policy.algorithm) {
    case 'fixed-window':
      return adjustFixedWindow(state, at, now, units, mark, policy);
    case 'sliding-window':
      return adjustSlidingWindow(state, at, now, units, mark, policy);
    case 'gcra':
      return adjustGcra(state, at, now, units, policy);
    default:
      return adjustLevel(state, at, now, units, policy);
  }
}

/** `count` moved by `units`: a refund takes at most what is there, a charge stops at twice the capacity (never lowering a count already past it). */
function moved(count: number, units: number, cap: number): number {
  if (units < 0) return Math.max(0, count + units);
  return Math.max(count, Math.min(count + units, cap));
}

/** The start of the aligned window or calendar period holding `now`. */
function alignedStart(now: number, policy: CompiledPolicy): number {
  return policy.calendar === undefined ? floorDiv(now, policy.windowMs) * policy.windowMs : policy.calendar.periodAt(now).start;
}

function adjustFixedWindow(state: Float64Array, at: number, now: number, units: number, mark: number, policy: CompiledPolicy): boolean {
  const { windowMs, capacity } = policy;
  const count = state[at]!;
  const start = state[at + 1]!;
  if (units < 0) {
    // Only the reservation's own window (or calendar period), while it runs (a clock that went back stays in it).
    const live = policy.firstHit ? now < start + windowMs : alignedStart(now, policy) <= start;
    if (count === 0 || start !== mark || !live) return false;
    state[at] = moved(count, units, 2 * capacity);
    return true;
  }
  let nowStart: number;
  if (policy.firstHit) nowStart = count > 0 && now < start + windowMs ? start : now;
  else nowStart = Math.max(alignedStart(now, policy), count > 0 ? start : -Infinity);
  const current = count > 0 && start === nowStart ? count : 0;
  state[at] = moved(current, units, 2 * capacity);
  state[at + 1] = nowStart;
  return true;
}

function adjustSlidingWindow(state: Float64Array, at: number, now: number, units: number, mark: number, policy: CompiledPolicy): boolean {
  const { windowMs, capacity } = policy;
  const storedStart = state[at + 1]!;
  const nowStart = Math.max(floorDiv(now, windowMs) * windowMs, storedStart);
  if (units < 0) {
    // The reservation's window counts while it is the current or the previous one.
    if (nowStart - mark >= 2 * windowMs) return false;
    const slot = storedStart === mark ? 0 : storedStart === mark + windowMs ? 2 : -1;
    if (slot < 0 || state[at + slot]! === 0) return false;
    state[at + slot] = moved(state[at + slot]!, units, 2 * capacity);
    return true;
  }
  let current = 0;
  let previous = 0;
  if (storedStart === nowStart) [current, previous] = [state[at]!, state[at + 2]!];
  else if (storedStart === nowStart - windowMs) previous = state[at]!;
  state[at] = moved(current, units, 2 * capacity);
  state[at + 1] = nowStart;
  state[at + 2] = previous;
  return true;
}

/** Token and leaky bucket, state (level in units, its time): the level at `now`, moved by units × window. */
function adjustLevel(state: Float64Array, at: number, now: number, units: number, policy: CompiledPolicy): boolean {
  const { windowMs, limit, capacity } = policy;
  const level = Math.max(0, state[at]! - (now - state[at + 1]!) * limit);
  if (units < 0 && level === 0) return false;
  state[at] = moved(level, units * windowMs, 2 * capacity * windowMs);
  state[at + 1] = now;
  return true;
}

/** GCRA, state (TAT whole ms, remainder in 1/limit ms): how far TAT is ahead of `now`, moved by units × window. */
function adjustGcra(state: Float64Array, at: number, now: number, units: number, policy: CompiledPolicy): boolean {
  const { windowMs, limit, capacity } = policy;
  const ahead = Math.max(0, (state[at]! - now) * limit + state[at + 1]!);
  if (units < 0 && ahead === 0) return false;
  const next = moved(ahead, units * windowMs, 2 * capacity * windowMs);
  const wholeMs = floorDiv(next, limit);
  state[at] = now + wholeMs;
  state[at + 1] = next - wholeMs * limit;
  return true;
}

/**
 * A sliding log: a refund takes the units off the reservation's own entry (logged at `mark`) while
 * it is in the rolling window; a charge is logged at `now` (as a decision logs), the log holding
 * at most twice the capacity.
 */
function adjustSlidingLog(log: SlidingLog, now: number, units: number, mark: number, policy: CompiledPolicy): boolean {
  const { windowMs, capacity } = policy;
  if (units < 0) return mark > now - windowMs && log.refund(mark, -units) > 0;
  log.expire(now, windowMs);
  const total = log.total();
  const added = moved(total, units, 2 * capacity) - total;
  if (added === 0) return false;
  log.append(Math.max(log.newestTime(), now), added, Number.POSITIVE_INFINITY);
  return true;
}

/** The bucket of a sliding window of precision N holding `now` (sliding-window-buckets.ts). */
function bucketAt(now: number, policy: CompiledPolicy): number {
  const scaled = now * policy.precision;
  return scaled <= Number.MAX_SAFE_INTEGER ? floorDiv(scaled, policy.windowMs) : mulDivmod(now, policy.precision, policy.windowMs)[0];
}

/**
 * A sliding window of precision N, state (index, c0 … cN): a refund takes the units off the
 * reservation's bucket (index `mark`) while the estimate still reads it (one of the N + 1 newest
 * positions: whole, or weighted by its share inside the window); a charge adds to the bucket of `now`.
 */
function adjustSlidingBuckets(state: Float64Array, at: number, now: number, units: number, mark: number, policy: CompiledPolicy): boolean {
  const { capacity, precision } = policy;
  const stored = state[at]!;
  const bucket = Math.max(bucketAt(now, policy), stored);
  if (units < 0) {
    const position = stored - mark;
    if (bucket - mark > precision || position < 0 || position > precision || state[at + 1 + position]! === 0) return false;
    state[at + 1 + position] = moved(state[at + 1 + position]!, units, 2 * capacity);
    return true;
  }
  const slid = bucket - stored;
  for (let position = precision; position >= 0; position--) state[at + 1 + position] = position >= slid ? state[at + 1 + position - slid]! : 0;
  state[at] = bucket;
  state[at + 1] = moved(state[at + 1]!, units, 2 * capacity);
  return true;
}
