/**
 * Sliding log: the exact rolling window. Every admitted request (every attempt with
 * `countRejected`) is logged with its time and cost; a request is admitted when the cost logged in
 * `(now − window, now]` plus its own cost fits. An entry exactly one window old no longer counts.
 *
 * The log is a ring buffer of (time, cumulative cost) pairs: expiring from the head is amortised
 * O(1) and the retry hint on a denial is a binary search, O(log n). It holds at most `capacity`
 * entries (requests logged in the same millisecond share one): with `countRejected`, an attempt
 * that would exceed that merges into the newest entry and moves it forward (errs strict).
 * Memory: 16 bytes per entry, at most `capacity` entries per key.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import { impossible, outcome } from './outcome.js';

const INITIAL_ENTRIES = 8;

/** One key's log. All fields are plain numbers and typed arrays: no per-request objects. */
export class SlidingLog {
  /** Entry times (epoch ms), oldest at `head`. */
  private times: Float64Array;
  /** Running total of cost logged up to and including each entry (monotonic). */
  private cumulative: Float64Array;
  private head = 0;
  private size = 0;
  /** Running total of cost of the entries already expired. */
  private expiredTotal = 0;

  constructor(capacity: number) {
    const entries = Math.max(1, Math.min(capacity, INITIAL_ENTRIES));
    this.times = new Float64Array(entries);
    this.cumulative = new Float64Array(entries);
  }

  /** Entries currently held. */
  get length(): number {
    return this.size;
  }

  /** Time of the newest entry, or -Infinity when empty. */
  newestTime(): number {
    return this.size === 0 ? -Infinity : this.times[this.slot(this.size - 1)]!;
  }

  /** Drops entries at or before `now − window` (they no longer count). */
  expire(now: number, windowMs: number): void {
    const cutoff = now - windowMs;
    while (this.size > 0 && this.times[this.head]! <= cutoff) {
      this.expiredTotal = this.cumulative[this.head]!;
      this.head = (this.head + 1) % this.times.length;
      this.size -= 1;
    }
    // Rebase the running totals when empty so they never grow towards 2^53.
    if (this.size === 0) {
      this.head = 0;
      this.expiredTotal = 0;
    }
  }

  /** Cost logged in the window (after {@link expire}). */
  total(): number {
    return this.size === 0 ? 0 : this.cumulative[this.slot(this.size - 1)]! - this.expiredTotal;
  }

  /** Logs `cost` at `time` (≥ the newest entry), merging as described in the file header. */
  append(time: number, cost: number, maxEntries: number): void {
    if (this.size > 0) {
      const newest = this.slot(this.size - 1);
      if (this.times[newest] === time || this.size >= maxEntries) {
        this.times[newest] = time;
        this.cumulative[newest] = this.cumulative[newest]! + cost;
        return;
      }
    }
    if (this.size === this.times.length) this.grow(maxEntries);
    const previousTotal = this.size === 0 ? this.expiredTotal : this.cumulative[this.slot(this.size - 1)]!;
    const slot = this.slot(this.size);
    this.times[slot] = time;
    this.cumulative[slot] = previousTotal + cost;
    this.size += 1;
  }

  /** Time of the oldest entry whose expiry brings the logged cost down to `target` or below. */
  expiryFreeing(target: number): number {
    const mustExpire = this.total() - target;
    // Binary search over the logical positions for the first cumulative ≥ expiredTotal + mustExpire.
    let low = 0;
    let high = this.size - 1;
    const goal = this.expiredTotal + mustExpire;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.cumulative[this.slot(mid)]! >= goal) high = mid;
      else low = mid + 1;
    }
    return this.times[this.slot(low)]!;
  }

  /** An independent copy (for peek). */
  clone(): SlidingLog {
    const copy = new SlidingLog(1);
    copy.times = this.times.slice();
    copy.cumulative = this.cumulative.slice();
    copy.head = this.head;
    copy.size = this.size;
    copy.expiredTotal = this.expiredTotal;
    return copy;
  }

  private slot(position: number): number {
    const index = this.head + position;
    return index < this.times.length ? index : index - this.times.length;
  }

  private grow(maxEntries: number): void {
    const entries = Math.max(this.size + 1, Math.min(this.times.length * 2, maxEntries));
    const times = new Float64Array(entries);
    const cumulative = new Float64Array(entries);
    for (let i = 0; i < this.size; i++) {
      times[i] = this.times[this.slot(i)]!;
      cumulative[i] = this.cumulative[this.slot(i)]!;
    }
    this.times = times;
    this.cumulative = cumulative;
    this.head = 0;
  }
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
  // Peek works on a copy: even expiring old entries must not touch the stored log, since a later
  // call may come with an earlier `now` (peek is not the hot path).
  if (!commit) return decideSlidingLog(log.clone(), now, cost, policy, true);
  log.expire(now, windowMs);
  const count = log.total();
  if (cost > capacity) return impossible(policy, capacity - count, resetTime(log, now, windowMs));
  const allowed = count + cost <= capacity;
  // Entries stay in time order even if the caller's clock went back.
  const newest = log.newestTime();
  const time = newest > now ? newest : now;
  if (allowed || policy.countRejected) log.append(time, cost, capacity);
  const after = log.total();
  if (allowed) return outcome(policy, true, capacity - after, resetTime(log, now, windowMs), 0);
  const retryAt = log.expiryFreeing(capacity - cost) + windowMs;
  return outcome(policy, false, capacity - after, resetTime(log, now, windowMs), retryAt - now);
}

function resetTime(log: SlidingLog, now: number, windowMs: number): number {
  return log.length === 0 ? now : log.newestTime() + windowMs;
}
