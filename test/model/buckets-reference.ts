/**
 * The reference model of a sliding window of precision N > 1, written from docs/semantics.md
 * "sliding-window with precision N" alone, as plainly as the spec reads (nothing of src/ is
 * imported). The schedules keep `now × N` and `(b + d) × W` far below 2^53, so plain JS integers
 * are exact; the reserve-then-settle model (./reservation-reference.ts) decides with it.
 */
import { capacityOf, type Decide, type ModelPolicy } from './reference.js';

/** `(index, c0 … cN)`: the newest bucket written, and the counts of it and the N before it, newest first. */
export interface BucketState {
  readonly index: number;
  readonly counts: readonly number[];
}

export const freshBuckets = (precision: number): BucketState => ({ index: 0, counts: new Array<number>(precision + 1).fill(0) });

/** The bucket `b` and offset `o` of `now` (a later stored index wins, at offset 0), and the counts moved on to `b`. */
export function bucketsAt(state: BucketState, now: number, policy: ModelPolicy): { b: number; o: number; c: number[] } {
  const N = policy.precision ?? 1;
  const W = policy.window;
  let b = Math.floor((now * N) / W);
  let o = now * N - b * W;
  if (state.index > b) [b, o] = [state.index, 0];
  const slid = b - state.index;
  const c = Array.from({ length: N + 1 }, (_, k) => (k >= slid ? state.counts[k - slid]! : 0));
  return { b, o, c };
}

/** The decision, per the spec's bullets: estimate, admission, remaining, resetAt, retryAfter. */
export function bucketsDecide(policy: ModelPolicy): Decide<BucketState> {
  const N = policy.precision ?? 1;
  const W = policy.window;
  const { nominal, capacity: C, softExtra } = capacityOf(policy);
  const firstMs = (bucket: number, offset: number): number => Math.ceil((bucket * W + offset) / N);
  return (state, now, cost) => {
    const { b, o, c } = bucketsAt(state, now, policy);
    const whole = c.slice(0, N).reduce((sum, count) => sum + count, 0);
    const estimate = whole + Math.floor((c[N]! * (W - o)) / W);
    const admit = cost <= C && estimate + cost <= C;
    if (admit) c[0] = c[0]! + cost;
    const raw = admit ? C - estimate - cost : C - estimate;
    const k = c.findIndex((count) => count > 0);
    const resetAt = k < 0 ? now : Math.max(now, firstMs(b - k + N, W - Math.floor((W - 1) / c[k]!)));
    let retryAfter = 0;
    if (!admit && cost > C) retryAfter = W;
    else if (!admit) {
      retryAfter = firstMs(b + N + 1, 0) - now;
      for (let d = 0; d <= N; d++) {
        const wholeD = c.slice(0, N - d).reduce((sum, count) => sum + count, 0);
        const weighted = c[N - d]!;
        const R = C - cost - wholeD;
        if (R < 0) continue;
        const least = weighted <= R ? 0 : W - Math.floor(((R + 1) * W - 1) / weighted);
        const m = firstMs(b + d, least);
        if (least < W && m < firstMs(b + d + 1, 0)) {
          retryAfter = m - now;
          break;
        }
      }
    }
    const decision = { limit: nominal, now, allowed: admit, remaining: Math.max(0, raw - softExtra), resetAt, retryAfter, ...(cost > C ? { reason: 'cost-exceeds-capacity' as const } : {}) };
    return { decision, next: admit ? { index: b, counts: c } : state };
  };
}
