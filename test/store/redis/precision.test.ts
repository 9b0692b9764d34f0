/**
 * sliding-window with `precision: N` on a real Redis (decide.lua + sliding-window-buckets.lua):
 *  - random traffic (costs, peeks, a clock going back, plain and wide policies, multi-limit
 *    checks) decides on Redis exactly as on the memory store, which test/sliding-window-precision
 *    holds to a BigInt model of the spec; the vectors pin hand-checked decisions;
 *  - the key carries the precision (`sw10`), so a key never reads another precision's state, and
 *    the state is the string "index c0 c1 ... ck" without trailing zero counts;
 *  - a decision on Redis TIME (no lean script for N > 1) works, and unreadable state is an error
 *    that leaves the key alone.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, redisStore, StoreDataError, type Decision, type Policy, type Store } from '../../../src/index.js';
import { useRedisServer } from '../../support/redis-topologies.js';

const server = useRedisServer();
const EPOCH = 1_700_000_000_000;

async function openStore(): Promise<Store> {
  const store = redisStore({ url: server.url });
  server.stores.push(store);
  await store.ready();
  return store;
}

interface Step {
  readonly gap: number;
  readonly cost: number;
  readonly peek: boolean;
  readonly both: boolean;
}

/** Plays `steps` on one key (and, for `both` steps, a multi-limit check with a second policy). */
async function play(store: Store, key: string, policy: Policy, steps: readonly Step[]): Promise<Decision[]> {
  // A loaded machine must not turn a slow answer into a failure mode's: errors fail the test instead.
  const limiter = createLimiter({ store, deadlineMs: 10_000, failureMode: 'throw' });
  const other: Policy = { algorithm: 'sliding-window', limit: 7, window: 1000, precision: 4 };
  const decisions: Decision[] = [];
  let now = EPOCH;
  for (const step of steps) {
    now += step.gap;
    const options = { now, cost: step.cost };
    if (step.both) decisions.push(...(await limiter.limitAll([{ key, policy, cost: step.cost }, { key: `${key}:other`, policy: other }], { now })));
    else decisions.push(await (step.peek ? limiter.peek(key, policy, options) : limiter.limit(key, policy, options)));
  }
  await limiter.close();
  return decisions;
}

const stepArbitrary = (maxGap: number, maxCost: number): fc.Arbitrary<Step> =>
  fc.record({
    gap: fc.oneof(fc.constant(0), fc.integer({ min: -60, max: 60 }), fc.integer({ min: 0, max: maxGap })),
    cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: maxCost })),
    peek: fc.boolean(),
    both: fc.boolean(),
  });

describe('precision N > 1 on Redis', () => {
  it.each([
    ['plain', fc.record({ limit: fc.integer({ min: 1, max: 30 }), window: fc.constantFrom(1000, 999, 60_000, 7), precision: fc.constantFrom(2, 4, 7, 10, 60, 100) }), 8_000, 8],
    ['wide', fc.record({ limit: fc.integer({ min: 200_000_000, max: 4_294_967_295 }), window: fc.constant(86_400_000), precision: fc.constantFrom(10, 60) }), 20_000_000, 2_000_000_000],
  ] as const)('%s policies decide on Redis as on memory', async (_kind, fields, maxGap, maxCost) => {
    const runs = fc.sample(fc.tuple(fields, fc.array(stepArbitrary(maxGap, maxCost), { minLength: 10, maxLength: 40 })), { numRuns: 20, seed: 16 });
    const seen = { allowed: 0, denied: 0 };
    for (const [run, [policyFields, steps]] of runs.entries()) {
      const policy: Policy = { algorithm: 'sliding-window', ...policyFields, window: Math.max(policyFields.window, policyFields.precision) };
      const key = `precision:${run}:${Date.now()}`;
      const expected = await play(memoryStore({ sweepIntervalMs: 0 }), key, policy, steps);
      expect(await play(await openStore(), key, policy, steps), `run ${run}: ${JSON.stringify(policy)}`).toEqual(expected);
      for (const decision of expected) seen[decision.allowed ? 'allowed' : 'denied'] += 1;
    }
    expect(seen.allowed).toBeGreaterThan(50);
    expect(seen.denied).toBeGreaterThan(50);
  });

  it('keeps each precision under a key of its own, as "index c0 c1 ... ck" without trailing zeros', async () => {
    const limiter = createLimiter({ store: await openStore(), deadlineMs: 10_000, failureMode: 'throw' });
    const key = `layout:${Date.now()}`;
    const policy: Policy = { algorithm: 'sliding-window', limit: 10, window: '1m', precision: 10 };
    // Buckets of 6 s: 3 hits in bucket b, 2 in b + 2; then one of precision 1 on the same key.
    const start = 1_700_000_040_000; // a multiple of 6000: bucket 283,333,340's first ms
    await limiter.limit(key, policy, { now: start, cost: 3 });
    await limiter.limit(key, policy, { now: start + 12_000, cost: 2 });
    await limiter.limit(key, { algorithm: 'sliding-window', limit: 10, window: '1m' }, { now: start });
    expect(server.cli('GET', `tollgate:{${key}}:sw10:1m`).trim()).toBe('283333342 2 0 3');
    expect(server.cli('GET', `tollgate:{${key}}:sw:1m`).trim()).toBe(`1 ${Math.floor(start / 60_000)} 0`);
    // On Redis TIME (the batch script: no lean script decides N > 1 buckets).
    const live = await limiter.limit(`${key}:live`, policy);
    expect(live).toMatchObject({ allowed: true, remaining: 9 });
    expect(server.cli('GET', `tollgate:{${key}:live}:sw10:1m`).trim()).toMatch(/^\d+ 1$/);
    await limiter.close();
  });

  it.each(['garbage', '5', '1 2 -3', `1 ${'1 '.repeat(11).trim()} 1`])('refuses to read the state %j and leaves it alone', async (state) => {
    const limiter = createLimiter({ store: await openStore(), deadlineMs: 10_000, failureMode: 'throw' });
    const key = `corrupt:${Date.now()}:${state.length}`;
    server.cli('SET', `tollgate:{${key}}:sw10:1m`, state);
    await expect(limiter.limit(key, { algorithm: 'sliding-window', limit: 10, window: '1m', precision: 10 }, { now: EPOCH })).rejects.toThrow(StoreDataError);
    expect(server.cli('GET', `tollgate:{${key}}:sw10:1m`).trim()).toBe(state);
    await limiter.close();
  });
});
