/**
 * The multi-region bound's two small print (docs/scaling.md, "Multi-region"), on two real Redis
 * servers with controlled clocks (explicit `now` per region, so each region's clock is the test's):
 * - sliding-window "plus one": a region rounds down the weighted previous-window count it sees and
 *   the part it does not see separately, so the true estimate can pass the limit by what it did not
 *   see plus one;
 * - clock skew of `s` ms: around a window boundary the regions count in different windows, adding
 *   what a region admits in those `s` ms to the bound.
 * "True" figures are computed by the test from every admission at its true instant.
 */
import { describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, regionStore, startReplicator, type Limiter, type Policy } from '../../../src/index.js';
import { useRegionPair } from '../../support/regions.js';

const regions = useRegionPair(0);
const T0 = 1_700_000_000_000; // a multiple of the 1 s window
const W = 1_000;
const L = 10;
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

/** A limiter on `region`'s Redis, keys under `keyPrefix`, and the name of a key's hash there. */
async function node(region: 'eu' | 'us', keyPrefix: string): Promise<Limiter & { hashOf(key: string, policy: Policy): string }> {
  const store = regionStore({ region, url: regions[region].url, keyPrefix });
  await store.ready();
  const limiter = regions.track(createLimiter({ store, deadlineMs: 5_000 }));
  return Object.assign(limiter, { hashOf: (key: string, policy: Policy) => store.hashKey(key, compilePolicy(policy)) });
}

/** One admission at its true instant. */
interface Admitted {
  readonly at: number;
  readonly cost: number;
}

/** The sliding-window estimate at true instant `at` of everything admitted: current + ⌊previous × (W − elapsed) / W⌋. */
function trueEstimate(admitted: readonly Admitted[], at: number): number {
  const index = Math.floor(at / W);
  const sum = (window: number): number => admitted.filter((a) => Math.floor(a.at / W) === window && a.at <= at).reduce((total, a) => total + a.cost, 0);
  return sum(index) + Math.floor((sum(index - 1) * (W - (at - index * W))) / W);
}

/** Calls `limiter` `attempts` times at `now` (its region's clock), recording what it admits at true instant `trueAt`. */
async function admit(limiter: Limiter, key: string, policy: Policy, now: number, trueAt: number, attempts: number, into: Admitted[]): Promise<number> {
  let count = 0;
  for (let i = 0; i < attempts; i++) {
    if ((await limiter.limit(key, policy, { now })).allowed) {
      count += 1;
      into.push({ at: trueAt, cost: 1 });
    }
  }
  return count;
}

describe('multi-region: the small print of the bound', () => {
  it('sliding-window "plus one": the true estimate passes the limit by at most what a region did not see, plus one for rounding', async () => {
    // A prefix no replicator serves: each region sees nothing of the other (what it did not see: all).
    const prefix = `${unique('alone')}:`;
    const [eu, us] = [await node('eu', prefix), await node('us', prefix)];
    const policy: Policy = { algorithm: 'sliding-window', limit: L, window: W };
    const key = unique('rounding');
    const admitted: Admitted[] = [];
    // One each in the previous window, then at half the current window each region, seeing
    // ⌊1 × 0.5⌋ = 0 of its previous one, admits the full limit.
    for (const limiter of [eu, us]) expect(await admit(limiter, key, policy, T0 + 100, T0 + 100, 1, admitted)).toBe(1);
    const half = T0 + W + W / 2;
    const [inEu, inUs] = [await admit(eu, key, policy, half, half, L + 5, admitted), await admit(us, key, policy, half, half, L + 5, admitted)];
    expect([inEu, inUs]).toEqual([L, L]);
    // What us did not see of eu when it decided: eu's 10 of this window and ⌊1 × 0.5⌋ = 0 of the
    // previous one. The true estimate is 2 × 10 + ⌊2 × 0.5⌋ = 21: that plus one, exactly.
    const unseen = L + Math.floor(1 * 0.5);
    expect(trueEstimate(admitted, half)).toBe(L + unseen + 1);
  });

  it('clock skew of s ms adds what a region admits in those s ms around a boundary', async () => {
    const prefix = `${unique('skew')}:`;
    const replicators = [
      startReplicator({ region: 'eu', from: { url: regions.eu.url }, to: [{ region: 'us', url: regions.euToUs.url }], keyPrefix: prefix, intervalMs: 10 }),
      startReplicator({ region: 'us', from: { url: regions.us.url }, to: [{ region: 'eu', url: regions.usToEu.url }], keyPrefix: prefix, intervalMs: 10 }),
    ].map((replicator) => regions.track(replicator));
    await Promise.all(replicators.map((replicator) => replicator.ready()));
    const [eu, us] = [await node('eu', prefix), await node('us', prefix)];
    const s = 100; // us's clock runs s ms ahead of eu's (the true time)
    const results: Record<string, number[]> = {};
    for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
      const policy: Policy = { algorithm, limit: L, window: W };
      const key = unique(algorithm);
      /** Waits until `region`'s Redis holds `from`'s count of window `index` (what `from` admitted there). */
      const seen = (region: 'eu' | 'us', from: 'eu' | 'us', index: number, count: number): Promise<void> =>
        expect.poll(() => Number(regions[region].cli('HGET', eu.hashOf(key, policy), `${from}:${index}`)), { timeout: 5_000, interval: 10 }).toBe(count);
      const admitted: Admitted[] = [];
      // eu fills the window early, and us sees it…
      const early = await admit(eu, key, policy, T0 + 100, T0 + 100, L, admitted);
      await seen('us', 'eu', T0 / W, early);
      // …then s ms before the boundary, us's clock is past it: us counts in the next window.
      const late = T0 + W - s / 2;
      const skewed = await admit(us, key, policy, late + s, late, L + 5, admitted);
      await seen('eu', 'us', T0 / W + 1, skewed);
      // At the boundary eu sees us's admissions in its new window.
      const next = await admit(eu, key, policy, T0 + W, T0 + W, L, admitted);
      const inWindow = admitted.filter((a) => a.at < T0 + W).length;
      results[algorithm] = [early, skewed, next, inWindow];
      // In the true window: the limit plus what us admitted in the s ms before its end.
      const inLastS = admitted.filter((a) => a.at >= T0 + W - s && a.at < T0 + W).length;
      expect(inWindow).toBeLessThanOrEqual(L + inLastS);
      expect(trueEstimate(admitted, late)).toBeLessThanOrEqual(L + inLastS);
    }
    console.log(`[multi-region] clocks skewed by 100 ms, limit ${L} per ${W} ms: [eu early, us in the last s, eu after, true window] ${JSON.stringify(results)}`);
    // fixed-window: us admits a whole limit in the last s (20 in the true window); sliding-window:
    // us sees 10 × 0.95 of the previous window and admits 1 (11).
    expect(results).toEqual({ 'fixed-window': [L, L, 0, 2 * L], 'sliding-window': [L, 1, 0, L + 1] });
  });
});
