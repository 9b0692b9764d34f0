/**
 * A lease keeps the algorithm's own caps at every instant a leased permit is spent: random
 * schedules of three nodes (limiters sharing one memory store, each with its own leases), checked
 * against the cap written from docs/algorithms.md — a fixed window admits at most `limit` per
 * window; a sliding window admits a request at s only while current(s) + ⌊previous × (W − elapsed) / W⌋
 * ≤ limit, counting every request admitted so far.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, type Policy } from '../../src/index.js';

const W = 1_000;
const LIMIT = 10;
const T0 = 1_700_000_000_000;

/** Steps of a schedule: which node calls, and how many ms after the previous call. */
const schedule = fc.array(fc.record({ node: fc.integer({ min: 0, max: 2 }), gap: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 300, max: 1_100 })) }), { minLength: 20, maxLength: 120 });

async function admittedTimes(policy: Policy, lease: number, steps: readonly { node: number; gap: number }[]): Promise<number[]> {
  const store = memoryStore({ sweepIntervalMs: 0 });
  const nodes = [0, 1, 2].map(() => createLimiter({ store }));
  const admitted: number[] = [];
  let now = T0 + 900;
  for (const { node, gap } of steps) {
    now += gap;
    if ((await nodes[node]!.limit('k', policy, { lease, now })).allowed) admitted.push(now);
  }
  await store.close();
  return admitted;
}

const windowOf = (t: number): number => Math.floor(t / W);

describe('a lease keeps the algorithm\'s caps', () => {
  it('fixed-window: at most the limit in every window, whatever three nodes do', async () => {
    await fc.assert(
      fc.asyncProperty(schedule, fc.integer({ min: 2, max: 10 }), async (steps, lease) => {
        const admitted = await admittedTimes({ algorithm: 'fixed-window', limit: LIMIT, window: W }, lease, steps);
        const perWindow = new Map<number, number>();
        for (const t of admitted) perWindow.set(windowOf(t), (perWindow.get(windowOf(t)) ?? 0) + 1);
        for (const count of perWindow.values()) expect(count).toBeLessThanOrEqual(LIMIT);
      }),
      { numRuns: 60 },
    );
  });

  it('sliding-window: every admitted request passes the rolling estimate at its own instant, whatever three nodes do', async () => {
    await fc.assert(
      fc.asyncProperty(schedule, fc.integer({ min: 2, max: 10 }), async (steps, lease) => {
        const admitted = await admittedTimes({ algorithm: 'sliding-window', limit: LIMIT, window: W }, lease, steps);
        admitted.forEach((s, i) => {
          const upTo = admitted.slice(0, i + 1);
          const current = upTo.filter((t) => windowOf(t) === windowOf(s)).length;
          const previous = upTo.filter((t) => windowOf(t) === windowOf(s) - 1).length;
          const elapsed = s - windowOf(s) * W;
          expect(current + Math.floor((previous * (W - elapsed)) / W)).toBeLessThanOrEqual(LIMIT);
        });
      }),
      { numRuns: 60 },
    );
  });
});
