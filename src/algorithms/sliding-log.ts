/**
 * Sliding log: the exact rolling window. Every admitted request (every attempt with
 * `countRejected`) is logged with its time and cost; a request is admitted when the cost logged in
 * `(now − window, now]` plus its own cost fits. An entry exactly one window old no longer counts.
 *
 * The log is a ring buffer of (time, cumulative cost) pairs: expiring from the head is amortised
 * O(1) (a galloping search, O(log m) for m expired entries), the retry hint on a denial is a binary
 * search, O(log n), and a look (peek) undoes its decision in O(1) instead of copying the log. It holds at most `capacity`
 * entries (requests logged in the same millisecond share one): with `countRejected`, an attempt
 * that finds the log full drops its oldest entry. That never changes a decision: the newest
 * `capacity − 1` entries and the attempt already hold at least `capacity`, so until they expire
 * everything is denied anyway, and the dropped entry, being older, has expired by then.
 * Memory: 16 bytes per entry (plus ~150 bytes per key for the log itself), at most `capacity`
 * entries per key.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import { impossible, outcome } from './outcome.js';

const INITIAL_ENTRIES = 2;

/**
 * One key's log: a ring of (time, cumulative cost) pairs interleaved in one plain array of
 * doubles. A plain array rather than typed arrays: a typed array carries ~200 bytes of fixed
 * overhead, which would dominate the many keys that log only a request or two.
 */
export class SlidingLog {
  /** [time, cumulative, time, cumulative, ...]: entry times (epoch ms) and the running total of cost logged up to and including each entry. */
  private entries: number[];
  private head = 0;
  private size = 0;
  /** Running total of cost of the entries already expired. */
  private expiredTotal = 0;

  constructor(capacity: number) {
    this.entries = newEntries(Math.max(1, Math.min(capacity, INITIAL_ENTRIES)));
  }

  /** Entries currently held. */
  get length(): number {
    return this.size;
  }

  /** Time of the newest entry, or -Infinity when empty. */
  newestTime(): number {
    return this.size === 0 ? -Infinity : this.entries[this.slot(this.size - 1)]!;
  }

  /**
   * Drops entries at or before `now − window` (they no longer count): O(1) when the oldest still
   * counts, else a galloping search, O(log m) for m expired entries (never a walk over the log, so
   * a look that restores the log afterwards stays cheap).
   */
  expire(now: number, windowMs: number): void {
    const cutoff = now - windowMs;
    if (this.size === 0 || this.entries[this.head << 1]! > cutoff) return;
    const count = this.countAtOrBefore(cutoff);
    this.expiredTotal = this.entries[this.slot(count - 1) + 1]!;
    const capacity = this.entries.length >> 1;
    this.head = (this.head + count) % capacity;
    this.size -= count;
    // Rebase the running total when empty so it never grows towards 2^53. (The head stays: a look
    // relies on an append writing only a free slot or the oldest's, see mark.)
    if (this.size === 0) this.expiredTotal = 0;
  }

  /** Cost logged in the window (after {@link expire}). */
  total(): number {
    return this.size === 0 ? 0 : this.entries[this.slot(this.size - 1) + 1]! - this.expiredTotal;
  }

  /**
   * Logs `cost` at `time` (≥ the newest entry): into the newest entry when it has the same time,
   * else as a new entry, dropping the oldest when `maxEntries` are held (see the file header).
   */
  append(time: number, cost: number, maxEntries: number): void {
    const entries = this.entries;
    if (this.size > 0) {
      const newest = this.slot(this.size - 1);
      if (entries[newest] === time) {
        entries[newest + 1] = entries[newest + 1]! + cost;
        return;
      }
      if (this.size >= maxEntries) this.dropOldest();
    }
    if (this.size === this.entries.length >> 1) this.grow(maxEntries);
    const previousTotal = this.size === 0 ? this.expiredTotal : this.entries[this.slot(this.size - 1) + 1]!;
    const slot = this.slot(this.size);
    this.entries[slot] = time;
    this.entries[slot + 1] = previousTotal + cost;
    this.size += 1;
  }

  /**
   * Reserve then settle's refund: takes up to `units` off the entry logged at `time`, if it is held
   * (O(log n) to find it, then O(entries after it) to lower their running totals); an entry left
   * weighing nothing is removed, so every entry weighs at least 1. Returns the units taken.
   */
  refund(time: number, units: number): number {
    const position = this.positionOf(time);
    if (position < 0) return 0;
    const before = position === 0 ? this.expiredTotal : this.entries[this.slot(position - 1) + 1]!;
    const weight = this.entries[this.slot(position) + 1]! - before;
    const taken = Math.min(units, weight);
    let to = position;
    for (let from = taken === weight ? position + 1 : position; from < this.size; from++, to++) {
      const source = this.slot(from);
      const target = this.slot(to);
      this.entries[target] = this.entries[source]!;
      this.entries[target + 1] = this.entries[source + 1]! - taken;
    }
    this.size = to;
    if (this.size === 0) this.expiredTotal = 0;
    return taken;
  }

  /** The position of the entry logged at `time` (times are strictly increasing), or -1. */
  private positionOf(time: number): number {
    let low = 0;
    let high = this.size - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      const at = this.entries[this.slot(mid)]!;
      if (at === time) return mid;
      if (at < time) low = mid + 1;
      else high = mid - 1;
    }
    return -1;
  }

  /** Time of the oldest entry whose expiry brings the logged cost down to `target` or below. */
  expiryFreeing(target: number): number {
    // Binary search over the logical positions for the first cumulative ≥ expiredTotal + (total − target).
    const goal = this.expiredTotal + this.total() - target;
    let low = 0;
    let high = this.size - 1;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.entries[this.slot(mid) + 1]! >= goal) high = mid;
      else low = mid + 1;
    }
    return this.entries[this.slot(low)]!;
  }

  /** How many entries (≥ 1: the oldest is) have a time at or before `cutoff`. */
  private countAtOrBefore(cutoff: number): number {
    const last = this.size - 1;
    if (this.entries[this.slot(last)]! <= cutoff) return this.size;
    // entries[low] ≤ cutoff < entries[high]; gallop from the head, then bisect.
    let low = 0;
    let step = 1;
    let high = 1;
    while (high < last && this.entries[this.slot(high)]! <= cutoff) {
      low = high;
      step *= 2;
      high = Math.min(low + step, last);
    }
    while (high - low > 1) {
      const mid = (low + high) >>> 1;
      if (this.entries[this.slot(mid)]! <= cutoff) low = mid;
      else high = mid;
    }
    return high;
  }

  /** Forgets the oldest entry; its cost moves into the expired total. */
  private dropOldest(): void {
    const capacity = this.entries.length >> 1;
    this.expiredTotal = this.entries[(this.head << 1) + 1]!;
    this.head = this.head + 1 === capacity ? 0 : this.head + 1;
    this.size -= 1;
  }

  /**
   * What {@link restore} needs to undo a decision: the ring's bounds, the newest entry's total (a
   * merge changes it) and the oldest entry (an append writes a free slot, or the oldest's slot when
   * the ring is full, or a new array when it grows).
   */
  mark(): LogMark {
    const newest = this.size === 0 ? -1 : this.slot(this.size - 1) + 1;
    const oldest = this.head << 1;
    return {
      entries: this.entries,
      head: this.head,
      size: this.size,
      expiredTotal: this.expiredTotal,
      newest,
      newestTotal: newest < 0 ? 0 : this.entries[newest]!,
      oldestTime: this.entries[oldest]!,
      oldestTotal: this.entries[oldest + 1]!,
    };
  }

  /** Puts the log back as it was at {@link mark}. */
  restore(mark: LogMark): void {
    const entries = (this.entries = mark.entries);
    this.head = mark.head;
    this.size = mark.size;
    this.expiredTotal = mark.expiredTotal;
    if (mark.newest >= 0) entries[mark.newest] = mark.newestTotal;
    entries[mark.head << 1] = mark.oldestTime;
    entries[(mark.head << 1) + 1] = mark.oldestTotal;
  }

  /** Array index of the entry at logical `position` (0 = oldest). */
  private slot(position: number): number {
    const capacity = this.entries.length >> 1;
    const index = this.head + position;
    return (index < capacity ? index : index - capacity) << 1;
  }

  private grow(maxEntries: number): void {
    const capacity = this.entries.length >> 1;
    const entries = newEntries(Math.max(this.size + 1, Math.min(capacity * 2, maxEntries)));
    for (let i = 0; i < this.size; i++) {
      const from = this.slot(i);
      entries[i << 1] = this.entries[from]!;
      entries[(i << 1) + 1] = this.entries[from + 1]!;
    }
    this.entries = entries;
    this.head = 0;
  }
}

/** A log's state before a look ({@link SlidingLog.mark}). */
export interface LogMark {
  readonly entries: number[];
  readonly head: number;
  readonly size: number;
  readonly expiredTotal: number;
  readonly newest: number;
  readonly newestTotal: number;
  readonly oldestTime: number;
  readonly oldestTotal: number;
}

/** A zeroed array of doubles for `count` entries (kept as an unboxed double array by V8). */
function newEntries(count: number): number[] {
  return new Array<number>(count * 2).fill(0.5).fill(0);
}

/** Decides one request against `log` (a fresh, empty log for a new key). */
export function decideSlidingLog(
  log: SlidingLog,
  now: number,
  cost: number,
  policy: CompiledPolicy,
  commit: boolean,
): Decision {
  const { windowMs, capacity } = policy;
  // A look decides, then puts the log back: even expiring old entries must not touch the stored
  // log, since a later call may come with an earlier `now`. Undoing costs O(1), not a copy.
  if (!commit) {
    const mark = log.mark();
    try {
      return decideSlidingLog(log, now, cost, policy, true);
    } finally {
      log.restore(mark);
    }
  }
  log.expire(now, windowMs);
  const count = log.total();
  if (cost > capacity) return impossible(policy, now, capacity - count, resetTime(log, now, windowMs));
  const allowed = count + cost <= capacity;
  // Entries stay in time order even if the caller's clock went back.
  const newest = log.newestTime();
  const time = newest > now ? newest : now;
  // Only a denied attempt drops the oldest entry of a full log (the file header): an admitted one
  // fits, but for a look of cost 0, whose entry weighs nothing (as on Redis, sliding-log.lua).
  if (allowed || policy.countRejected) log.append(time, cost, allowed ? Number.POSITIVE_INFINITY : capacity);
  const after = log.total();
  if (allowed) return outcome(policy, now, true, capacity - after, resetTime(log, now, windowMs), 0);
  const retryAt = log.expiryFreeing(capacity - cost) + windowMs;
  return outcome(policy, now, false, capacity - after, resetTime(log, now, windowMs), retryAt - now);
}

function resetTime(log: SlidingLog, now: number, windowMs: number): number {
  return log.length === 0 ? now : log.newestTime() + windowMs;
}
