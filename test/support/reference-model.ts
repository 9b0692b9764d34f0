/**
 * docs/semantics.md's level and sliding-window sections written out in BigInt, unbounded: the
 * reference the wide arithmetic must equal at magnitudes far past 2^53 (test/algorithms/wide.test.ts).
 * Deliberately naive: no spans, no mulDivmod, just the formulas of the spec.
 */
import type { Decision, Policy } from '../../src/index.js';

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;
const max = (a: bigint, b: bigint): bigint => (a > b ? a : b);

export interface ReferenceModel {
  decide(now: number, cost: number, commit: boolean): Partial<Decision>;
}

function capacities(policy: Policy, usesBurst: boolean): { nominal: bigint; capacity: bigint } {
  const nominal = BigInt(usesBurst ? (policy.burst ?? policy.limit) : policy.limit);
  return { nominal, capacity: (nominal * BigInt(100 + (policy.softPercent ?? 0))) / 100n };
}

function shown(raw: bigint, capacity: bigint, nominal: bigint): number {
  return Number(max(0n, raw - (capacity - nominal)));
}

/** token-bucket, leaky-bucket and gcra (the same decisions for one policy). */
export function levelModel(policy: Policy): ReferenceModel {
  const L = BigInt(policy.limit);
  const W = BigInt(policy.window as number);
  const { nominal, capacity: C } = capacities(policy, true);
  const shaping = policy.algorithm === 'leaky-bucket';
  let stored = 0n;
  let last = 0n;
  return {
    decide(nowNumber, costNumber, commit) {
      const now = BigInt(nowNumber);
      const cost = BigInt(costNumber);
      const level = max(0n, stored - (now - last) * L);
      const room = (x: bigint) => shown(C * W > x ? (C * W - x) / W : 0n, C, nominal);
      const base = { limit: Number(nominal) };
      let decision: { -readonly [F in keyof Decision]?: Decision[F] };
      if (cost > C) {
        decision = { ...base, allowed: false, remaining: room(level), resetAt: Number(now + ceilDiv(level, L)), retryAfter: Number(W), reason: 'cost-exceeds-capacity' };
      } else if (level + cost * W > C * W) {
        decision = { ...base, allowed: false, remaining: room(level), resetAt: Number(now + ceilDiv(level, L)), retryAfter: Number(ceilDiv(level + cost * W - C * W, L)) };
      } else {
        const next = level + cost * W;
        decision = { ...base, allowed: true, remaining: room(next), resetAt: Number(now + ceilDiv(next, L)), retryAfter: 0 };
        if (shaping) decision.delay = Number(ceilDiv(level, L));
        if (commit) [stored, last] = [next, now];
      }
      if (shaping && decision.delay === undefined) decision.delay = 0;
      return decision;
    },
  };
}

export function slidingWindowModel(policy: Policy): ReferenceModel {
  const W = BigInt(policy.window as number);
  const { nominal, capacity: C } = capacities(policy, false);
  let state = { current: 0n, start: 0n, previous: 0n };
  return {
    decide(nowNumber, costNumber, commit) {
      const now = BigInt(nowNumber);
      const cost = BigInt(costNumber);
      let start = (now / W) * W;
      let e = now - start;
      if (state.start > start) [start, e] = [state.start, 0n];
      const current = state.start === start ? state.current : 0n;
      const previous = state.start === start ? state.previous : state.start === start - W ? state.current : 0n;
      const weighted = (previous * (W - e)) / W;
      const estimate = current + weighted;
      const reset = (c: bigint): number => {
        if (c > 0n) return Number(start + 2n * W - (W - 1n) / c);
        if (previous > 0n) return Number(max(now, start + W - (W - 1n) / previous));
        return Number(now);
      };
      const base = { limit: Number(nominal) };
      if (cost > C) return { ...base, allowed: false, remaining: shown(C - estimate, C, nominal), resetAt: reset(current), retryAfter: Number(W), reason: 'cost-exceeds-capacity' };
      if (estimate + cost > C) {
        const R = C - cost - current;
        let retryAfter: bigint | undefined;
        if (R >= 0n && previous > 0n) {
          const offset = W - ((R + 1n) * W - 1n) / previous;
          if (offset < W) retryAfter = start + offset - now;
        }
        if (retryAfter === undefined) {
          const e2 = current === 0n ? 0n : max(0n, W - ((C - cost + 1n) * W - 1n) / current);
          retryAfter = start + W + e2 - now;
        }
        return { ...base, allowed: false, remaining: shown(C - estimate, C, nominal), resetAt: reset(current), retryAfter: Number(retryAfter) };
      }
      const next = current + cost;
      if (commit) state = { current: next, start, previous };
      return { ...base, allowed: true, remaining: shown(C - next - weighted, C, nominal), resetAt: reset(next), retryAfter: 0 };
    },
  };
}

/**
 * sliding-window with precision N > 1 (docs/semantics.md), naively: every bucket's count kept in a
 * map, the estimate summed from its definition, and retryAfter / resetAt found by searching each
 * bucket's whole ms (the estimate only falls within a bucket) rather than by the closed forms.
 */
export function slidingBucketsModel(policy: Policy): ReferenceModel {
  const W = BigInt(policy.window as number);
  const N = BigInt(policy.precision ?? 1);
  const { nominal, capacity: C } = capacities(policy, false);
  const counts = new Map<bigint, bigint>();
  let newest = -1n;
  const count = (bucket: bigint): bigint => counts.get(bucket) ?? 0n;
  const firstMs = (bucket: bigint): bigint => ceilDiv(bucket * W, N);
  /** The estimate at scaled instant bucket × W + offset, with `extra` more in bucket `at`. */
  const estimate = (bucket: bigint, offset: bigint, at: bigint, extra: bigint): bigint => {
    let sum = 0n;
    for (let j = bucket - N + 1n; j <= bucket; j++) sum += count(j) + (j === at ? extra : 0n);
    const oldest = count(bucket - N) + (bucket - N === at ? extra : 0n);
    return sum + (oldest * (W - offset)) / W;
  };
  /** The first whole ms ≥ `from` whose estimate passes `test`, searching bucket by bucket. */
  const firstWhere = (from: bigint, bucket: bigint, test: (b: bigint, o: bigint) => boolean): bigint => {
    for (let j = bucket; ; j++) {
      let lo = max(from, firstMs(j));
      let hi = firstMs(j + 1n) - 1n;
      if (lo > hi || !test(j, hi * N - j * W)) continue;
      while (lo < hi) {
        const mid = (lo + hi) / 2n;
        if (test(j, mid * N - j * W)) hi = mid;
        else lo = mid + 1n;
      }
      return lo;
    }
  };
  return {
    decide(nowNumber, costNumber, commit) {
      const now = BigInt(nowNumber);
      const cost = BigInt(costNumber);
      let bucket = (now * N) / W;
      let offset = now * N - bucket * W;
      if (newest > bucket) [bucket, offset] = [newest, 0n];
      const current = estimate(bucket, offset, bucket, 0n);
      const reset = (extra: bigint): number => {
        if (estimate(bucket, offset, bucket, extra) === 0n) return nowNumber;
        return Number(max(now, firstWhere(now, bucket, (b, o) => estimate(b, o, bucket, extra) === 0n)));
      };
      const base = { limit: Number(nominal) };
      if (cost > C) return { ...base, allowed: false, remaining: shown(C - current, C, nominal), resetAt: reset(0n), retryAfter: Number(W), reason: 'cost-exceeds-capacity' };
      if (current + cost > C) {
        const retryAt = firstWhere(now + 1n, bucket, (b, o) => estimate(b, o, bucket, 0n) + cost <= C);
        return { ...base, allowed: false, remaining: shown(C - current, C, nominal), resetAt: reset(0n), retryAfter: Number(retryAt - now) };
      }
      const decision = { ...base, allowed: true, remaining: shown(C - current - cost, C, nominal), resetAt: reset(cost), retryAfter: 0 };
      if (commit) {
        counts.set(bucket, count(bucket) + cost);
        newest = bucket;
      }
      return decision;
    },
  };
}
