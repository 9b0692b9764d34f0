/**
 * The reference model of the model-based suite: each of the six algorithms written out from
 * docs/semantics.md alone, as plainly as the spec reads — one state object per key, every formula
 * in the order the spec gives it, no spans, no packed state, no shared code with src/algorithms/
 * (importing those would test them against themselves). Numbers stay small in the schedules
 * (limits ≤ 20, windows ≤ a minute), so plain JS integers are exact here.
 */
import type { Decision } from '../../src/index.js';

export type ModelAlgorithm = 'token-bucket' | 'leaky-bucket' | 'gcra' | 'fixed-window' | 'sliding-log' | 'sliding-window';

export const MODEL_ALGORITHMS: readonly ModelAlgorithm[] = ['token-bucket', 'leaky-bucket', 'gcra', 'fixed-window', 'sliding-log', 'sliding-window'];

/** The policies the schedules draw: a subset of Tollgate's `Policy`, window in ms. */
export interface ModelPolicy {
  readonly algorithm: ModelAlgorithm;
  readonly limit: number;
  readonly window: number;
  readonly burst?: number;
  readonly softPercent?: number;
  readonly windowStart?: 'aligned' | 'first-hit';
  /** sliding-window only (buckets-reference.ts when > 1; the reserve-then-settle schedules draw it). */
  readonly precision?: number;
}

/** What the model says of one request: a `Decision` (the type only: nothing of src/ decides here). */
export type ModelDecision = Omit<Decision, 'reason'> & { readonly reason?: 'cost-exceeds-capacity' };

/** One key under one policy: `limit` decides and records, `peek` decides only. */
export interface KeyModel {
  limit(now: number, cost: number): ModelDecision;
  peek(now: number, cost: number): ModelDecision;
}

const ceilDiv = (a: number, b: number): number => Math.ceil(a / b);
const usesBurst = (algorithm: ModelAlgorithm): boolean => algorithm === 'token-bucket' || algorithm === 'leaky-bucket' || algorithm === 'gcra';

/** "Common": nominal capacity C0, effective capacity C, and the soft extra hidden from `remaining`. */
export function capacityOf(policy: ModelPolicy): { readonly nominal: number; readonly capacity: number; readonly softExtra: number } {
  const nominal = usesBurst(policy.algorithm) ? (policy.burst ?? policy.limit) : policy.limit;
  const capacity = Math.floor((nominal * (100 + (policy.softPercent ?? 0))) / 100);
  return { nominal, capacity, softExtra: capacity - nominal };
}

/** A decision and the state it leaves (the same state when nothing is recorded). */
interface Step<S> {
  readonly decision: ModelDecision;
  readonly next: S;
}

export type Decide<S> = (state: S, now: number, cost: number) => Step<S>;

function keyModel<S>(initial: S, decide: Decide<S>): KeyModel {
  let state = initial;
  return {
    limit(now, cost) {
      const step = decide(state, now, cost);
      state = step.next;
      return step.decision;
    },
    peek(now, cost) {
      return decide(state, now, cost).decision;
    },
  };
}

/** A fresh key under `policy`. */
export function referenceModel(policy: ModelPolicy): KeyModel {
  switch (policy.algorithm) {
    case 'token-bucket':
    case 'leaky-bucket':
    case 'gcra':
      return keyModel({ level: 0, last: 0 }, levelDecide(policy));
    case 'fixed-window':
      return keyModel(undefined, fixedWindowDecide(policy));
    case 'sliding-log':
      return keyModel([], slidingLogDecide(policy));
    case 'sliding-window':
      return keyModel({ current: 0, start: -Infinity, previous: 0 }, slidingWindowDecide(policy));
  }
}

/**
 * "Level algorithms": one request is worth W units, the level drains L units per ms. gcra's
 * decisions are token-bucket's for one policy; leaky-bucket adds `delay`.
 */
export function levelDecide(policy: ModelPolicy): Decide<{ level: number; last: number }> {
  const W = policy.window;
  const L = policy.limit;
  const { nominal, capacity: C, softExtra } = capacityOf(policy);
  const leaky = policy.algorithm === 'leaky-bucket';
  return (state, now, cost) => {
    const level = Math.max(0, state.level - (now - state.last) * L);
    const shown = (after: number) => Math.max(0, Math.floor((C * W - after) / W) - softExtra);
    const base = { limit: nominal, now };
    if (cost > C) {
      const decision = { ...base, allowed: false, remaining: shown(level), resetAt: now + ceilDiv(level, L), retryAfter: W, reason: 'cost-exceeds-capacity' as const };
      return { decision: leaky ? { ...decision, delay: 0 } : decision, next: state };
    }
    if (level + cost * W > C * W) {
      const decision = { ...base, allowed: false, remaining: shown(level), resetAt: now + ceilDiv(level, L), retryAfter: ceilDiv(level + cost * W - C * W, L) };
      return { decision: leaky ? { ...decision, delay: 0 } : decision, next: state };
    }
    const after = level + cost * W;
    const decision = { ...base, allowed: true, remaining: shown(after), resetAt: now + ceilDiv(after, L), retryAfter: 0 };
    return { decision: leaky ? { ...decision, delay: ceilDiv(level, L) } : decision, next: { level: after, last: now } };
  };
}

/** "fixed-window", aligned or first-hit: the stored window is `{ start, count }`. */
export function fixedWindowDecide(policy: ModelPolicy): Decide<{ start: number; count: number } | undefined> {
  const W = policy.window;
  const { nominal, capacity: C, softExtra } = capacityOf(policy);
  const firstHit = policy.windowStart === 'first-hit';
  return (stored, now, cost) => {
    let start: number;
    if (firstHit) start = stored !== undefined && now < stored.start + W ? stored.start : now;
    else start = Math.max(Math.floor(now / W) * W, stored?.start ?? -Infinity);
    const count = stored !== undefined && stored.start === start ? stored.count : 0;
    const admit = cost <= C && count + cost <= C;
    const after = admit ? count + cost : count;
    const decision = {
      limit: nominal,
      now,
      allowed: admit,
      remaining: Math.max(0, C - after - softExtra),
      resetAt: after > 0 ? start + W : now,
      retryAfter: admit ? 0 : cost > C ? W : start + W - now,
      ...(cost > C ? { reason: 'cost-exceeds-capacity' as const } : {}),
    };
    return { decision, next: admit ? { start, count: after } : stored };
  };
}

/** "sliding-log": entries `(t, weight)` oldest first; merged when `t` repeats. */
export function slidingLogDecide(policy: ModelPolicy): Decide<readonly { t: number; weight: number }[]> {
  const W = policy.window;
  const { nominal, capacity: C, softExtra } = capacityOf(policy);
  return (log, now, cost) => {
    const live = log.filter((entry) => entry.t > now - W);
    const count = live.reduce((sum, entry) => sum + entry.weight, 0);
    const admit = cost <= C && count + cost <= C;
    let next = live;
    if (admit) {
      const newest = live.at(-1);
      const t = Math.max(now, newest?.t ?? -Infinity);
      next = newest !== undefined && newest.t === t ? [...live.slice(0, -1), { t, weight: newest.weight + cost }] : [...live, { t, weight: cost }];
    }
    const after = admit ? count + cost : count;
    const resetAt = next.length > 0 ? next.at(-1)!.t + W : now;
    let retryAfter = 0;
    if (!admit && cost > C) retryAfter = W;
    else if (!admit) {
      let expired = 0;
      for (const entry of next) {
        expired += entry.weight;
        if (after - expired <= C - cost) {
          retryAfter = entry.t + W - now;
          break;
        }
      }
    }
    const decision = { limit: nominal, now, allowed: admit, remaining: Math.max(0, C - after - softExtra), resetAt, retryAfter, ...(cost > C ? { reason: 'cost-exceeds-capacity' as const } : {}) };
    // Denied or not, the entries out of the window are gone (as in both stores): a clock that
    // goes back later does not bring them back.
    return { decision, next: admit ? next : live };
  };
}

/** "sliding-window (counter)", precision 1: state `(curr, currStart, prev)`. */
export function slidingWindowDecide(policy: ModelPolicy): Decide<{ current: number; start: number; previous: number }> {
  const W = policy.window;
  const { nominal, capacity: C, softExtra } = capacityOf(policy);
  return (stored, now, cost) => {
    let start = Math.floor(now / W) * W;
    let e = now - start;
    if (stored.start > start) [start, e] = [stored.start, 0];
    let current = 0;
    let previous = 0;
    if (stored.start === start) [current, previous] = [stored.current, stored.previous];
    else if (stored.start === start - W) previous = stored.current;
    const prevWeighted = Math.floor((previous * (W - e)) / W);
    const estimate = current + prevWeighted;
    const admit = cost <= C && estimate + cost <= C;
    const after = admit ? current + cost : current;
    let resetAt = now;
    if (after > 0) resetAt = start + 2 * W - Math.floor((W - 1) / after);
    else if (previous > 0) resetAt = Math.max(now, start + W - Math.floor((W - 1) / previous));
    let retryAfter = 0;
    if (!admit && cost > C) retryAfter = W;
    else if (!admit) {
      const R = C - cost - current;
      const eStar = R >= 0 && previous > 0 ? W - Math.floor(((R + 1) * W - 1) / previous) : W;
      if (eStar < W) retryAfter = start + eStar - now;
      else {
        const e2 = current === 0 ? 0 : Math.max(0, W - Math.floor(((C - cost + 1) * W - 1) / current));
        retryAfter = start + W + e2 - now;
      }
    }
    const decision = { limit: nominal, now, allowed: admit, remaining: Math.max(0, C - (after + prevWeighted) - softExtra), resetAt, retryAfter, ...(cost > C ? { reason: 'cost-exceeds-capacity' as const } : {}) };
    return { decision, next: admit ? { current: after, start, previous } : stored };
  };
}
