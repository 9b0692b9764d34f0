/**
 * Allowed and throttled over time, in bounded memory: buckets of one minute at first; when the
 * log spans more than `maxBuckets` of them, the width doubles (neighbouring buckets merge), so a
 * log of an hour is shown per minute and a log of a month per few hours, in at most `maxBuckets`.
 */
import type { TimeBucket } from './types.js';

const MINUTE = 60_000;

export class Timeline {
  private bucketMs = MINUTE;
  /** Start of the first bucket (aligned to bucketMs); undefined before the first count. */
  private origin: number | undefined;
  private allowed: number[] = [];
  private throttled: number[] = [];

  constructor(private readonly maxBuckets: number) {}

  /** Counts one decision made at `time` (epoch ms; times never go back in a simulation). */
  add(time: number, allowed: boolean): void {
    this.origin ??= Math.floor(time / this.bucketMs) * this.bucketMs;
    let index = Math.floor((time - this.origin) / this.bucketMs);
    while (index >= this.maxBuckets) {
      this.widen();
      index = Math.floor((time - this.origin) / this.bucketMs);
    }
    while (this.allowed.length <= index) {
      this.allowed.push(0);
      this.throttled.push(0);
    }
    if (allowed) this.allowed[index]! += 1;
    else this.throttled[index]! += 1;
  }

  /** The buckets from the first decision to the last, empty ones included. */
  report(): { bucketMs: number; buckets: TimeBucket[] } {
    const origin = this.origin ?? 0;
    return {
      bucketMs: this.bucketMs,
      buckets: this.allowed.map((allowed, i) => ({ start: origin + i * this.bucketMs, allowed, throttled: this.throttled[i]! })),
    };
  }

  /** Doubles the width: the origin moves to a multiple of the new width, counts merge in pairs. */
  private widen(): void {
    const width = this.bucketMs * 2;
    const origin = Math.floor(this.origin! / width) * width;
    const shift = (this.origin! - origin) / this.bucketMs;
    const merge = (counts: number[]): number[] => {
      const merged: number[] = [];
      counts.forEach((count, i) => {
        const at = (i + shift) >> 1;
        merged[at] = (merged[at] ?? 0) + count;
      });
      return Array.from(merged, (count) => count ?? 0);
    };
    this.allowed = merge(this.allowed);
    this.throttled = merge(this.throttled);
    this.origin = origin;
    this.bucketMs = width;
  }
}
